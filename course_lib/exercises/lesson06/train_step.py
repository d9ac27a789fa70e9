"""Lesson 06's train_step exercise: a few steps beside course_lib.train.train_step."""

import copy
import math
from dataclasses import replace

import torch

from course_lib import data, train
from course_lib.exercises.core import Bug, Case, Exercise, Verdict, run
from course_lib.exercises.lesson06.inputs import case_inputs
from course_lib.model import TinyTransformer
from course_lib.train import TrainConfig, learning_rate, lm_loss, train_step

# ---------------------------------------------------------------- train_step


def _set_lr(optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr


def course_step(model, optimizer, ids, step, config):
    """course_lib.train.train_step, returning only the loss, as the exercise's does."""
    return train_step(model, optimizer, ids, step, config).loss


def _step_with(*, lr=None, zero="before", clip="norm"):
    """course_step with one thing done differently (the bugs below)."""

    def step_fn(model, optimizer, ids, step, config):
        if lr is not None:
            _set_lr(optimizer, lr(step, config))
        loss = lm_loss(model, ids)
        if zero == "before":
            optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if zero == "after backward":
            optimizer.zero_grad(set_to_none=True)
        if config.grad_clip is not None and clip == "norm":
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        if config.grad_clip is not None and clip == "value":
            torch.nn.utils.clip_grad_value_(model.parameters(), config.grad_clip)
        optimizer.step()
        return loss.item()

    return step_fn


def _late_lr(model, optimizer, ids, step, config):
    loss = _step_with()(model, optimizer, ids, step, config)  # the optimizer's lr as it was
    _set_lr(optimizer, learning_rate(step, config))
    return loss


def _warmup_from_zero(step, config):
    if step < config.warmup_steps:
        return config.lr * step / config.warmup_steps
    return learning_rate(step, config)


def _recipe_numbers(step, config):
    return learning_rate(step, TrainConfig())  # the shipped recipe's steps, warm-up and peak


def _no_floor(step, config):
    if step < config.warmup_steps:
        return learning_rate(step, config)
    progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
    return config.lr * 0.5 * (1 + math.cos(math.pi * progress))


def _progress_from_zero(step, config):
    if step < config.warmup_steps:
        return learning_rate(step, config)
    return config.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / config.steps)))


def _trajectory(step_fn, model, batches, first_step, config):
    """Run step_fn on a copy of model with a fresh AdamW, one step per batch from first_step:
    (losses (n,) float64, every parameter after the last step (P,), lrs used (n,) float64)."""
    model = copy.deepcopy(model)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=config.lr, weight_decay=config.weight_decay
    )
    losses, lrs = [], []
    for i, ids in enumerate(batches):
        loss = step_fn(model, optimizer, ids, first_step + i, config)
        if not isinstance(loss, float):
            raise TypeError(
                "train_step should return the loss as a Python float (a tensor's .item()), "
                f"got {type(loss).__name__}"
            )
        losses.append(loss)
        lrs.append(optimizer.param_groups[0]["lr"])
    parameters = torch.cat([p.detach().flatten() for p in model.parameters()])  # (P,)
    return (
        torch.tensor(losses, dtype=torch.float64),
        parameters,
        torch.tensor(lrs, dtype=torch.float64),
    )


def trajectory(step_fn):
    """The learner's train_step as a function of (model, batches, first_step, config)."""

    def steps(model, batches, first_step, config):
        return _trajectory(step_fn, model, batches, first_step, config)

    return steps


def steps_reference(model, batches, first_step, config):
    return _trajectory(course_step, model, batches, first_step, config)


def _small_model():
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        return TinyTransformer(len(data.VOCAB), 16, 2, 32, 1, max_len=32)


def _step_cases() -> list[Case]:
    drawn = train.batches(case_inputs().train, 4, torch.Generator().manual_seed(8))

    def stacked(n, length=17):
        return torch.stack([next(drawn) for _ in range(n)])[..., :length]  # (n, 4, length)

    model = _small_model()
    base = TrainConfig(steps=40, warmup_steps=10)  # the course's lr, weight decay, grad_clip 1
    tight = replace(base, grad_clip=0.05)
    hard = replace(base, lr=1e-2, weight_decay=0.1, grad_clip=0.02)
    never = replace(base, grad_clip=None)
    return [
        Case((model, stacked(3), 0, tight), label="3 steps from step 0, in the warm-up, "
             "grad_clip 0.05"),
        Case((model, stacked(2), 9, base), label="steps 9 and 10: the last of the warm-up, "
             "the first of the cosine"),
        Case((model, stacked(3), 30, base), label="steps 30 to 32, late in the cosine"),
        Case((model, stacked(3), 12, hard), label="grad_clip 0.02, lr 1e-2, weight_decay 0.1"),
        Case((model, stacked(2), 5, never), label="grad_clip None: never clip"),
    ]  # fmt: skip


TRAIN_STEP = Exercise(
    name="train_step",
    lesson="06_capstone_train_tiny_transformer",
    reference=steps_reference,
    cases=_step_cases,
    idea="the section 'One training step': the schedule's formula and the cell that prints "
    "its values",
    bugs=(
        Bug(
            "no_zero_grad",
            trajectory(_step_with(lr=learning_rate, zero="never")),
            "your first step matches the course's, the second does not",
            "gradients from earlier steps are still there: backward adds to .grad, it does not "
            "overwrite it. Clear them every step, before backward (optimizer.zero_grad()).",
        ),
        Bug(
            "zeroed_after_backward",
            trajectory(_step_with(lr=learning_rate, zero="after backward")),
            "your parameters do not change at all",
            "you clear the gradients after backward and before optimizer.step(), so the step "
            "finds no gradients and skips every parameter.",
        ),
        Bug(
            "lr_not_set",
            trajectory(_step_with()),
            "your learning rate stays at config.lr",
            "the optimizer keeps the lr it was created with: set the schedule's value in each "
            "of optimizer.param_groups (a list of dicts with an 'lr' entry) before the step.",
        ),
        Bug(
            "lr_set_late",
            trajectory(_late_lr),
            "each step uses the learning rate of the step before",
            "you set the learning rate after optimizer.step(): the update has already used "
            "the old one. Set it first.",
        ),
        Bug(
            "warmup_from_zero",
            trajectory(_step_with(lr=_warmup_from_zero)),
            "your learning rate is one warm-up step behind (0 at step 0)",
            "the warm-up uses step / warmup_steps: step 0 then learns nothing. Steps count "
            "from 0, so the formula uses step + 1.",
        ),
        Bug(
            "recipe_numbers",
            trajectory(_step_with(lr=_recipe_numbers)),
            "your learning rate follows the shipped recipe's schedule, not this config's",
            "your schedule has fixed numbers in it (1000 steps, a warm-up of 100, a peak of "
            "0.003): take steps, warmup_steps and lr from config.",
        ),
        Bug(
            "no_floor",
            trajectory(_step_with(lr=_no_floor)),
            "your learning rate after the warm-up is too low, more so late in training",
            "your cosine decays to 0; the course's decays to lr / 10: 0.1 of the peak, plus "
            "0.9 of it times the cosine factor.",
        ),
        Bug(
            "cosine_from_step_0",
            trajectory(_step_with(lr=_progress_from_zero)),
            "your learning rate after the warm-up is too low",
            "your cosine's progress counts from step 0; it counts from the end of the warm-up: "
            "(step - warmup_steps) / (steps - warmup_steps).",
        ),
        Bug(
            "not_clipped",
            trajectory(_step_with(lr=learning_rate, clip=None)),
            "your parameters move differently once the gradient norm is above grad_clip",
            "optimizer.step() sees unclipped gradients: the clipping is missing, or it runs "
            "after the step, when the update is already made.",
        ),
        Bug(
            "clip_by_value",
            trajectory(_step_with(lr=learning_rate, clip="value")),
            "your parameters move differently once the gradients are large",
            "you clip each gradient entry to [-grad_clip, grad_clip]; the course scales all "
            "the gradients together so that their global norm is at most grad_clip "
            "(torch.nn.utils.clip_grad_norm_).",
        ),
    ),
    hints=(
        "Your step should do, in this order: set the lr, clear the gradients, compute the "
        "loss and backward, clip (unless grad_clip is None), optimizer.step().",
        "Compare your schedule with train.learning_rate(step, config) at a few steps, "
        "warm-up and cosine both.",
    ),
    atol=1e-6,
    rtol=1e-5,
)


def run_step(fn) -> Verdict:
    """Check a train_step: run it and the course's step from the same state on every case."""
    if not callable(fn):
        return run(TRAIN_STEP, fn)
    return run(TRAIN_STEP, trajectory(fn))
