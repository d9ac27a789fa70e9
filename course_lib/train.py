"""Training a TinyTransformer on the toy language; rebuilding the shipped checkpoints (lesson 06).

`python -m course_lib.train` retrains every checkpoint in data/checkpoints/ from its seed;
`python -m course_lib.train rope-h4 none-h4` just those; `--data` rewrites data/*.txt first.
"""

import argparse
import json
import math
import os
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import NamedTuple

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

import course_lib
from course_lib import data, heads, places
from course_lib.model import CHECKPOINT_DIR, ModelConfig, TinyTransformer
from course_lib.runtime import evaluating


@dataclass(frozen=True)
class TrainConfig:
    """How one training run goes; saved in each checkpoint's card."""

    steps: int = 1000  # optimizer steps
    batch_size: int = 32  # sequences per step
    lr: float = 3e-3  # peak learning rate
    weight_decay: float = 0.01  # AdamW's decoupled weight decay
    warmup_steps: int = 100  # linear warm-up from 0; then cosine decay to lr / 10
    grad_clip: float | None = 1.0  # clip the global gradient norm to this (None: never)
    eval_every: int = 100  # validation loss every this many steps, and after the last
    seed: int = 0  # initial weights and batch order


@dataclass
class History:
    """What a run recorded: per step, and validation loss at intervals (lesson 06)."""

    step: list[int] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    grad_norm: list[list[float]] = field(default_factory=list)  # per step: one norm per block
    val_step: list[int] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    wall_time: float = 0.0  # seconds for the whole run, validation included


def lm_loss(model, ids: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of predicting ids[:, t + 1] from ids[:, :t + 1] (lesson 01)."""
    logits = model(ids[:, :-1])  # (B, T-1, V)
    return F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())  # (B*(T-1), V) vs (B*(T-1),)


@torch.no_grad()
def loss_by_position(model, ids: torch.Tensor, batch_size: int = 100) -> torch.Tensor:
    """(T-1,): mean loss of the prediction made at each position t, over ids (N, T) (lesson 04)."""
    total = torch.zeros(ids.shape[1] - 1)
    with evaluating(model):
        for i in range(0, len(ids), batch_size):
            chunk = ids[i : i + batch_size]
            logits = model(chunk[:, :-1])  # (B, T-1, V)
            loss = F.cross_entropy(logits.transpose(1, 2), chunk[:, 1:], reduction="none")
            total += loss.sum(dim=0)  # loss: (B, T-1)
    return total / len(ids)


@torch.no_grad()
def token_losses(model, ids: torch.Tensor, batch_size: int = 100) -> torch.Tensor:
    """(N, T-1): the loss of every prediction, ids[:, t + 1] from ids[:, :t + 1] (lesson 01)."""
    rows = []
    with evaluating(model):
        for i in range(0, len(ids), batch_size):
            chunk = ids[i : i + batch_size]
            logits = model(chunk[:, :-1])  # (B, T-1, V)
            rows.append(F.cross_entropy(logits.transpose(1, 2), chunk[:, 1:], reduction="none"))
    return torch.cat(rows)  # (N, T-1)


def evaluate(model, ids: torch.Tensor) -> float:
    """Mean next-token loss over ids (N, T), in eval mode, without gradients (lesson 06)."""
    return float(loss_by_position(model, ids).mean())


def learning_rate(step: int, config: TrainConfig) -> float:
    """Linear warm-up to config.lr, then a cosine decay to config.lr / 10 at the last step."""
    if step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
    return config.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def batches(train_ids: torch.Tensor, batch_size: int, generator: torch.Generator):
    """Endless batches (batch_size, T) of rows of train_ids (N, T), drawn with replacement
    from generator: the order train() sees them in, for a given seed (lesson 06)."""
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator: expected a torch.Generator, got {type(generator).__name__}")
    while True:
        yield train_ids[torch.randint(len(train_ids), (batch_size,), generator=generator)]


class StepResult(NamedTuple):
    """What one training step reports: its loss and each block's gradient norm (lesson 06)."""

    loss: float  # the batch's loss before the update
    grad_norms: list[float]  # per block, before clipping


def train_step(model, optimizer, ids: torch.Tensor, step: int, config: TrainConfig) -> StepResult:
    """One step of train(): the schedule's lr at `step` into every param group, this batch's
    gradients only, the global norm clipped to config.grad_clip (unless None), the update
    (lesson 06)."""
    lr = learning_rate(step, config)
    for group in optimizer.param_groups:
        group["lr"] = lr
    loss = lm_loss(model, ids)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    grad_norms = [_grad_norm(block) for block in model.blocks]
    if config.grad_clip is not None:
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
    optimizer.step()
    return StepResult(loss.item(), grad_norms)


def train(
    model,
    train_ids,
    valid_ids,
    config: TrainConfig = TrainConfig(),
    *,
    progress=True,
    callback=None,
):
    """Train on random batches of train_ids (N, T) with AdamW; return a History (lesson 06).

    callback(steps_done, model), if given, runs after each validation (every eval_every steps
    and after the last), e.g. to score the heads as they specialise; it must not train.
    """
    generator = torch.Generator().manual_seed(config.seed)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=config.lr, weight_decay=config.weight_decay
    )
    history = History()
    start = time.perf_counter()
    model.train()
    bar = tqdm(range(config.steps), disable=not progress, desc="training")
    drawn = batches(train_ids, config.batch_size, generator)
    for step in bar:
        loss, grad_norms = train_step(model, optimizer, next(drawn), step, config)
        history.grad_norm.append(grad_norms)
        history.step.append(step)
        history.train_loss.append(loss)
        history.lr.append(optimizer.param_groups[0]["lr"])
        if (step + 1) % config.eval_every == 0 or step + 1 == config.steps:
            history.val_step.append(step)
            history.val_loss.append(evaluate(model, valid_ids))
            if callback is not None:
                callback(step + 1, model)
                model.train()
        val = f"{history.val_loss[-1]:.3f}" if history.val_loss else "-"
        bar.set_postfix(loss=f"{loss:.3f}", val=val, refresh=False)
    history.wall_time = time.perf_counter() - start
    model.eval()
    return history


def _grad_norm(module) -> float:
    norms = [p.grad.norm() for p in module.parameters() if p.grad is not None]
    return float(torch.stack(norms).norm()) if norms else 0.0


# ---------------------------------------------------------------- the shipped checkpoints

_BASE = ModelConfig(vocab_size=len(data.VOCAB), max_len=data.LONG_LEN)
RECIPES = {  # name -> (model config, training config)
    "rope-h1": (ModelConfig(**{**asdict(_BASE), "num_heads": 1}), TrainConfig()),
    "rope-h2": (ModelConfig(**{**asdict(_BASE), "num_heads": 2}), TrainConfig()),
    "rope-h4": (_BASE, TrainConfig()),
    "rope-h8": (ModelConfig(**{**asdict(_BASE), "num_heads": 8}), TrainConfig()),
    "sinusoidal-h4": (ModelConfig(**{**asdict(_BASE), "positional": "sinusoidal"}), TrainConfig()),
    "none-h4": (ModelConfig(**{**asdict(_BASE), "positional": "none"}), TrainConfig()),
    "rope-h4-noscale": (ModelConfig(**{**asdict(_BASE), "scale": False}), TrainConfig()),
}
# lesson 03's three-places task (course_lib.places): one layer, D = 64, 1 to 8 heads, a budget
# of 400 steps, about 5 s of CPU each; tools/heads_sweep.py repeats them over seeds
_PLACES = ModelConfig(len(places.VOCAB), d_model=64, d_ff=128, num_layers=1, max_len=places.SEQ_LEN)
for _h in (1, 2, 4, 8):
    RECIPES[f"places-h{_h}"] = (
        replace(_PLACES, num_heads=_h),
        TrainConfig(steps=400, eval_every=50),
    )
# lesson 06's live run: the rope-h4 recipe cut to 400 steps (same warm-up), which still
# reaches every detector's bar (previous >= 0.9, bracket >= 0.7, subject >= 0.7) in ~30 s
CAPSTONE = (_BASE, TrainConfig(steps=400, eval_every=50))


def build_checkpoint(name: str, directory=CHECKPOINT_DIR, *, progress=True) -> dict:
    """Train recipe `name` from its seed, save NAME.pt and NAME.json; return the card."""
    if name not in RECIPES:
        raise ValueError(f"name: expected one of {', '.join(RECIPES)}; got {name!r}")
    model_config, train_config = RECIPES[name]
    if name.startswith("places-"):
        return _save(name, *places_run(model_config, train_config, progress=progress), directory)
    train_ids, valid_ids, long_ids = (data.load_split(s) for s in ("train", "valid", "long"))
    course_lib.set_seed(train_config.seed)
    model = TinyTransformer.from_config(model_config)
    cpu_start = time.process_time()
    history = train(model, train_ids, valid_ids, train_config, progress=progress)
    cpu_time = time.process_time() - cpu_start
    weights = heads.attention_weights(model, valid_ids)
    scores = {k: heads.detector_score(weights, valid_ids, k) for k in heads.DETECTORS}
    by_position = loss_by_position(model, long_ids)
    L = data.SEQ_LEN
    card = {
        "name": name,
        "config": asdict(model_config),
        "train": asdict(train_config),
        **_run_facts(model, history, cpu_time),
        "load_average": round(os.getloadavg()[0], 2),
        "torch": torch.__version__,
        "val_loss": round(history.val_loss[-1], 4),
        "detectors": {k: _rounded(v) for k, v in scores.items()},
        "best_heads": {k: [i, j, round(s, 3)] for k, (i, j, s) in heads.best_heads(scores).items()},
        # mass on t - 1 over every position, not only inside songs
        "previous_everywhere": _rounded(heads.offset_score(weights)),
        "length_generalisation": {
            "train_len": L,
            "eval_len": long_ids.shape[1],
            "loss_by_position": [round(float(x), 4) for x in by_position],
            "note": "loss_by_position[t]: loss of predicting token t + 1 from tokens 0..t",
            "mean_loss": {  # by ranges of t, both ends included
                f"{lo}-{hi - 1}": round(float(by_position[lo:hi].mean()), 4)
                for lo, hi in ((0, L), (L, 2 * L), (2 * L, 4 * L - 1))
            },
        },
    }
    return _save(name, model, card, directory)


def _run_facts(model, history: History, cpu_time: float) -> dict:
    """What every card says about the run itself: size, time and threads."""
    return {
        "parameters": sum(p.numel() for p in model.parameters()),
        "wall_time_s": round(history.wall_time, 1),
        "cpu_time_s": round(cpu_time, 1),
        "threads": torch.get_num_threads(),
    }


def _save(name: str, model, card: dict, directory) -> dict:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), directory / f"{name}.pt")
    (directory / f"{name}.json").write_text(json.dumps(card, indent=1) + "\n", encoding="utf-8")
    return card


def places_run(model_config: ModelConfig, train_config: TrainConfig, *, progress=False):
    """Train one model on lesson 03's three-places task; return (model, card) (lesson 03).

    The card records the answers' accuracy every eval_every steps, and each head's attention
    mass from "?" to the words 1, 2 and 3 back (its detectors) on the task's validation split.
    """
    train_ids, valid_ids = places.load_split("train"), places.load_split("valid")
    course_lib.set_seed(train_config.seed)
    model = TinyTransformer.from_config(model_config)
    curve = []

    def record(step, m):
        curve.append([step, round(places.task_scores(m, valid_ids)["accuracy"], 4)])

    cpu_start = time.process_time()
    history = train(model, train_ids, valid_ids, train_config, progress=progress, callback=record)
    cpu_time = time.process_time() - cpu_start
    scores = places.place_scores(heads.attention_weights(model, valid_ids), valid_ids)
    card = {
        "name": f"places-h{model_config.num_heads}",
        "task": "places",
        "config": asdict(model_config),
        "train": asdict(train_config),
        **_run_facts(model, history, cpu_time),
        "torch": torch.__version__,
        "val_loss": round(history.val_loss[-1], 4),
        **{k: round(v, 4) for k, v in places.task_scores(model, valid_ids).items()},
        "accuracy_by_step": curve,
        "detectors": {k: _rounded(v) for k, v in scores.items()},
        "best_heads": {k: [i, j, round(s, 3)] for k, (i, j, s) in heads.best_heads(scores).items()},
    }
    return model, card


def _rounded(table: torch.Tensor) -> list[list[float]]:
    return [[round(float(s), 3) for s in row] for row in table]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="Rebuild the course's shipped checkpoints.")
    parser.add_argument("names", nargs="*", help=f"default: all of {', '.join(RECIPES)}")
    parser.add_argument("--data", action="store_true", help="regenerate data/*.txt first")
    # one thread: on a busy 2-core machine two threads ran ten times slower here
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.data:
        data.write_data()
    for name in args.names or RECIPES:
        card = build_checkpoint(name)
        best = ", ".join(f"{k} {v[2]:.2f}" for k, v in card["best_heads"].items())
        print(f"{name}: {card['wall_time_s']} s, val loss {card['val_loss']}, best heads: {best}")


if __name__ == "__main__":
    main()
