"""Training a TinyTransformer on the toy language (lesson 11b); rebuilding every shipped file.

    python -m course_lib.train --data    # data/language/ again, then every shipped checkpoint
    python -m course_lib.train           # every shipped checkpoint in data/checkpoints/
    python -m course_lib.train lang-base-s0 lesson11-stand-in   # just those
    python -m course_lib.train --jobs 2  # two trainings at a time, one torch thread each

The shipped checkpoints are the trained variants of course_lib.variants.CHECKPOINTS, each
trained from its seed exactly as the variant table trains it (`variants.save_trained`), and
lesson 12's stand-in, lesson 11b run top to bottom with the course's solutions
(tools/lesson11_stand_in.py: it runs the lesson, so it needs the repository), rebuilt last
because lesson 11b reads the shipped base model. Every training runs on one thread, so a rebuild
on the same kernel path writes the same bytes: tests/test_corpus.py regenerates the data files
and compares checksums, and the retraining tests of tests/test_train.py rebuild a variant and
the stand-in and compare their weights and cards with the shipped ones.
"""

import argparse
import math
import subprocess
import sys
import time
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import NamedTuple

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from course_lib import corpus
from course_lib.model import CHECKPOINT_DIR
from course_lib.paths import ROOT
from course_lib.runtime import evaluating


@dataclass(frozen=True)
class TrainConfig:
    """How one training run goes; saved in each checkpoint's card (lesson 11b)."""

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
    """What a run recorded: per step, and validation loss at intervals (lesson 11b)."""

    step: list[int] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    grad_norm: list[list[float]] = field(default_factory=list)  # per step: one norm per block
    val_step: list[int] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    wall_time: float = 0.0  # seconds for the whole run, validation included


def lm_loss(model, ids: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of predicting ids[:, t + 1] from ids[:, :t + 1] (lesson 01b)."""
    logits = model(ids[:, :-1])  # (B, T-1, V)
    return F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())  # (B*(T-1), V) vs (B*(T-1),)


@torch.no_grad()
def loss_by_position(model, ids: torch.Tensor, batch_size: int = 100) -> torch.Tensor:
    """(T-1,): mean loss of the prediction made at each position t, over ids (N, T) (lesson 11b)."""
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
    """(N, T-1): the loss of every prediction, ids[:, t + 1] from ids[:, :t + 1] (lesson 01b)."""
    rows = []
    with evaluating(model):
        for i in range(0, len(ids), batch_size):
            chunk = ids[i : i + batch_size]
            logits = model(chunk[:, :-1])  # (B, T-1, V)
            rows.append(F.cross_entropy(logits.transpose(1, 2), chunk[:, 1:], reduction="none"))
    return torch.cat(rows)  # (N, T-1)


def evaluate(model, ids: torch.Tensor) -> float:
    """Mean next-token loss over ids (N, T), in eval mode, without gradients (lesson 11b)."""
    return float(loss_by_position(model, ids).mean())


def learning_rate(step: int, config: TrainConfig) -> float:
    """Linear warm-up to config.lr, then a cosine decay to config.lr / 10 at the last step
    (lesson 11b)."""
    if step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
    return config.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def batches(train_ids: torch.Tensor, batch_size: int, generator: torch.Generator):
    """Endless batches (batch_size, T) of rows of train_ids (N, T), drawn with replacement
    from generator: the order train() sees them in, for a given seed (lesson 11b)."""
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator: expected a torch.Generator, got {type(generator).__name__}")
    while True:
        yield train_ids[torch.randint(len(train_ids), (batch_size,), generator=generator)]


class StepResult(NamedTuple):
    """What one training step reports: its loss and each block's gradient norm (lesson 11b)."""

    loss: float  # the batch's loss before the update
    grad_norms: list[float]  # per block, before clipping


def train_step(model, optimizer, ids: torch.Tensor, step: int, config: TrainConfig) -> StepResult:
    """One step of train(): the schedule's lr at `step` into every param group, this batch's
    gradients only, the global norm clipped to config.grad_clip (unless None), the update
    (lesson 11b)."""
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
    """Train on random batches of train_ids (N, T) with AdamW; return a History (lesson 11b).

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


# ---------------------------------------------------------------- the shipped files

STAND_IN = "lesson11-stand-in"  # data/checkpoints/lesson11-stand-in.pt (course_lib.capstone)


def _trained_variants() -> dict[str, tuple[str, int]]:
    """Each shipped trained variant's name and what it is trained as: "lang-base-s0" ->
    ("base", 0)."""
    from course_lib import variants  # imported here: variants trains with this module

    return {
        variants.checkpoint_name(variant, seed): (variant, seed)
        for variant, seeds in variants.CHECKPOINTS.items()
        for seed in seeds
    }


def shipped_checkpoints() -> list[str]:
    """Every shipped checkpoint's name, in the order a rebuild trains them: the trained variants
    ("lang-base-s0", ...), then lesson 11b's stand-in, whose run reads the base model (lesson
    11b)."""
    return [*_trained_variants(), STAND_IN]


def _save_variant(job: tuple[str, int, Path]) -> str:
    from course_lib import variants

    card = variants.save_trained(*job)
    return f"{card['name']}: excess over the floor {card['excess']['valid']['all']:.4f} (valid)"


def build_stand_in(target: Path) -> Path:
    """Run tools/lesson11_stand_in.py in a process of its own, writing lesson 11b's run to
    target; it runs the lesson, which only the repository has (lesson 11b)."""
    tool = ROOT / "tools" / "lesson11_stand_in.py"
    if not tool.is_file():
        raise FileNotFoundError(
            f"{STAND_IN}: its tool runs lesson 11b from the repository, and there is no {tool} "
            "here (an installed course has none): rebuild it from a clone"
        )
    command = [sys.executable, "-m", "tools.lesson11_stand_in", str(target)]
    subprocess.run(command, cwd=ROOT, check=True)
    return target


def rebuild(names=None, directory=CHECKPOINT_DIR, *, jobs: int = 1, say=print) -> None:
    """Train the shipped checkpoints `names` (default: all, shipped_checkpoints) again from
    their seeds into directory, `jobs` trainings at a time; the stand-in last (lesson 11b)."""
    known = shipped_checkpoints()
    names = known if names is None else list(names)
    for name in names:
        if name not in known:
            raise ValueError(f"names: expected some of {', '.join(known)}; got {name!r}")
    directory = Path(directory)
    variants = _trained_variants()
    trained = [(*variants[name], directory) for name in names if name != STAND_IN]
    if jobs == 1:
        for line in map(_save_variant, trained):
            say(line)
    elif trained:
        with get_context("spawn").Pool(jobs) as pool:
            for line in pool.imap(_save_variant, trained):
                say(line)
    if STAND_IN in names:
        say(f"{STAND_IN}: wrote {build_stand_in(directory / f'{STAND_IN}.pt')}")


def main(argv=None) -> None:
    """python -m course_lib.train, as the module's docstring says (lesson 11b)."""
    names = shipped_checkpoints()
    parser = argparse.ArgumentParser(
        prog="python -m course_lib.train",
        description="Rebuild the course's shipped data: with --data the toy language's splits "
        "(data/language/), then every shipped checkpoint (data/checkpoints/), each trained "
        "again from its seed on one torch thread, lesson 11b's stand-in last.",
    )
    parser.add_argument(
        "names", nargs="*", help=f"only these checkpoints (default: all of {', '.join(names)})"
    )
    parser.add_argument(
        "--data", action="store_true", help="first write data/language/ again (corpus.write_data)"
    )
    parser.add_argument(
        "--jobs", type=int, default=1, help="trainings at a time, one torch thread each"
    )
    args = parser.parse_args(argv)
    if args.data:
        for path in corpus.write_data():
            print(f"wrote {path}", flush=True)
    rebuild(args.names or None, jobs=args.jobs, say=lambda line: print(line, flush=True))


if __name__ == "__main__":
    main()
