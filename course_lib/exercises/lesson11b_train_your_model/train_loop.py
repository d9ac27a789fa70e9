"""Lesson 11b's train_loop exercise: the whole loop, beside course_lib.train.train."""

import copy
import functools
import math
from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import nn

from course_lib import corpus, language, train
from course_lib.exercises.core import Bug, Case, Exercise, Verdict, run
from course_lib.model import TinyTransformer
from course_lib.train import TrainConfig


class _Watched(nn.Module):
    """A model that notes whether each forward pass made with gradients on ran in train mode
    (a measurement under torch.no_grad() is not a training step, whatever its mode)."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.modes: list[bool] = []

    @property
    def blocks(self):  # course_lib.train.train_step reads each block's gradient norm
        return self.inner.blocks

    def forward(self, idx):
        if torch.is_grad_enabled():
            self.modes.append(self.training)
        return self.inner(idx)


def watched_copy(model) -> _Watched:
    """A copy of model that notes the mode of its training forward passes."""
    return _Watched(copy.deepcopy(model))


def _measuring_callback(seen: list):
    """A callback as the lesson's: the model measured in eval mode, left in eval mode; it
    notes the step it was given and the parameters' sum at that moment."""

    def callback(step, model):
        model.eval()
        with torch.no_grad():
            model(torch.zeros(1, 4, dtype=torch.long))
        total = sum(float(p.detach().double().sum()) for p in model.parameters())
        seen.append([float(step), total])

    return callback


def _outcome(model: _Watched, losses, seen) -> tuple:
    """(losses (n,) float64, parameters after (P,), every training forward in train mode
    (0-d bool), the callback's [step, parameter sum] rows (k, 2) float64)."""
    if not isinstance(losses, list | tuple) or not all(type(x) is float for x in losses):
        got = type(losses).__name__
        if isinstance(losses, list | tuple) and losses:
            got = f"a {got} of {type(losses[0]).__name__}"
        raise TypeError(
            f"train_loop: expected a list of Python floats (each step's loss.item()), got {got}"
        )
    parameters = torch.cat([p.detach().flatten() for p in model.parameters()])  # (P,)
    return (
        torch.tensor(losses, dtype=torch.float64),
        parameters,
        torch.tensor(bool(model.modes) and all(model.modes)),
        torch.tensor(seen, dtype=torch.float64).reshape(-1, 2),
    )


def loop_run(fn):
    """The learner's loop as a function of (model, train_ids, config): run on a watched copy,
    with the measuring callback; returns _outcome's tuple."""

    def ran(model, train_ids, config):
        watched, seen = watched_copy(model), []
        losses = fn(watched, train_ids, config, _measuring_callback(seen))
        return _outcome(watched, losses, seen)

    return ran


def loop_reference(model, train_ids, config):
    """course_lib.train.train on a watched copy, with the same callback."""
    watched, seen = watched_copy(model), []
    history = train.train(
        watched, train_ids, train_ids[:2], config, progress=False,
        callback=_measuring_callback(seen),
    )  # fmt: skip
    return _outcome(watched, history.train_loss, seen)


# ---------------------------------------------------------------- the loop, and its bugs


def _schedule(step, config):
    """The recipe's warm-up and cosine, written out: the loops here run inside a check that
    refuses train.learning_rate (a learner's loop must not call it)."""
    if step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
    return config.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def _warmup_from_zero(step, config):
    if step < config.warmup_steps:
        return config.lr * step / config.warmup_steps
    return _schedule(step, config)


def _one_step_late(step, config):
    return _schedule(step - 1, config) if step > 0 else 0.0


def _no_floor(step, config):
    if step < config.warmup_steps:
        return _schedule(step, config)
    progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
    return config.lr * 0.5 * (1 + math.cos(math.pi * progress))


def _shifted_loss(model, ids):
    return train.lm_loss(model, ids)


def _unshifted_loss(model, ids):
    logits = model(ids)  # (B, T, V): each position scored on its own token
    return F.cross_entropy(logits.flatten(0, 1), ids.flatten())


def _written(
    *,
    lr=_schedule,
    loss_fn=_shifted_loss,
    zero="before backward",
    clip="after backward",
    back_to_train=True,
    optimizer_each_step=False,
    generator_each_step=False,
    callback_step="after",
    as_float=True,
):
    """A training loop with one thing done differently (the bugs below)."""

    def loop(model, train_ids, config, callback=None):
        def new_optimizer():
            return torch.optim.AdamW(
                model.parameters(), lr=config.lr, weight_decay=config.weight_decay
            )

        optimizer = new_optimizer()
        generator = torch.Generator().manual_seed(config.seed)
        model.train()
        losses = []
        for step in range(config.steps):
            if optimizer_each_step:
                optimizer = new_optimizer()
            if generator_each_step:
                generator = torch.Generator().manual_seed(config.seed)
            rows = torch.randint(len(train_ids), (config.batch_size,), generator=generator)
            ids = train_ids[rows]  # (B, T)
            for group in optimizer.param_groups:
                group["lr"] = lr(step, config)
            loss = loss_fn(model, ids)
            if zero == "before backward":
                optimizer.zero_grad()
            if clip == "before backward" and config.grad_clip is not None:
                nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            loss.backward()
            if zero == "after backward":
                optimizer.zero_grad()
            if clip == "after backward" and config.grad_clip is not None:
                nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            if clip == "always":  # grad_clip=None reaches clip_grad_norm_
                nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            if clip == "if above 0" and config.grad_clip > 0:  # None compared with 0
                nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            if clip == "by value" and config.grad_clip is not None:
                nn.utils.clip_grad_value_(model.parameters(), config.grad_clip)
            if callback_step == "before update" and _measures(step, config) and callback:
                callback(step + 1, model)
                model.train()
            optimizer.step()
            losses.append(loss.item() if as_float else loss.detach())
            if callback_step != "before update" and callback is not None:
                due = (step if callback_step == "counted from 0" else step + 1) % config.eval_every
                last = step + 1 == config.steps and callback_step != "not after the last"
                if due == 0 or last:
                    callback(step if callback_step == "counted from 0" else step + 1, model)
                    if back_to_train:
                        model.train()
        return losses

    return loop


def _measures(step, config):
    return (step + 1) % config.eval_every == 0 or step + 1 == config.steps


def _bug(name, symptom, cause, **done_differently):
    return Bug(name, loop_run(_written(**done_differently)), symptom, cause)


# ---------------------------------------------------------------- cases


@functools.cache
def _train_rows() -> torch.Tensor:
    return corpus.load_split("train")[:512, :17]  # (512, 17): short lines keep the check quick


def _small_model():
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(11)
        return TinyTransformer(len(language.VOCAB), 16, 2, 32, 1, max_len=32)


def _loop_cases() -> list[Case]:
    rows, model = _train_rows(), _small_model()
    base = TrainConfig(steps=6, batch_size=4, warmup_steps=3, eval_every=2, grad_clip=0.05)
    return [
        Case((model, rows, base), label="6 steps, warm-up 3, a callback every 2, grad_clip 0.05"),
        Case((model, rows, replace(base, steps=5, warmup_steps=2, eval_every=3, grad_clip=None,
                                   seed=1)),
             label="5 steps, warm-up 2, a callback after steps 3 and 5 (the last), never clip"),
        Case((model, rows, replace(base, steps=4, warmup_steps=4, eval_every=10, lr=1e-2,
                                   weight_decay=0.1, grad_clip=0.02, seed=2)),
             label="4 steps, all warm-up, lr 1e-2, weight_decay 0.1, grad_clip 0.02, one "
             "callback after the last"),
    ]  # fmt: skip


TRAIN_LOOP = Exercise(
    name="train_loop",
    lesson="11b_train_your_model",
    reference=loop_reference,
    cases=_loop_cases,
    idea="the section 'The whole loop': the recipe, its schedule and the contract",
    bugs=(
        _bug(
            "tensor_losses",
            "your loop returns its losses as tensors",
            "keep each step's loss as a Python number (loss.item()): a list of tensors holds "
            "on to every step's graph, and the lesson prints and plots plain numbers.",
            as_float=False,
        ),
        _bug(
            "no_zero_grad",
            "your first step matches the course's, the later ones do not",
            "the gradients of earlier steps are still there: backward adds to .grad, it "
            "never overwrites it. Clear them each step, before backward.",
            zero="never",
        ),
        _bug(
            "zeroed_after_backward",
            "your parameters never change",
            "you clear the gradients after backward and before optimizer.step(), so the "
            "step finds no gradient at all.",
            zero="after backward",
        ),
        _bug(
            "targets_not_shifted",
            "your losses are far below the course's from the first step",
            "each position is scored on its own token, which it can see: the model learns to "
            "copy its input. Position t predicts token t + 1: feed ids[:, :-1] and score "
            "against ids[:, 1:].",
            loss_fn=_unshifted_loss,
        ),
        _bug(
            "eval_mode_left_on",
            "your losses and parameters match, but your model trains in eval mode after the "
            "first callback",
            "the callback measures the model in eval mode and your loop never switches it "
            "back: call model.train() after each callback. This model has no dropout, so the "
            "numbers do not show it; one with dropout would train without it.",
            back_to_train=False,
        ),
        _bug(
            "optimizer_each_step",
            "your first step matches the course's, the later ones do not",
            "you make a new AdamW every step, so its running averages of the gradient and "
            "of its square restart each time: make the optimizer once, before the loop.",
            optimizer_each_step=True,
        ),
        _bug(
            "generator_each_step",
            "your loop trains on the same batch every step",
            "the generator is seeded again inside the loop, so every step draws the same "
            "rows: seed one generator before the loop and keep drawing from it.",
            generator_each_step=True,
        ),
        _bug(
            "warmup_from_zero",
            "your parameters differ from the first step on: your first learning rate is 0",
            "the warm-up uses step / warmup_steps, which is 0 at step 0. Steps count from 0, "
            "so the formula uses step + 1.",
            lr=_warmup_from_zero,
        ),
        _bug(
            "lr_one_step_late",
            "each of your steps uses the learning rate of the step before",
            "the learning rate is one step behind: step s must use the schedule's value at s "
            "(set it before optimizer.step(), from this step's number).",
            lr=_one_step_late,
        ),
        _bug(
            "no_floor",
            "your learning rate after the warm-up is too low, more so near the end",
            "your cosine decays to 0; the course's decays to lr / 10: 0.1 of the peak plus "
            "0.9 of it times the cosine factor.",
            lr=_no_floor,
        ),
        _bug(
            "not_clipped",
            "your parameters move differently once the gradient norm is above grad_clip",
            "optimizer.step() sees unclipped gradients: the clipping is missing, or it runs "
            "before backward (there are no gradients yet to clip) or after the step.",
            clip=None,
        ),
        _bug(
            "clipped_with_none",
            "your loop clips on a case with grad_clip=None",
            "grad_clip=None means do not clip: the run has no limit on the gradient norm. "
            "clip_grad_norm_ needs a number, so call it only when config.grad_clip is not "
            "None.",
            clip="always",
        ),
        _bug(
            "none_compared",
            "your loop compares grad_clip with a number on a case with grad_clip=None",
            "grad_clip=None means do not clip, and None cannot be compared with 0: test it "
            "with `if config.grad_clip is not None:` before you clip.",
            clip="if above 0",
        ),
        _bug(
            "clipped_by_value",
            "your parameters move differently once the gradients are large",
            "you clip each gradient entry to [-grad_clip, grad_clip]; the recipe scales all "
            "the gradients together so that their global norm is at most grad_clip.",
            clip="by value",
        ),
        _bug(
            "callback_before_update",
            "your callback sees the model before the step's update",
            "call the callback after optimizer.step(): it measures the model the step made.",
            callback_step="before update",
        ),
        _bug(
            "callback_counted_from_0",
            "your callback runs one step early, with the wrong step number",
            "after step s (counted from 0) the model has made s + 1 updates: the callback "
            "gets s + 1, and runs when s + 1 is a multiple of eval_every.",
            callback_step="counted from 0",
        ),
        _bug(
            "callback_not_after_last",
            "your callback does not run after the last step",
            "the run ends with a measurement: call the callback after the last step too, "
            "whether or not its number is a multiple of eval_every.",
            callback_step="not after the last",
        ),
    ),  # fmt: skip
    hints=(
        "In order: the optimizer and the generator once, train mode; then each step: its "
        "batch, its learning rate, its loss, clear the gradients, backward, clip (unless "
        "grad_clip is None), optimizer.step(), note loss.item(); the callback when due, then "
        "train mode again.",
        "In a cell of its own (never inside your loop), compare your learning rates with "
        "train.learning_rate(step, config) at a few steps, warm-up and cosine both, and your "
        "first batch with next(train.batches(train_ids, config.batch_size, "
        "torch.Generator().manual_seed(config.seed))).",
    ),
    # the course's loop and its pieces: a loop that calls them checks nothing of yours
    forbidden=(
        (train, "train"),
        (train, "train_step"),
        (train, "learning_rate"),
        (train, "batches"),
    ),
    forbidden_hint="train.train runs the whole loop and train.train_step a whole step; "
    "train.learning_rate and train.batches are the schedule and the batches the exercise asks "
    "you to write. The check compares your loop with train.train, so a loop built on them "
    "checks nothing of yours: write the schedule's two formulas and the batch line yourself.",
    # a right loop that scores model(ids) without its last position, or builds the loss by
    # hand, drifts from the course's by about 1e-7 after a few steps
    atol=1e-5,
    rtol=1e-4,
)


def run_loop(fn) -> Verdict:
    """Check a train_loop: run it and the course's train from the same model on every case."""
    if not callable(fn):
        return run(TRAIN_LOOP, fn)
    return run(TRAIN_LOOP, loop_run(fn))
