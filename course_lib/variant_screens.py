"""Screens of the variant table: some variants trained over the table's three seeds for
another number of steps or at another learning rate, the rows they complete checked as the
table's are, and shown beside the table's own (benchmarks/RESULTS.md shows the screens kept in
benchmarks/screens/).

    python -m course_lib.variant_screens 4000 base,no-positions screen.json [--jobs 2]
    python -m course_lib.variant_screens 2000 base,heads-1 screen.json --lr 0.01

A screen tries a direction before the whole table is retrained on it; data/variants.json,
which the lessons read, is left alone.
"""

import argparse
import json
from dataclasses import asdict, replace
from multiprocessing import get_context
from pathlib import Path

import torch

from course_lib import variants


def screen(names: list[str], steps: int, jobs: int = 1, *, lr: float | None = None) -> dict:
    """Train `names` over the table's seeds for `steps` steps each, at learning rate `lr` where
    given (every other setting the table's), and return the rows whose every variant was
    trained, checked as the table's are; data/variants.json is left alone."""
    for name in names:
        if name not in variants.VARIANTS:
            raise ValueError(
                f"names: expected variants of course_lib.variants.VARIANTS, got {name!r}"
            )
    positive_steps = isinstance(steps, int) and not isinstance(steps, bool) and steps > 0
    if not positive_steps:
        raise ValueError(f"steps: expected a positive int, got {steps!r}")
    positive_lr = isinstance(lr, (int, float)) and not isinstance(lr, bool) and 0 < lr < 1
    if lr is not None and not positive_lr:
        raise ValueError(f"lr: expected a learning rate between 0 and 1, or None, got {lr!r}")
    changes = {"steps": steps, **({} if lr is None else {"lr": float(lr)})}
    first = variants._first_names()
    trained = list(dict.fromkeys(first[variants.VARIANTS[name]] for name in names))
    args = [(name, seed, changes) for name in trained for seed in variants.SEEDS]
    if jobs == 1:
        runs = [variants._job(a) for a in args]
    else:
        with get_context("spawn").Pool(jobs) as pool:
            runs = pool.map(variants._job, args)
    runs = variants._with_aliases(runs)
    have = {run["variant"] for run in runs}
    rows = variants.verdicts(
        runs, [row for row in variants.ROWS if {v for pair in row.pairs for v in pair} <= have]
    )
    recipe = asdict(replace(variants.RECIPE, **changes))
    seeds = list(variants.SEEDS)
    return {
        "recipe": recipe,
        "seeds": seeds,
        "runs": runs,
        "rows": rows,
        "torch": torch.__version__,
    }


def label(recipe: dict, table: dict) -> str:
    """What a screen's `recipe` changes from `table`'s: "4,000 steps", "learning rate 0.01"
    (both, joined by "and", where both differ; the steps where nothing does)."""
    base = table["recipe"]
    parts = [f"{recipe['steps']:,} steps"] if recipe["steps"] != base["steps"] else []
    if recipe["lr"] != base["lr"]:
        parts.append(f"learning rate {recipe['lr']:g}")
    return " and ".join(parts) or f"{recipe['steps']:,} steps"


def claims(table: dict) -> dict[tuple[str, str, str, str], dict]:
    """Every claim of a table or screen by (row, better, worse, skill): its gap, bar and
    verdict."""
    return {(row["name"], c["better"], c["worse"], c["skill"]): c
            for row in table["rows"] for c in row["claims"]}  # fmt: skip


def compared(screened: dict, table: dict) -> str:
    """Each claim of a screen beside the same claim in `table` (data/variants.json) as
    markdown: gap, bar and verdict with the screen's recipe and with the table's."""
    steps, before = label(screened["recipe"], table), label(table["recipe"], screened)
    stored = claims(table)
    lines = [
        f"| row | better | worse | skill | gap, {steps} | bar | holds | "
        f"gap, {before} | bar | holds |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in screened["rows"]:
        split = "" if row["split"] == "valid" else " (long)"
        for c in row["claims"]:
            old = stored.get((row["name"], c["better"], c["worse"], c["skill"]))
            was = (f"{old['gap']:.4f} | {old['bar']:.4f} | {'yes' if old['holds'] else 'no'}"
                   if old else "- | - | -")  # fmt: skip
            lines.append(
                f"| {row['name']} | {c['better']} | {c['worse']} | {c['skill']}{split} | "
                f"{c['gap']:.4f} | {c['bar']:.4f} | {'yes' if c['holds'] else 'no'} | {was} |"
            )
    return "\n".join(lines)


def main(argv=None) -> None:
    """python -m course_lib.variant_screens, as the module's docstring says."""
    parser = argparse.ArgumentParser(
        description="Screen some variants at another step count or learning rate."
    )
    parser.add_argument("steps", type=int, help="AdamW steps per run (the table's: 2,000)")
    parser.add_argument("only", help="the variants, comma-separated")
    parser.add_argument("out", type=Path, help="the JSON file to write")
    parser.add_argument("--jobs", type=int, default=1, help="runs at a time (one thread each)")
    parser.add_argument("--lr", type=float, help="peak learning rate (the table's: 0.003)")
    args = parser.parse_args(argv)
    screened = screen(args.only.split(","), args.steps, args.jobs, lr=args.lr)
    args.out.write_text(json.dumps(screened, indent=1) + "\n", encoding="utf-8")
    print(compared(screened, variants.stored_table()))


if __name__ == "__main__":
    main()
