"""How wide should the feed-forward layer be? A measured sweep on the toy language (lesson 05).

The same TinyTransformer recipe as the shipped rope-h4 checkpoint (D = 64, 4 heads, 2 layers,
1000 AdamW steps of 32 sequences), with only the feed-forward hidden width d_ff changed: none
at all (d_ff = 0, attention-only blocks), then a quarter of D up to 8 D, each from several
seeds. Every run gets the same training budget (the same steps, batches and schedule); the
wider ones have more parameters and take more CPU time per step.

    .venv/bin/python -m course_lib.ffn_width          # rewrites data/ffn-width.json
    .venv/bin/python -m course_lib.ffn_width --widths 0 --keep   # reruns d_ff = 0 only

takes about 7 minutes of CPU on one thread (18 runs of 16 to 35 s). The lesson only reads
the JSON (`load_results`).
"""

import argparse
import json
import os
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch

import course_lib
from course_lib import data
from course_lib.feedforward import NoFeedForward
from course_lib.model import TinyTransformer
from course_lib.train import RECIPES, train

RESULTS = data.DATA_DIR / "ffn-width.json"
# d_ff: none at all (attention only), D / 4, D, 2 D, 4 D (the shipped models), 8 D
WIDTHS = (0, 16, 64, 128, 256, 512)
SEEDS = (0, 1, 2)


def build_model(d_ff: int, seed: int) -> TinyTransformer:
    """The rope-h4 recipe's model with feed-forward width d_ff (0: none), drawn from seed."""
    if isinstance(d_ff, bool) or not isinstance(d_ff, int) or d_ff < 0:
        raise ValueError(f"d_ff: expected an int >= 0 (0: no feed-forward layer), got {d_ff!r}")
    course_lib.set_seed(seed)
    model = TinyTransformer.from_config(replace(RECIPES["rope-h4"][0], d_ff=max(d_ff, 1)))
    if d_ff == 0:  # no feed-forward sub-layer at all: each block is attention only
        for block in model.blocks:
            block.ff = NoFeedForward()
    return model


def run(d_ff: int, seed: int, save_dir=None) -> dict:
    """Train the rope-h4 recipe with feed-forward width d_ff from `seed`; return its record
    (and save the weights to save_dir/dffD_FF-seedSEED.pt if save_dir is given)."""
    train_config = replace(RECIPES["rope-h4"][1], seed=seed)
    train_ids, valid_ids = data.load_split("train"), data.load_split("valid")
    model = build_model(d_ff, seed)
    cpu_start = time.process_time()
    history = train(model, train_ids, valid_ids, train_config, progress=False)
    cpu_time = time.process_time() - cpu_start
    if save_dir is not None:
        torch.save(model.state_dict(), Path(save_dir) / f"dff{d_ff}-seed{seed}.pt")
    return {
        "d_ff": d_ff,
        "seed": seed,
        "parameters": sum(p.numel() for p in model.parameters()),
        "ff_parameters": sum(p.numel() for b in model.blocks for p in b.ff.parameters()),
        "val_step": [s + 1 for s in history.val_step],
        "val_loss": [round(v, 4) for v in history.val_loss],
        "final_val_loss": round(history.val_loss[-1], 4),
        "cpu_time_s": round(cpu_time, 1),
        "wall_time_s": round(history.wall_time, 1),
    }


def sweep(widths=WIDTHS, seeds=SEEDS, path=RESULTS, save_dir=None, keep=False) -> dict:
    """Run every (width, seed), write the results as JSON to `path`, return them. keep=True
    keeps the runs of other (width, seed) pairs already in `path`."""
    model_config, train_config = RECIPES["rope-h4"]
    runs = []
    if keep and Path(path).exists():
        runs = [r for r in load_results(path)["runs"] if (r["d_ff"], r["seed"]) not in
                {(w, s) for w in widths for s in seeds}]  # fmt: skip
    for seed in seeds:
        for d_ff in widths:
            runs.append(run(d_ff, seed, save_dir))
            print(f"d_ff {d_ff:4d} seed {seed}: val loss {runs[-1]['final_val_loss']:.4f}, "
                  f"{runs[-1]['cpu_time_s']} s CPU", flush=True)  # fmt: skip
    runs.sort(key=lambda r: (r["seed"], r["d_ff"]))
    results = {
        "note": "rope-h4 recipe with only d_ff changed; val_loss on data/valid.txt",
        "model": {k: v for k, v in asdict(model_config).items() if k != "d_ff"},
        "train": {k: v for k, v in asdict(train_config).items() if k != "seed"},
        "widths": sorted({r["d_ff"] for r in runs}),
        "seeds": sorted({r["seed"] for r in runs}),
        "threads": torch.get_num_threads(),
        "load_average": round(os.getloadavg()[0], 2),
        "torch": torch.__version__,
        "runs": runs,
    }
    Path(path).write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return results


def load_results(path=RESULTS) -> dict:
    """The shipped sweep: config, and one record per (d_ff, seed) in "runs" (lesson 05)."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def final_losses(results: dict) -> dict[int, list[float]]:
    """d_ff -> the final validation loss of each seed, in seed order (lesson 05)."""
    table = {w: [] for w in results["widths"]}
    for record in sorted(results["runs"], key=lambda r: r["seed"]):
        table[record["d_ff"]].append(record["final_val_loss"])
    return table


def mean_curves(results: dict) -> dict[int, tuple[list[int], list[float]]]:
    """d_ff -> (steps, validation loss at those steps averaged over the seeds) (lesson 05)."""
    curves = {}
    for width in results["widths"]:
        runs = [r for r in results["runs"] if r["d_ff"] == width]
        steps = runs[0]["val_step"]
        if any(r["val_step"] != steps for r in runs):
            raise ValueError(f"results: the runs of d_ff = {width} were scored at different steps")
        losses = zip(*(r["val_loss"] for r in runs), strict=True)  # one tuple per step
        curves[width] = (steps, [sum(v) / len(runs) for v in losses])
    return curves


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="Sweep the feed-forward width (lesson 05).")
    parser.add_argument("--out", default=str(RESULTS), help="where to write the JSON")
    parser.add_argument("--save-dir", default=None, help="also save each run's weights here")
    parser.add_argument("--widths", type=int, nargs="*", default=list(WIDTHS))
    parser.add_argument("--keep", action="store_true", help="keep other runs already in --out")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # one thread: on a busy 2-core machine more threads ran slower
    sweep(args.widths, path=args.out, save_dir=args.save_dir, keep=args.keep)


if __name__ == "__main__":
    main()
