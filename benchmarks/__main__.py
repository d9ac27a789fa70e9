"""`make bench`: print a table of every figure against its target and write benchmarks/RESULTS.md.

python -m benchmarks            # everything (a few minutes)
python -m benchmarks --quick    # fewer repetitions, no `make test` timing
"""

import argparse
import json
import math
import os
import platform
import sys
from pathlib import Path

import torch

from benchmarks import attention, explorers, kernels, notebooks, training
from benchmarks.class_capacity import kept_section, with_section
from course_lib import variant_screens, variants

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


def kernels_section(quick: bool) -> list[str]:
    """Cached against recomputed generation, and tiled against fused attention (issue 27)."""
    run_time = 0.3 if quick else 1.0
    load_before = os.getloadavg()[0]
    gen = kernels.generation(min_run_time=run_time)
    c = gen["config"]
    out = [
        "## Generation with and without a KV cache, one torch thread",
        "",
        f"Random-weight TinyTransformer (V {c.vocab_size}, D {c.d_model}, H {c.num_heads}, "
        f"d_ff {c.d_ff}, {c.num_layers} layers, max_len {c.max_len}); one new token's logits "
        "at context length T (the new token included): cached, the token alone through the "
        "model reading T cached keys and values (`course_lib.kv_cache.cached_forward`); "
        "recomputed, all T tokens through again, as `generate` does. Multiply-adds from "
        "`token_costs` (the same on every machine). Median of repeated steps "
        f"(benchmarks/kernels.py); the machine's 1-minute load average was {load_before:.1f} "
        f"when this section started (other work on the {os.cpu_count()} cores slows these "
        "rows).",
        "",
    ]
    out += table(
        ["T", "cached tokens/s", "recomputed tokens/s", "speed-up", "cached multiply-adds",
         "recomputed multiply-adds"],
        [
            [r["T"], f"{r['cached_tok_s']:.0f}", f"{r['recomputed_tok_s']:.1f}",
             f"{r['cached_tok_s'] / r['recomputed_tok_s']:.0f}x", f"{r['cached_macs']:,}",
             f"{r['recomputed_macs']:,}"]
            for r in gen["rows"]
            if r["T"] in kernels.REPORTED
        ],
    )  # fmt: skip
    Ts = ", ".join(str(T) for T in kernels.CONTEXTS)
    first, last = gen["rows"][0], gen["rows"][-1]
    grow = {
        kind: (last[f"{kind}_macs"] / first[f"{kind}_macs"], last[f"{kind}_s"] / first[f"{kind}_s"])
        for kind in ("cached", "recomputed")
    }
    out += [
        "",
        f"Time per token grows as T^k, k fitted by least squares over T = {Ts}: cached "
        f"k = {gen['cached_exponent']:.2f}, recomputed k = {gen['recomputed_exponent']:.2f}; "
        f"between the last two (T = {kernels.CONTEXTS[-2]} and {kernels.CONTEXTS[-1]}): cached "
        f"k = {gen['cached_last_exponent']:.2f}, recomputed k = "
        f"{gen['recomputed_last_exponent']:.2f}. The multiply-adds fitted the same way: cached "
        f"k = {gen['cached_macs_exponent']:.2f}, recomputed k = "
        f"{gen['recomputed_macs_exponent']:.2f}. From T = {first['T']} to {last['T']} the "
        f"cached step's multiply-adds grow {grow['cached'][0]:.1f}x and its time "
        f"{grow['cached'][1]:.1f}x; the recomputed step's multiply-adds "
        f"{grow['recomputed'][0]:.0f}x and its time {grow['recomputed'][1]:.0f}x.",
        "",
    ]
    B, H, T, d, tile = 1, 8, 2048, 32, 128
    rows = kernels.attention_kernels(B, H, T, d, tile, min_run_time=run_time)
    out += [
        f"## Tiled against fused attention, causal, B={B}, H={H}, T={T}, d={d}, one torch thread",
        "",
        "Peak MiB: the most bytes allocated at once during the call, counted block by block "
        "by torch's profiler (`course_lib.memory.allocations`); the (B, H, T, T) float32 "
        f"weight matrix alone is {B * H * T * T * 4 / 2**20:.0f} MiB.",
        "",
    ]
    out += table(
        ["kernel", "forward ms", "forward peak MiB", "largest block MiB",
         "forward + backward ms", "forward + backward peak MiB"],
        [
            [r["kernel"], f"{r['forward_ms']:.1f}", f"{r['forward_peak_mib']:.1f}",
             f"{r['forward_largest_mib']:.1f}", f"{r['both_ms']:.1f}",
             f"{r['both_peak_mib']:.1f}"]
            for r in rows
        ],
    )  # fmt: skip
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
    out += ["", "## Training the capstone's model (lesson 11b's run), one thread", ""]
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

    print("attention's growth with T (lesson 10) ...", flush=True)
    out += ["", *growth_section(args.quick)]

    print("KV cache and tiled attention ...", flush=True)
    out += ["", *kernels_section(args.quick)]

    out += ["", *variants_section()]

    text = "\n".join(out) + "\n"
    kept = kept_section(RESULTS)  # `make class-bench`'s section, measured on its own
    RESULTS.write_text(with_section(text, kept) if kept else text)
    print(text)
    return 0


def growth_section(quick: bool) -> list[str]:
    """Lesson 10: one causal forward call against T, from scratch and fused, with the fitted
    exponents of time (asserted within attention.TARGET_EXPONENT) and of peak bytes."""
    g = attention.growth(min_run_time=0.2 if quick else 1.0)
    low, high = attention.TARGET_EXPONENT
    Ts = ", ".join(str(r["T"]) for r in g["rows"])
    out = [
        f"## Attention's growth with the sequence length, causal forward, {g['shape']}, "
        "one torch thread (lesson 10)",
        "",
        "Median of repeated calls; peak MiB counted block by block by torch's profiler "
        "(`course_lib.memory.allocations`). From scratch: `course_lib.attention.attend`, "
        "lesson 01's arithmetic; fused: `F.scaled_dot_product_attention(is_causal=True)`.",
        "",
    ]
    out += table(
        ["T", "from-scratch ms", "fused ms", "from-scratch peak MiB", "fused peak MiB"],
        [
            [r["T"], f"{r['scratch_s'] * 1000:.2f}", f"{r['fused_s'] * 1000:.2f}",
             f"{r['scratch_peak'] / 2**20:.2f}", f"{r['fused_peak'] / 2**20:.2f}"]
            for r in g["rows"]
        ],
    )  # fmt: skip
    out += [
        "",
        f"Time grows as T^k, k fitted by least squares over T = {Ts}: from scratch k = "
        f"{g['scratch_s_exponent']:.2f}, fused k = {g['fused_s_exponent']:.2f} (target: both "
        f"within {low} to {high}): {mark(g['ok'])}. Peak bytes fitted the same way: from "
        f"scratch k = {g['scratch_peak_exponent']:.2f}, fused k = {g['fused_peak_exponent']:.2f}.",
    ]
    return out


def variants_section() -> list[str]:
    """data/variants.json as RESULTS.md shows it: its runs and its rows. The file is written by
    `python -m course_lib.variants` (about 20 minutes), not measured again here."""
    table = json.loads(variants.RESULTS.read_text(encoding="utf-8"))
    seeds = " / ".join(str(s) for s in table["seeds"])
    recipe = table["recipe"]
    by_variant: dict[str, list[dict]] = {}
    for run in table["runs"]:
        by_variant.setdefault(run["variant"], []).append(run)
    cpu_min = sum(r["cpu_s"] for r in table["runs"] if r["variant"] in _trained(table)) / 60
    out = [
        "## The variant table (`python -m course_lib.variants --jobs 2`, data/variants.json)",
        "",
        f"Each variant trained from seeds {', '.join(map(str, table['seeds']))} with one recipe "
        f"({recipe['steps']:,} AdamW steps of {recipe['batch_size']} lines), on the toy language "
        f"of `course_lib/language.py`; the configurations are in the file. Excess loss is the "
        f"loss minus the exact floor, in nats per prediction: the floor of the validation split "
        f"is {table['floor']['valid']['all']:.4f} (long split, positions 32-126: "
        f"{table['floor']['long']['all']:.4f}). A claim holds when the gap of the means is at "
        f"least 3x the larger of the two variants' seed ranges. {cpu_min:.0f} min of CPU in all "
        f"({table['torch']}, one thread per run). Reprinted from the file by `make bench`.",
        "",
        f"| variant | parameters | excess, seeds {seeds} (valid) | CPU s per run |",
        "|---|---|---|---|",
    ]
    for name, runs in by_variant.items():
        excess = " / ".join(f"{r['valid']['all']:.4f}" for r in runs)
        cpu = sum(r["cpu_s"] for r in runs) / len(runs)
        out.append(f"| {name} | {table['parameters'][name]:,} | {excess} | {cpu:.0f} |")
    return [*out, "", variants.markdown(table), *screens_section(table)]


SCREENS = Path(__file__).resolve().parent / "screens"


def screens_section(table: dict) -> list[str]:
    """Each screen kept in benchmarks/screens/ (`python -m course_lib.variant_screens`): the
    rows its variants complete, beside the same rows of data/variants.json."""
    out = []
    for path in sorted(SCREENS.glob("*.json")):
        screened = json.loads(path.read_text(encoding="utf-8"))
        names = ", ".join(dict.fromkeys(r["variant"] for r in _own_runs(screened["runs"])))
        now = variant_screens.label(screened["recipe"], table)
        out += [
            "",
            f"### A screen at {now} (benchmarks/screens/{path.name})",
            "",
            f"The variants {names} trained over the same seeds at {now} instead of "
            f"{variant_screens.label(table['recipe'], screened)}, every other setting the "
            "table's; data/variants.json keeps its own runs."
            + _tally(screened, table)
            + _diverged(screened["runs"], table),
            "",
            variant_screens.compared(screened, table),
        ]
    return out


def _tally(screened: dict, table: dict) -> str:
    """A sentence counting the claims a screen holds, against the same claims in `table`."""
    stored, claims = variant_screens.claims(table), variant_screens.claims(screened)
    held = sum(c["holds"] for c in claims.values())
    before = sum(stored[key]["holds"] for key in claims if key in stored)
    return (
        f" {held} of these {len(claims)} claims hold, against {before} with the table's "
        f"recipe; a base model's run took {_base_cpu(screened['runs'])} s of CPU."
    )


def _own_runs(runs: list[dict]) -> list[dict]:
    """A screen's runs without the copies stored under a config's other names ("layers-2" is
    "base", trained once under "base")."""
    first = variants._first_names()
    return [r for r in runs if first.get(variants.VARIANTS.get(r["variant"])) == r["variant"]]


def _base_cpu(runs: list[dict]) -> str:
    """The base model's CPU seconds per seed in a screen, "81-87" (or "-" if not screened)."""
    cpu = [r["cpu_s"] for r in runs if r["variant"] == "base"]
    return f"{min(cpu):.0f}-{max(cpu):.0f}" if cpu else "-"


def _diverged(runs: list[dict], table: dict) -> str:
    """A sentence naming the runs of a screen that ended worse than a uniform guess over the
    vocabulary (or not a number), or "" where none did."""
    vocab = table["configs"]["base"]["vocab_size"]
    worst = math.log(vocab) - table["floor"]["valid"]["all"]  # a uniform guess's excess
    bad = [f"{r['variant']} seed {r['seed']}" for r in _own_runs(runs)
           if not r["valid"]["all"] <= worst]  # fmt: skip
    if not bad:
        return ""
    return (f" Diverged (excess above a uniform guess's {worst:.2f}, or not a number): "
            f"{', '.join(bad)}.")  # fmt: skip


def _trained(table: dict) -> set[str]:
    """The names that trained (a config's first name; later names reuse its runs)."""
    first: dict[str, str] = {}
    for name, config in table["configs"].items():
        first.setdefault(json.dumps(config, sort_keys=True), name)
    return set(first.values())


if __name__ == "__main__":
    sys.exit(main())
