"""Training with and without the 1/sqrt(d) scale at three head widths (lessons 02 and 06).

Lesson 02 shows that an unscaled wide head is saturated at initialisation; lesson 06 trains
a model with heads 16 wide without the scale and finds it does no harm. This sweep joins the
two: one tiny model of fixed width D = 256, cut into 16, 4 or 1 heads (head width d = 16, 64
or 256, so the parameter count never changes), trained with and without the scale on the same
budget of steps and batches. For each run it records the mean attention entropy at the first
step (before any update), the entropy at the end, and the validation loss.

Two budgets: "short" (300 steps of 16 lines) at every width for three seeds, and "long" (lesson
06's 1000 steps of 32 lines) at the two ends, 16 and 256, for one seed, to see whether more
training closes the gap. `python -m course_lib.scale_sweep` runs both (measured: 197 s + 251 s
of CPU on one thread) and writes data/scale-sweep.json, which lesson 02 loads;
`python -m course_lib.scale_sweep --budget long` reruns one budget and keeps the other's runs.
"""

import argparse
import json
import os
import time
from dataclasses import asdict
from pathlib import Path

import torch

import course_lib
from course_lib import data, heads
from course_lib.model import ModelConfig, TinyTransformer
from course_lib.saturation import softmax_entropy
from course_lib.train import TrainConfig, evaluate, train

SWEEP_PATH = data.DATA_DIR / "scale-sweep.json"
D_MODEL = 256  # fixed, so every head width has the same parameters
HEAD_WIDTHS = (16, 64, 256)  # d = D / H for H = 16, 4, 1
# name -> (training config, seeds, head widths); each run of a budget gets the same steps and
# batches. "short" sees 4,800 lines (1.2 passes over the training set), "long" 32,000 (8).
BUDGETS = {
    "short": (TrainConfig(steps=300, batch_size=16, warmup_steps=30, eval_every=100), (0, 1, 2),
              HEAD_WIDTHS),
    "long": (TrainConfig(), (0,), (16, 256)),  # lesson 06's recipe: 1000 steps of 32
}  # fmt: skip
ENTROPY_LINES = 100  # validation lines the attention entropy is averaged over


def sweep_config(head_width: int, scale: bool) -> ModelConfig:
    """The sweep's model: one RoPE block of width 256 with heads `head_width` wide (lesson 02)."""
    if head_width not in HEAD_WIDTHS:
        raise ValueError(f"head_width: expected one of {HEAD_WIDTHS}, got {head_width!r}")
    if not isinstance(scale, bool):
        raise TypeError(f"scale: expected True or False, got {type(scale).__name__}")
    return ModelConfig(
        vocab_size=len(data.VOCAB),
        d_model=D_MODEL,
        num_heads=D_MODEL // head_width,
        d_ff=2 * D_MODEL,
        num_layers=1,
        max_len=data.SEQ_LEN,
        scale=scale,
    )


def mean_entropy(model, ids: torch.Tensor) -> float:
    """Attention entropy in nats, averaged over every layer, head and query of ids (lesson 02)."""
    weights = heads.attention_weights(model, ids)  # per layer (N, H, T, T)
    return float(torch.stack([softmax_entropy(w).mean() for w in weights]).mean())


def flat_entropy(T: int) -> float:
    """The mean entropy of causal attention spread evenly: query t over t + 1 keys (lesson 02)."""
    return float(torch.log(torch.arange(1, T + 1, dtype=torch.float64)).mean())


def run_one(
    head_width: int, scale: bool, seed: int, train_ids, valid_ids, budget: str = "short"
) -> dict:
    """Train one sweep model from `seed` on `budget`: entropies, losses, times (lesson 02)."""
    if budget not in BUDGETS:
        raise ValueError(f"budget: expected one of {', '.join(BUDGETS)}, got {budget!r}")
    config = sweep_config(head_width, scale)
    course_lib.set_seed(seed)
    model = TinyTransformer.from_config(config)
    probe = valid_ids[:ENTROPY_LINES, :-1]  # the inputs the model sees, (N, T - 1)
    entropy_start = mean_entropy(model, probe)
    loss_start = evaluate(model, valid_ids)
    cpu_start = time.process_time()
    history = train(
        model,
        train_ids,
        valid_ids,
        TrainConfig(**{**asdict(BUDGETS[budget][0]), "seed": seed}),
        progress=False,
    )
    return {
        "budget": budget,
        "head_width": head_width,
        "num_heads": config.num_heads,
        "scale": scale,
        "seed": seed,
        "entropy_start": round(entropy_start, 4),
        "entropy_end": round(mean_entropy(model, probe), 4),
        "val_loss_start": round(loss_start, 4),
        "val_steps": [s + 1 for s in history.val_step],
        "val_loss": [round(x, 4) for x in history.val_loss],
        "wall_time_s": round(history.wall_time, 1),
        "cpu_time_s": round(time.process_time() - cpu_start, 1),
    }


def run_sweep(budgets=tuple(BUDGETS), *, log=print) -> list[dict]:
    """Every (budget, head width, scale, seed) run of the given budgets (lesson 02)."""
    train_ids, valid_ids = data.load_split("train"), data.load_split("valid")
    runs = []
    for budget in budgets:
        _, seeds, widths = BUDGETS[budget]
        for seed in seeds:
            for width in widths:
                for scale in (True, False):
                    run = run_one(width, scale, seed, train_ids, valid_ids, budget)
                    runs.append(run)
                    log(
                        f"{budget}, d = {width:>3}, {'scaled  ' if scale else 'unscaled'}, "
                        f"seed {seed}: entropy {run['entropy_start']:.2f} -> "
                        f"{run['entropy_end']:.2f}, val loss {run['val_loss'][-1]:.3f} "
                        f"({run['wall_time_s']} s)"
                    )
    return runs


def describe(runs: list[dict]) -> dict:
    """The JSON that lesson 02 loads: the runs, what they share, and their total times."""
    return {
        "note": "one RoPE block of width d_model, cut into heads head_width wide; entropy in "
        "nats, averaged over every head and query of the first entropy_lines validation lines",
        "model": {
            k: v
            for k, v in asdict(sweep_config(HEAD_WIDTHS[0], True)).items()
            if k not in ("num_heads", "scale")
        },
        "budgets": {
            name: {
                "train": {k: v for k, v in asdict(config).items() if k != "seed"},
                "seeds": list(seeds),
                "head_widths": list(widths),
                # the runs' own times, summed: the machine was shared, so wall > CPU
                "wall_time_s": round(sum(r["wall_time_s"] for r in runs if r["budget"] == name), 1),
                "cpu_time_s": round(sum(r["cpu_time_s"] for r in runs if r["budget"] == name), 1),
            }
            for name, (config, seeds, widths) in BUDGETS.items()
        },
        "entropy_lines": ENTROPY_LINES,
        "flat_entropy": round(flat_entropy(data.SEQ_LEN - 1), 4),
        "runs": runs,
        "threads": torch.get_num_threads(),
        "load_average": round(os.getloadavg()[0], 2),
        "torch": torch.__version__,
    }


def load_sweep(path=SWEEP_PATH) -> dict:
    """The shipped sweep's results, as run_sweep returned them (lesson 02)."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def summary(sweep: dict, key: str, budget: str = "short") -> dict:
    """{"scaled" / "unscaled": [[value per seed] per head width]} of one budget, for key
    "entropy_start", "entropy_end" or "val_loss" (the last validation loss) (lesson 02)."""
    if key not in ("entropy_start", "entropy_end", "val_loss"):
        raise ValueError(f"key: expected entropy_start, entropy_end or val_loss, got {key!r}")
    if budget not in sweep["budgets"]:
        raise ValueError(f"budget: expected one of {', '.join(sweep['budgets'])}, got {budget!r}")
    widths = sweep["budgets"][budget]["head_widths"]
    table = {label: [[] for _ in widths] for label in ("scaled", "unscaled")}
    for run in sweep["runs"]:
        if run["budget"] == budget:
            value = run[key][-1] if key == "val_loss" else run[key]
            table["scaled" if run["scale"] else "unscaled"][widths.index(run["head_width"])].append(
                value
            )
    return table


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="Train with and without the 1/sqrt(d) scale.")
    parser.add_argument("--out", type=Path, default=SWEEP_PATH, help="where to write the JSON")
    parser.add_argument("--budget", nargs="*", choices=tuple(BUDGETS), default=tuple(BUDGETS))
    args = parser.parse_args(argv)
    # one thread: on a busy 2-core machine more threads only wait for each other
    torch.set_num_threads(1)
    runs = run_sweep(tuple(args.budget))
    if args.out.exists():  # keep the other budgets' runs
        runs = [r for r in load_sweep(args.out)["runs"] if r["budget"] not in args.budget] + runs
    args.out.write_text(json.dumps(describe(runs), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
