"""Explorer latency where the learner feels it: input event to new picture painted, in a browser.

JupyterLab (as `make lab` runs it) under headless Chromium, one notebook that shows every
explorer in `EXPLORERS`. Every control of every explorer is moved `moves` times, as a learner
moves it (a slider by its arrow keys, a button clicked, a sentence typed and Enter pressed),
and each move is timed from the page's own clock and the kernel's message dates
(browser_probe.js), step by step:

  input -> websocket send           the widget front end noticing the input and sending it
  send -> kernel starts handling    server and zmq to the kernel, kernel picking it up
  kernel: recompute, draw, encode   the explorer's update() and redraw(), to the PNG sent
  kernel -> browser websocket       kernel to server over zmq, server to page over websocket
  event -> <img src> set            the widget front end turning the bytes into a blob URL
  src set -> decoded and painted    image decode and the next frame

The kernel's dates and the page's clock are the same machine's clock; they are compared in
milliseconds since the epoch (performance.timeOrigin + performance.now()).
`nodelay=False` runs the same without the course's server extension (Nagle left on), to
measure what TCP_NODELAY buys.
"""

import json
import statistics
import tempfile
from datetime import datetime
from pathlib import Path

import nbformat

from course_lib.widgets import EXPLORERS, TYPED_SAMPLES
from course_server.launch import CHROMIUM, CHROMIUM_FLAGS, start_lab
from tools.lab_page import start_run_all

PROBE = Path(__file__).with_name("browser_probe.js")
TARGET_MEDIAN_MS, TARGET_P95_MS, TARGET_WORST_MS = 40.0, 60.0, 100.0
# the window of issue 18's measurement: a laptop-sized JupyterLab with the file browser open
VIEWPORT = {"width": 1400, "height": 1000}
IDLE = ".jp-Notebook-ExecutionIndicator[data-status='idle']"
EXPLORER = ".jp-OutputArea-output:has(img.widget-image)"
STEPS = (
    ("input_to_send", "input -> websocket send"),
    ("send_to_kernel", "send -> kernel starts handling"),
    ("kernel", "kernel: recompute, draw, PNG encode"),
    ("kernel_to_browser", "kernel message -> browser websocket event"),
    ("event_to_src", "event -> `<img src>` set"),
    ("src_to_paint", "src set -> decoded and next frame painted"),
    ("total", "**input -> new picture painted**"),
)

# Every control in one explorer's output: its kind and its label; each gets data-bench=i.
FIND_CONTROLS = """out => {
    const found = [];
    const text = el => (el?.textContent || '').replace(/\u200b/g, '').trim();
    const label = el => {
        if (el.matches('.widget-toggle-buttons')) return text(el.querySelector(':scope > label'));
        const box = el.closest('.widget-inline-hbox');
        return text(box?.querySelector('.widget-label-basic span'))
            || text(box?.querySelector('.widget-label'));
    };
    for (const el of out.querySelectorAll(
            '.noUi-handle, .widget-toggle-buttons, .widget-checkbox input, .widget-text input')) {
        if (el.closest('.widget-toggle-buttons') && !el.matches('.widget-toggle-buttons')) continue;
        const kind = el.matches('.noUi-handle') ? 'slider'
            : el.matches('.widget-toggle-buttons') ? 'buttons'
            : el.matches('input[type=checkbox]') ? 'checkbox' : 'text';
        el.dataset.bench = String(found.length);
        const first = kind === 'buttons'  // a row of buttons with no label: its first two
            ? [...el.querySelectorAll('button')].slice(0, 2).map(text).join(' / ') + ' ...' : kind;
        found.push({kind, label: label(el) || first});
    }
    return found;
}"""
DONE = """() => {
    const log = window.__probe.record();
    if (!log || log.input === null || log.sends.length === 0) return false;
    const idle = id => log.kernel.some(k => k.kind === 'idle' && k.parent === id);
    if (!log.sends.every(s => idle(s.id))) return false;
    const pictures = log.kernel.filter(k => k.kind === 'picture').length;
    return log.paints.length >= pictures;
}"""


def bench_notebook(path: Path) -> list[str]:
    """A notebook that shows every explorer, one per cell; returns their names."""
    names = [cls.__name__ for cls in EXPLORERS]
    cells = [nbformat.v4.new_code_cell("from course_lib.widgets import EXPLORERS")]
    cells += [nbformat.v4.new_code_cell(f"EXPLORERS[{i}]()") for i in range(len(names))]
    kernel = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nbformat.write(nbformat.v4.new_notebook(cells=cells, metadata={"kernelspec": kernel}), path)
    return names


def kernel_ms(date: str, origin: float) -> float:
    """A kernel message's date on the page's clock (ms since the page's time origin)."""
    return datetime.fromisoformat(date.replace("Z", "+00:00")).timestamp() * 1000 - origin


def changed_readout(log: dict) -> bool:
    """Whether the kernel changed some widget other than the picture (a readout, a message)
    in reply to the move: ipywidgets echoes the moved control as `echo_update`, not `update`."""
    return any(k["kind"] == "update" for k in log["kernel"])


def breakdown(log: dict, origin: float) -> dict | None:
    """One move's steps in ms, or None where no picture came (a readout-only move)."""
    send = log["sends"][0]
    busy = next(k for k in log["kernel"] if k["kind"] == "busy" and k["parent"] == send["id"])
    pictures = [k for k in log["kernel"] if k["kind"] == "picture"]
    if not pictures or not log["paints"]:
        return None
    picture = pictures[-1]
    src = next((s for s in log["srcs"] if s["t"] >= picture["t"]), log["srcs"][-1])
    paint = next(p for p in log["paints"] if log["srcs"][p["index"]] is src)
    sent_at = kernel_ms(picture["date"], origin)
    busy_at = kernel_ms(busy["date"], origin)
    return {
        "input_to_send": send["t"] - log["input"]["t"],
        "send_to_kernel": busy_at - send["t"],
        "kernel": sent_at - busy_at,
        "kernel_to_browser": picture["t"] - sent_at,
        "event_to_src": src["t"] - picture["t"],
        "src_to_paint": paint["t"] - src["t"],
        "total": paint["t"] - log["input"]["t"],
        "png_bytes": picture["bytes"],
    }


def move_control(page, output, index: int, kind: str, step: int):
    """Arm the probe and move control `index` once; text boxes get a sentence typed first."""
    control = output.locator(f"[data-bench='{index}']")
    if kind == "text":
        control.fill(TYPED_SAMPLES[step % len(TYPED_SAMPLES)])
    page.evaluate("() => window.__probe.arm()")
    if kind == "slider":
        now, top = (control.get_attribute(a) for a in ("aria-valuenow", "aria-valuemax"))
        bottom = control.get_attribute("aria-valuemin")
        # walk right, and back at the end (zigzag), so every move changes the value
        forward = (step // 2) % 2 == 0 if float(top) - float(bottom) <= 1 else now != top
        if now == bottom:
            forward = True
        control.focus()
        control.press("ArrowRight" if forward else "ArrowLeft")
    elif kind == "buttons":
        buttons = control.locator("button")
        active = control.evaluate(
            "g => [...g.querySelectorAll('button')].findIndex(b => b.matches('.mod-active'))"
        )
        buttons.nth((active + 1) % buttons.count()).click()
    elif kind == "checkbox":
        control.click()
    else:
        control.press("Enter")


def measure_page(page, names: list[str], moves: int, shots: Path | None = None) -> list[dict]:
    origin = page.evaluate("() => window.__probe.timeOrigin()")
    outputs = page.locator(EXPLORER)
    rows = []
    for i, name in enumerate(names):
        output = outputs.nth(i)
        output.scroll_into_view_if_needed()
        if shots is not None:
            shots.mkdir(parents=True, exist_ok=True)
            output.screenshot(path=shots / f"{i:02d}_{name}.png")
        for index, control in enumerate(output.evaluate(FIND_CONTROLS)):
            timed, readout_only, unchanged = [], 0, 0
            for step in range(moves):
                move_control(page, output, index, control["kind"], step)
                page.wait_for_function(DONE, timeout=15_000, polling="raf")
                log = page.evaluate("() => window.__probe.record()")
                steps = breakdown(log, origin)
                if steps is not None:
                    timed.append(steps)
                elif changed_readout(log):
                    readout_only += 1
                else:
                    unchanged += 1
            rows.append(
                {"explorer": name, "control": control["label"], "kind": control["kind"]}
                | {"moves": moves, "readout_only": readout_only, "no_change": unchanged}
                | {"timings": timed}
            )
    return rows


def measure(moves: int = 5, nodelay: bool = True, shots: Path | None = None, scale=1) -> list[dict]:
    """Move every control of every explorer `moves` times; one row per control. With `shots`,
    a screenshot of each explorer before its moves goes there (at device `scale`)."""
    from playwright.sync_api import sync_playwright

    if not CHROMIUM.is_file():
        raise FileNotFoundError(f"the browser benchmark needs Chromium at {CHROMIUM}")
    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder)
        root = home / "notebooks"
        root.mkdir()
        names = bench_notebook(root / "explorers.ipynb")
        lab = start_lab(home, root, nodelay=nodelay)
        try:
            with sync_playwright() as driver:
                browser = driver.chromium.launch(
                    executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS
                )
                context = browser.new_context(viewport=VIEWPORT, device_scale_factor=scale)
                context.set_default_timeout(60_000)
                context.add_init_script(path=str(PROBE))
                page = context.new_page()
                page.goto(lab.url("/lab/tree/explorers.ipynb?reset"))
                page.wait_for_selector(IDLE, timeout=120_000)
                start_run_all(page, tries=3, timeout_ms=10_000, accept_kernel=True)
                try:
                    page.wait_for_function(
                        f"n => document.querySelectorAll({EXPLORER!r}).length >= n",
                        arg=len(names),
                        timeout=240_000,
                    )
                    page.wait_for_selector(IDLE, timeout=240_000)
                except Exception as error:
                    shown = page.locator(".jp-OutputArea-output").all_inner_texts()
                    raise RuntimeError(f"the explorers did not all show: {shown}") from error
                rows = measure_page(page, names, moves, shots)
                browser.close()
        finally:
            lab.stop()
    return rows


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def summary(values: list[float]) -> dict:
    return {
        "median": statistics.median(values),
        "p95": percentile(values, 0.95),
        "worst": max(values),
    }


def control_rows(rows: list[dict]) -> list[dict]:
    """Per control: total latency median, p95, worst, PNG size, and whether it meets targets."""
    out = []
    for row in rows:
        totals = [t["total"] for t in row["timings"]]
        stats = summary(totals) if totals else {"median": 0.0, "p95": 0.0, "worst": 0.0}
        out.append(
            {k: row[k] for k in ("explorer", "control", "kind", "moves")}
            | {k: row[k] for k in ("readout_only", "no_change")}
            | stats
            | {
                "png_kib": statistics.median(t["png_bytes"] for t in row["timings"]) / 1024
                if totals
                else 0.0,
                "ok": bool(totals)
                and row["no_change"] == 0
                and stats["median"] <= TARGET_MEDIAN_MS
                and stats["p95"] <= TARGET_P95_MS
                and stats["worst"] <= TARGET_WORST_MS,
            }
        )
    return out


def step_table(rows: list[dict]) -> dict:
    """Median and p95 of each step over every move with a picture."""
    moves = [t for row in rows for t in row["timings"]]
    return {key: summary([m[key] for m in moves]) for key, _ in STEPS} | {"moves": len(moves)}


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description="browser latency of every explorer control")
    parser.add_argument("--moves", type=int, default=5)
    parser.add_argument("--no-nodelay", action="store_true", help="without course_server")
    parser.add_argument("--json", type=Path, help="write the raw rows here")
    parser.add_argument("--shots", type=Path, help="a screenshot of each explorer goes here")
    parser.add_argument("--scale", type=float, default=1, help="device scale factor")
    args = parser.parse_args()
    rows = measure(args.moves, not args.no_nodelay, args.shots, args.scale)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    for row in control_rows(rows):
        print(
            f"{row['explorer']:22} {row['control'][:28]:28} median {row['median']:5.1f} "
            f"p95 {row['p95']:5.1f} worst {row['worst']:5.1f} ms  {row['png_kib']:4.1f} KiB "
            f"readout only {row['readout_only']} no change {row['no_change']}  "
            f"{'met' if row['ok'] else 'MISSED'}"
        )
    for key, label in STEPS:
        s = step_table(rows)[key]
        print(f"{label:45} median {s['median']:5.1f} p95 {s['p95']:5.1f} worst {s['worst']:5.1f}")


if __name__ == "__main__":
    main()
