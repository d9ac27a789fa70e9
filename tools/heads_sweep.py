"""Lesson 03's sweep: the three-places task for 1, 2, 4 and 8 heads over several seeds.

    python -m tools.heads_sweep            # writes data/checkpoints/places-sweep.json
    python -m tools.heads_sweep --long     # adds one head trained three times as long

Each run is the shipped recipe places-hH from course_lib.train.RECIPES with only the seed
changed (the seed sets the initial weights and the batch order); the shipped checkpoints are
seed 0. One thread, as the recipes are built.
"""

import argparse
import json
import os
import platform
from dataclasses import asdict, replace
from pathlib import Path

import torch

from course_lib.model import CHECKPOINT_DIR
from course_lib.train import RECIPES, places_run

HEADS = (1, 2, 4, 8)
SEEDS = (0, 1, 2, 3, 4)
LONG_STEPS = 1200  # what one head does with three times the budget


def runs_for(heads, seeds, steps=None) -> list[dict]:
    """One result per (heads, seed) pair: the recipe, its seed (and steps) replaced."""
    runs = []
    for h in heads:
        model_config, train_config = RECIPES[f"places-h{h}"]
        if steps is not None:
            train_config = replace(train_config, steps=steps, eval_every=steps // 8)
        for seed in seeds:
            _, card = places_run(model_config, replace(train_config, seed=seed))
            run = {"heads": h, "seed": seed}
            for key in ("accuracy", "answer_loss", "val_loss", "cpu_time_s", "wall_time_s"):
                run[key] = card[key]
            run["accuracy_by_step"] = card["accuracy_by_step"]
            runs.append(run)
            print(
                f"H = {h}, seed {seed}: accuracy {run['accuracy']:.3f}, "
                f"answer loss {run['answer_loss']:.3f}, {run['cpu_time_s']} s CPU",
                flush=True,
            )
    return runs


def sweep(heads=HEADS, seeds=SEEDS) -> dict:
    """Train every (heads, seed) pair; return the per-run results and the shared configs."""
    runs = runs_for(heads, seeds)
    model_config, train_config = RECIPES[f"places-h{heads[0]}"]
    return {
        "task": "places",
        "note": "accuracy and answer_loss: the answers after every '?' of the validation split",
        "config": {k: v for k, v in asdict(model_config).items() if k != "num_heads"},
        "train": {k: v for k, v in asdict(train_config).items() if k != "seed"},
        "heads": list(heads),
        "seeds": list(seeds),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "cpu": torch.backends.cpu.get_cpu_capability(),
        "machine": platform.machine(),
        "load_average": round(os.getloadavg()[0], 2),
        "runs": runs,
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=CHECKPOINT_DIR / "places-sweep.json")
    parser.add_argument("--long", action="store_true", help="add long one-head runs to --out")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.long:
        result = json.loads(args.out.read_text(encoding="utf-8"))
        result["long_runs"] = runs_for((1,), SEEDS[:3], steps=LONG_STEPS)
    else:
        result = sweep()
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
