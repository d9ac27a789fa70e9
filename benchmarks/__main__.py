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
        print("make test (warm .venv) ...", flush=True)
        r = notebooks.make_test_time()
        out += [
            "",
            f"Whole `make test` with a warm `.venv`: {r['seconds']:.0f} s "
            f"({'passed' if r['passed'] else 'FAILED'}; target 300 s): {mark(r['ok'])}.",
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
