"""`make bench`: print a table of every figure against its target and write benchmarks/RESULTS.md.

python -m benchmarks            # everything (a few minutes)
python -m benchmarks --quick    # fewer repetitions, no `make test` timing
"""

import argparse
import os
import platform
import sys
from pathlib import Path

import torch

from benchmarks import attention, explorers, notebooks, training
from benchmarks.class_capacity import kept_section, with_section

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def machine() -> str:
    model = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{model}, {os.cpu_count()} cores; Python {platform.python_version()}, "
        f"torch {torch.__version__}, {torch.get_num_threads()} torch threads"
    )


def mark(ok: bool) -> str:
    return "met" if ok else "**missed**"


def table(header: list[str], rows: list[list]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def browser_section(moves: int, before_after: bool) -> list[str]:
    """Input to picture painted in JupyterLab under Chromium, per control and step by step."""
    from benchmarks import browser_latency as b

    if not b.CHROMIUM.is_file():
        return [
            "## Explorer latency in the browser",
            "",
            f"Not measured: no Chromium at {b.CHROMIUM}.",
        ]
    rows = b.measure(moves)
    controls = b.control_rows(rows)
    steps = b.step_table(rows)
    before = b.step_table(b.measure(moves, nodelay=False)) if before_after else None
    missed = [f"{r['explorer']} `{r['control']}`" for r in controls if not r["ok"]]
    out = [
        "## Explorer latency in the browser (input event -> new picture painted)",
        "",
        f"JupyterLab as `make lab` runs it, headless Chromium, a {b.VIEWPORT['width']} x "
        f"{b.VIEWPORT['height']} window with the file browser open (a notebook about 1000 px "
        f"wide); every control of every explorer moved {moves} times as a learner moves it "
        "(arrow keys on a slider, a click on a button, a sentence typed then Enter). Times "
        "come from the page's clock and the kernel's message dates "
        "(benchmarks/browser_latency.py). Target per control: median <= "
        f"{b.TARGET_MEDIAN_MS:.0f} ms, p95 <= {b.TARGET_P95_MS:.0f} ms, worst <= "
        f"{b.TARGET_WORST_MS:.0f} ms, and every move changes the picture or the readout (a "
        "sentence with an unknown word changes only the message under the text box).",
        "",
    ]
    out += table(
        ["explorer", "control", "moves", "median ms", "p95 ms", "worst ms", "PNG KiB",
         "moves changing only the readout", "moves changing nothing", "status"],
        [
            [r["explorer"], r["control"], r["moves"], f"{r['median']:.1f}", f"{r['p95']:.1f}",
             f"{r['worst']:.1f}", f"{r['png_kib']:.1f}", r["readout_only"], r["no_change"],
             mark(r["ok"])]
            for r in controls
        ],
    )  # fmt: skip
    header = ["step", "median ms", "p95 ms", "worst ms"]
    if before is not None:
        header += ["without TCP_NODELAY: median ms", "p95 ms", "worst ms"]
    lines = []
    for key, label in b.STEPS:
        line = [label] + [f"{steps[key][q]:.1f}" for q in ("median", "p95", "worst")]
        if before is not None:
            line += [f"{before[key][q]:.1f}" for q in ("median", "p95", "worst")]
        lines.append(line)
    out += ["", f"Step by step over all {steps['moves']} moves with a new picture:", ""]
    out += table(header, lines)
    out += [
        "",
        f"Every control met its target: {mark(not missed)}"
        + (f" (missed: {', '.join(missed)})." if missed else "."),
    ]
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions, skip make test")
    args = parser.parse_args(argv)
    changes = 10 if args.quick else 40
    out = [
        "# Benchmark results",
        "",
        f"Machine: {machine()}.",
        "",
        "Regenerate with `make bench`. Targets come from the course's issues; "
        "a **missed** row says so plainly.",
        "",
    ]

    print("explorer latency ...", flush=True)
    rows = explorers.measure(changes=changes)
    out += ["## Explorer latency (set a control -> figure redrawn and encoded as PNG)", ""]
    out += table(
        ["explorer", "control", "changes", "median ms", "p95 ms", "target", "status"],
        [
            [
                r["explorer"],
                r["control"],
                r["changes"],
                f"{r['median_ms']:.1f}",
                f"{r['p95_ms']:.1f}",
                "median <= 50, p95 <= 100",
                mark(r["ok"]),
            ]
            for r in rows
        ],
    )
    out += [
        "",
        "A text control types a different sentence at every change: TrainedHeadsExplorer's "
        "`sentence` row is the slow case, a sentence the explorer has never seen (one forward "
        "pass and new tick labels each time).",
    ]

    print("explorer latency in the browser ...", flush=True)
    out += ["", *browser_section(moves=2 if args.quick else 5, before_after=not args.quick)]

    print("notebook run times ...", flush=True)
    rows = notebooks.measure()
    out += ["", "## Notebook run times (fresh kernel, kernel start excluded)", ""]
    out += table(
        ["notebook", "seconds", "target s", "status"],
        [
            [r["notebook"], f"{r['seconds']:.1f}", f"{r['target_s']:.0f}", mark(r["ok"])]
            for r in rows
        ],
    )
    if not args.quick:
        out += [""]
        for target in ("test", "quick"):
            print(f"make {target} (warm .venv) ...", flush=True)
            r = notebooks.make_time(target)
            out += [
                f"Whole `make {target}` with a warm `.venv`: {r['seconds']:.0f} s "
                f"({'passed' if r['passed'] else 'FAILED'}; target {r['target_s']:.0f} s): "
                f"{mark(r['ok'])}. Each pytest run's summary, lesson cell times and slowest "
                "test phases (`--durations`):",
                "",
                "```",
                *r["summaries"],
                *r["lessons"],
                *r["slowest"],
                "```",
                "",
            ]

    print("training ...", flush=True)
    out += ["", "## Training the capstone's configuration to the detector thresholds", ""]
    out += training.report()

    print("attention against torch ...", flush=True)
    out += ["", "## Attention, forward + backward, fp32 CPU, causal mask", ""]
    rows = [
        attention.compare(T=256, min_run_time=0.5 if args.quick else 2.0),
        attention.compare(T=1024, min_run_time=0.5 if args.quick else 2.0),
    ]
    out += table(
        [
            "shape",
            "torch ms",
            "fused ms",
            "from-scratch ms",
            "fused / torch (<= 1.1)",
            "from-scratch / torch (<= 1.5)",
        ],
        [
            [
                r["shape"],
                f"{r['torch_ms']:.1f}",
                f"{r['fused_ms']:.1f}",
                f"{r['scratch_ms']:.1f}",
                f"{r['fused_ratio']:.2f} {mark(r['fused_ratio'] <= attention.TARGET_FUSED)}",
                f"{r['scratch_ratio']:.2f} {mark(r['scratch_ratio'] <= attention.TARGET_SCRATCH)}",
            ]
            for r in rows
        ],
    )
    memory = attention.peak_memory(2048)
    out += [
        "",
        f"Peak extra memory of one forward pass at T=2048 (B=1, D=256, H=8): from-scratch "
        f"{memory['scratch_mib']:.0f} MiB, fused {memory['fused_mib']:.0f} MiB; the (B, H, T, T) "
        f"weight matrix alone is {memory['weights_matrix_mib']:.0f} MiB.",
    ]
    out += [
        "",
        f"`import course_lib` (math modules) after torch: {attention.import_time():.0f} ms.",
    ]

    text = "\n".join(out) + "\n"
    kept = kept_section(RESULTS)  # `make class-bench`'s section, measured on its own
    RESULTS.write_text(with_section(text, kept) if kept else text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
