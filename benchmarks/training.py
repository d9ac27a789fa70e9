"""Training time for the capstone's configuration to reach the head-detector thresholds."""

import time

import torch

from course_lib import data, heads, train
from course_lib.model import TinyTransformer
from course_lib.runtime import one_thread

THRESHOLDS = {"previous": 0.9, "bracket": 0.7, "subject": 0.7}
TARGET_S = 60.0


def measure(recipe: str = "capstone", probe_lines: int = 200) -> dict:
    """Train a recipe (default: lesson 06's); after each validation, score the heads.

    The detector scoring time is subtracted, so `reached_s` is training time alone.
    """
    model_config, train_config = train.CAPSTONE if recipe == "capstone" else train.RECIPES[recipe]
    torch.manual_seed(train_config.seed)
    model = TinyTransformer.from_config(model_config)
    probe = data.load_split("valid")[:probe_lines]
    scoring, reached = [0.0], {}

    def score(step, model):
        start = time.perf_counter()
        best = heads.best_heads(heads.detector_scores(model, probe))
        elapsed = time.perf_counter() - start
        if not reached and all(best[name][2] >= bar for name, bar in THRESHOLDS.items()):
            reached.update(step=step, at=time.perf_counter() - began - scoring[0])
        scoring[0] += elapsed

    with one_thread():
        began = time.perf_counter()
        history = train.train(
            model,
            data.load_split("train"),
            data.load_split("valid"),
            train_config,
            progress=False,
            callback=score,
        )
        total = time.perf_counter() - began - scoring[0]
    final = heads.best_heads(heads.detector_scores(model, data.load_split("valid")))
    return {
        "recipe": recipe,
        "steps": train_config.steps,
        "train_s": total,
        "reached_step": reached.get("step"),
        "reached_s": reached.get("at"),
        "val_loss": history.val_loss[-1],
        "final": {name: round(best[2], 3) for name, best in final.items()},
    }


def report() -> list[str]:
    r = measure()
    if r["reached_s"] is None:
        status = f"**missed**: thresholds not reached in {r['steps']} steps"
    else:
        status = "met" if r["reached_s"] <= TARGET_S else "**missed**"
    reached = (
        "never" if r["reached_s"] is None else f"{r['reached_s']:.1f} s (step {r['reached_step']})"
    )
    scores = ", ".join(f"{k} {v}" for k, v in r["final"].items())
    return [
        f"Recipe `{r['recipe']}` ({r['steps']} steps, one thread): thresholds "
        f"(previous >= 0.9, bracket >= 0.7, subject >= 0.7) first reached after {reached}; "
        f"whole run {r['train_s']:.1f} s; final validation loss {r['val_loss']:.3f}; best heads: "
        f"{scores}. Target <= {TARGET_S:.0f} s: {status}."
    ]
