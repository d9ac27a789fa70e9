"""Class capacity: memory per learner, and explorer latency with 1 to 20 learners on one hub.

    make class-bench     # root: it creates the learners' Unix accounts (a few minutes)

A real JupyterHub on this machine (tests/class/localhub/), each learner a Unix account with their
own server, the course delivered by nbgitpuller. Memory: one learner's server, then server plus
kernel after lesson 00, 04b and the capstone (11b), each lesson run top to bottom in a fresh
kernel. Latency: N learners (N = 1, 5, 10, 20) each run lesson 00 and then move its explorer's
slider in a loop, with a few seconds of think time between moves; the time from the control's
new value sent over the kernel websocket (as JupyterLab sends it, through the hub's proxy) to
the new picture received. Writes the "Class capacity" section of benchmarks/RESULTS.md, between
markers that `make bench` keeps.
"""

import importlib
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil

from course_server.launch import wait_until

# the class test's harness, tests/class/localhub/ (`class` is a keyword: no `import` statement)
localhub = importlib.import_module("tests.class.localhub")

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
START, END = "<!-- class-capacity: start -->", "<!-- class-capacity: end -->"
COUNTS = (1, 5, 10, 20)
PHASE_S = 45.0
THINK_S = (2.0, 4.0)  # uniform: a learner looks at the picture before the next move
TARGET_P95_MS = 100.0
LESSONS = {
    "after lesson 00": "00_start_here",
    "after lesson 04b": "04b_when_heads_help",
    "after the capstone (11b)": "11b_train_your_model",
}


def lesson_path(stem: str) -> str:
    return f"course/notebooks/{stem}.ipynb"


def kept_section(path: Path = RESULTS) -> str:
    """The class-capacity section of RESULTS.md, markers included ('' if there is none)."""
    text = path.read_text() if path.exists() else ""
    if START in text and END in text:
        return text[text.index(START) : text.index(END) + len(END)] + "\n"
    return ""


def with_section(text: str, section: str) -> str:
    """text with its class-capacity section replaced by section (or section appended)."""
    if START in text and END in text:
        rest = text[text.index(END) + len(END) :]
        return text[: text.index(START)] + section + rest.removeprefix("\n")
    return text.rstrip("\n") + "\n\n" + section


def cpu_times() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    fields = [float(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def class_cpu_seconds(hub: localhub.LocalHub, names: list[str]) -> float:
    """CPU seconds used so far by the hub, its proxy and every learner's processes."""
    root = psutil.Process(hub.process.pid)
    processes = [root, *root.children(recursive=True)]
    processes += [p for name in names for p in localhub.processes_of(name)]
    total = 0.0
    for process in {p.pid: p for p in processes}.values():
        try:
            times = process.cpu_times()
            total += times.user + times.system
        except psutil.NoSuchProcess:
            pass
    return total


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def hub_memory(hub: localhub.LocalHub) -> float:
    """MB RSS of the hub and its proxy (root's processes; learners' servers are not counted)."""
    root = psutil.Process(hub.process.pid)
    total = 0
    for process in [root, *root.children(recursive=True)]:
        try:
            if process.username() == "root":
                total += process.memory_info().rss
        except psutil.NoSuchProcess:  # a short-lived git or shell
            pass
    return total / 2**20


def deliver(hub: localhub.LocalHub, course: localhub.CourseRepo, name: str) -> localhub.Learner:
    learner = localhub.Learner(hub, name)
    learner.login()
    learner.open_link(learner.link(course.url))
    learner.pull(course.url)
    learner.token = hub.new_token(name)
    return learner


def no_kernels(name: str) -> None:
    def gone():
        return not any("ipykernel" in " ".join(p.cmdline()) for p in localhub.processes_of(name))

    wait_until(gone, 30, f"{name}'s kernel to stop")


def memory_points(learner: localhub.Learner) -> list[dict]:
    rows = [{"point": "server alone (course delivered)", **localhub.memory_of(learner.name)}]
    for point, stem in LESSONS.items():
        kernel = learner.kernel(lesson_path(stem))
        start = time.perf_counter()
        kernel.run_notebook(learner.notebook(lesson_path(stem)))
        seconds = time.perf_counter() - start
        rows.append({"point": point, "run_s": seconds, **localhub.memory_of(learner.name)})
        kernel.close()
        no_kernels(learner.name)
        print(f"  {point}: {rows[-1]}", flush=True)
    return rows


def ready_slider(learner: localhub.Learner) -> localhub.Slider:
    kernel = learner.kernel(lesson_path("00_start_here"))
    kernel.run_notebook(learner.notebook(lesson_path("00_start_here")))
    slider = localhub.Slider(kernel)
    for _ in range(2):  # the first redraws fill caches: not what a learner waits for later
        slider.move()
    return slider


def phase(
    hub: localhub.LocalHub,
    names: list[str],
    sliders: list[localhub.Slider],
    seconds: float,
    seed: int,
) -> dict:
    """Each slider's learner moves it, thinks, moves it again, until the phase ends."""
    times, lock = [], threading.Lock()
    deadline = time.monotonic() + seconds

    def learner_loop(index: int, slider: localhub.Slider) -> None:
        rng = random.Random(seed * 1000 + index)
        time.sleep(rng.uniform(0, THINK_S[1]))  # learners do not start in step
        while time.monotonic() < deadline:
            elapsed, _ = slider.move()
            with lock:
                times.append(elapsed * 1000)
            time.sleep(rng.uniform(*THINK_S))

    busy0, total0 = cpu_times()
    class0, start = class_cpu_seconds(hub, names), time.monotonic()
    threads = [threading.Thread(target=learner_loop, args=(i, s)) for i, s in enumerate(sliders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    busy1, total1 = cpu_times()
    class1, wall = class_cpu_seconds(hub, names), time.monotonic() - start
    return {
        "learners": len(sliders),
        "changes": len(times),
        "p50_ms": statistics.median(times),
        "p95_ms": percentile(times, 0.95),
        "max_ms": max(times),
        "cpu_busy": (busy1 - busy0) / (total1 - total0),
        "class_cores": (class1 - class0) / wall,
    }


def measure() -> dict:
    folder = Path(tempfile.mkdtemp(prefix="class-capacity-"))
    course = localhub.CourseRepo(folder / "course", os.environ.get("CLASS_TEST_COURSE")).start()
    accounts = localhub.Accounts(prefix="classbench")
    hub = None
    try:
        names = accounts.create(max(COUNTS))
        hub = localhub.LocalHub(folder / "hub", names).start()
        print(f"hub up; delivering the course to {len(names)} learners ...", flush=True)
        with ThreadPoolExecutor(max_workers=4) as pool:
            learners = list(pool.map(lambda n: deliver(hub, course, n), names))
        print("memory of one learner ...", flush=True)
        memory = memory_points(learners[0])
        print("lesson 00 in every learner's kernel ...", flush=True)
        with ThreadPoolExecutor(max_workers=2) as pool:
            sliders = list(pool.map(ready_slider, learners))
        used = psutil.virtual_memory()
        whole_class = {
            "learners": len(learners),
            "hub_rss": hub_memory(hub),
            "learners_pss": sum(
                m["server_pss"] + m["kernel_pss"] for m in map(localhub.memory_of, names)
            ),
            "machine_used": (used.total - used.available) / 2**20,
        }
        phases = []
        for count in COUNTS:
            print(f"{count} learner(s) moving sliders for {PHASE_S:.0f} s ...", flush=True)
            phases.append(phase(hub, names, sliders[:count], PHASE_S, seed=count))
            print(f"  {phases[-1]}", flush=True)
        for slider in sliders:
            slider.kernel.close()
        return {"memory": memory, "whole_class": whole_class, "phases": phases}
    finally:
        if hub is not None:
            hub.stop()
        course.stop()
        accounts.remove()
        shutil.rmtree(folder, ignore_errors=True)


def report(results: dict) -> str:
    cores = os.cpu_count()
    memory, whole, phases = results["memory"], results["whole_class"], results["phases"]
    lines = [
        START,
        "## Class capacity (one JupyterHub, one machine)",
        "",
        f"Regenerate with `make class-bench`. JupyterHub 6.1.1 with configurable-http-proxy 5.3.0 "
        f"on this machine ({cores} cores, "
        f"{psutil.virtual_memory().total / 2**30:.0f} GiB), deploy/jupyterhub_config.py: each "
        "learner a Unix account with their own server, the course delivered by nbgitpuller.",
        "",
        "### Memory of one learner (MB)",
        "",
        "RSS counts the libraries a process maps (torch's among them) in full, as a container's "
        "memory limit does; PSS splits pages shared between processes among them, which is what "
        "many learners on one machine add up to.",
        "",
        "| point | lesson run (s) | server RSS | kernel RSS | server + kernel RSS | "
        "server + kernel PSS |",
        "|---|---|---|---|---|---|",
    ]
    for row in memory:
        run = f"{row['run_s']:.0f}" if "run_s" in row else "-"
        lines.append(
            f"| {row['point']} | {run} | {row['server_rss']:.0f} | {row['kernel_rss']:.0f} | "
            f"{row['server_rss'] + row['kernel_rss']:.0f} | "
            f"{row['server_pss'] + row['kernel_pss']:.0f} |"
        )
    lines += [
        "",
        f"Hub and proxy: {whole['hub_rss']:.0f} MB RSS. With {whole['learners']} learners, each "
        f"with lesson 00's kernel: {whole['learners_pss']:.0f} MB PSS for their servers and "
        f"kernels ({whole['learners_pss'] / whole['learners']:.0f} MB each); the machine's used "
        f"memory was {whole['machine_used'] / 1024:.1f} GiB.",
        "",
        "### Explorer latency with N learners",
        "",
        "Each learner moves lesson 00's slider, then thinks for "
        f"{THINK_S[0]:.0f}-{THINK_S[1]:.0f} s (uniform) before the next move, for "
        f"{PHASE_S:.0f} s; time from the control's new value sent over the kernel websocket "
        "(through the proxy and the learner's server) to the new picture received. The other "
        "learners' kernels stay open, idle. *Class CPU* is the cores the hub, the proxy and all "
        "learners' processes used on average; *machine busy* is the whole machine, anything "
        "else running included.",
        "",
        "| learners moving | changes | p50 ms | p95 ms | max ms | class CPU (cores) | "
        "machine busy | p95 <= 100 ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in phases:
        lines.append(
            f"| {row['learners']} | {row['changes']} | {row['p50_ms']:.0f} | "
            f"{row['p95_ms']:.0f} | {row['max_ms']:.0f} | {row['class_cores']:.2f} | "
            f"{row['cpu_busy']:.0%} | "
            f"{'met' if row['p95_ms'] <= TARGET_P95_MS else '**missed**'} |"
        )
    lines += ["", END, ""]
    return "\n".join(lines)


def main() -> int:
    if os.geteuid() != 0:
        print("make class-bench creates learners' Unix accounts: run it as root", file=sys.stderr)
        return 2
    section = report(measure())
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    RESULTS.write_text(with_section(text, section))
    print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
