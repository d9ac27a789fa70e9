"""Lesson 11b's exercise: the notebook's loop passes, learner-style loops get their hint.

Every wrong loop here is written out whole the way a learner would write it (a for loop
with its batch, lr, loss, backward and step), not taken from the bug list in
course_lib/exercises/lesson11b_train_your_model/; each names the bug its hint must be.
"""

import math
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import torch
import torch.nn.functional as F

from course_lib import train
from course_lib.checks import check_train_loop
from course_lib.exercises import by_name
from course_lib.exercises.core import run
from course_lib.exercises.lesson11b_train_your_model import (
    TRAIN_LOOP,
    loop_reference,
    loop_run,
    run_loop,
)
from helpers import failed_with_hint, solution_cells, verdict

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "11b_train_your_model.ipynb"
_check = partial(failed_with_hint, TRAIN_LOOP, judge=run_loop)  # _check(loop, bug)


def _lr(step, config):
    if step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    p = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
    return config.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))


def _due(step, config):
    return (step + 1) % config.eval_every == 0 or step + 1 == config.steps


def learner_loop(model, train_ids, config, callback=None, *, shift=True, zero=True,
                 back_to_train=True, clip_first=False, fresh_optimizer=False,
                 lr=_lr, items=True, clip=None):  # fmt: skip
    """A learner's loop, as a learner writes it: the loss by hand from log_softmax."""
    g = torch.Generator().manual_seed(config.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    model.train()
    losses = []
    for step in range(config.steps):
        if fresh_optimizer:
            opt = torch.optim.AdamW(
                model.parameters(), lr=config.lr, weight_decay=config.weight_decay
            )
        batch = train_ids[torch.randint(len(train_ids), (config.batch_size,), generator=g)]
        for group in opt.param_groups:
            group["lr"] = lr(step, config)
        if shift:
            logits, targets = model(batch)[:, :-1], batch[:, 1:]  # whole line in, last dropped
        else:
            logits, targets = model(batch), batch
        logp = F.log_softmax(logits, dim=-1)
        loss = -logp.gather(-1, targets[..., None]).mean()
        if zero:
            opt.zero_grad()
        if clip_first and config.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        loss.backward()
        if clip == "always":  # every run clips, whatever grad_clip says
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        elif clip == "if positive":
            if config.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        elif not clip_first and config.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        opt.step()
        losses.append(loss.item() if items else loss)
        if callback is not None and _due(step, config):
            callback(step + 1, model)
            if back_to_train:
                model.train()
    return losses


def _notebook_loop():
    """train_loop as lesson 11b's cell defines it, with the course's lesson-01 loss in `mine`."""
    loss = by_name("next_token_cross_entropy").reference
    namespace = {"torch": torch, "nn": torch.nn, "math": math,
                 "mine": SimpleNamespace(next_token_cross_entropy=loss)}  # fmt: skip
    return solution_cells(NOTEBOOK, namespace)["train_loop"]


def test_the_lessons_solution_with_the_courses_loss_passes():
    # with lesson 01b's own loss, as a learner's copy gets it, it is tests/test_every_exercise.py's
    assert run(TRAIN_LOOP, loop_run(_notebook_loop())).passed


def test_a_loop_on_a_learners_own_next_token_loss_passes():
    """The lesson's loop scores the whole batch with lesson 01b's next_token_cross_entropy,
    model(ids) with its last position dropped inside the loss: as right as model(ids[:, :-1])."""

    def next_token_cross_entropy(logits, ids):
        logp = logits[:, :-1].log_softmax(dim=-1)  # (B, T-1, V)
        return -logp.gather(-1, ids[:, 1:, None]).mean()

    def loop(model, train_ids, config, callback=None):
        opt = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        g = torch.Generator().manual_seed(config.seed)
        model.train()
        losses = []
        for step in range(config.steps):
            ids = train_ids[torch.randint(len(train_ids), (config.batch_size,), generator=g)]
            for group in opt.param_groups:
                group["lr"] = _lr(step, config)
            loss = next_token_cross_entropy(model(ids), ids)
            opt.zero_grad()
            loss.backward()
            if config.grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            opt.step()
            losses.append(loss.item())
            if callback is not None and _due(step, config):
                callback(step + 1, model)
                model.train()
        return losses

    assert run(TRAIN_LOOP, loop_run(loop)).passed


def test_a_right_loop_written_another_way_passes():
    assert run(TRAIN_LOOP, loop_run(learner_loop)).passed


def test_the_reference_is_the_courses_train():
    """loop_reference runs course_lib.train.train: its losses are the History's."""
    from course_lib import train

    for case in TRAIN_LOOP.case_list():
        model, rows, config = case.args
        losses = loop_reference(*case.args)[0]
        history = train.train(loop_reference.__globals__["watched_copy"](model), rows,
                              rows[:2], config, progress=False)  # fmt: skip
        assert losses.tolist() == history.train_loss


# ---------------------------------------------------------------- learner-style mistakes


def test_forgetting_zero_grad_is_named():
    _check(lambda *a: learner_loop(*a, zero=False), "no_zero_grad")


def test_targets_not_shifted_are_named():
    _check(lambda *a: learner_loop(*a, shift=False), "targets_not_shifted")


def test_eval_mode_left_on_is_named():
    _check(lambda *a: learner_loop(*a, back_to_train=False), "eval_mode_left_on")


def test_clipping_before_backward_is_named():
    _check(lambda *a: learner_loop(*a, clip_first=True), "not_clipped")


def test_a_loop_that_always_clips_is_told_none_means_do_not_clip():
    """grad_clip=None handed to clip_grad_norm_ on the case that never clips: torch's
    TypeError, and the hint says what None means here."""
    _check(lambda *a: learner_loop(*a, clip="always"), "clipped_with_none")
    result = run(TRAIN_LOOP, loop_run(lambda *a: learner_loop(*a, clip="always")))
    assert "raised TypeError" in result.message and "never clip" in result.message
    assert result.steps[0].startswith("grad_clip=None means do not clip")


def test_a_loop_that_compares_grad_clip_with_0_is_told_none_means_do_not_clip():
    _check(lambda *a: learner_loop(*a, clip="if positive"), "none_compared")
    result = run(TRAIN_LOOP, loop_run(lambda *a: learner_loop(*a, clip="if positive")))
    assert result.steps[0].startswith("grad_clip=None means do not clip")


def test_a_new_optimizer_every_step_is_named():
    _check(lambda *a: learner_loop(*a, fresh_optimizer=True), "optimizer_each_step")


def test_a_warmup_that_starts_at_zero_is_named():
    def lr(step, config):
        if step < config.warmup_steps:
            return config.lr * step / config.warmup_steps
        return _lr(step, config)

    _check(lambda *a: learner_loop(*a, lr=lr), "warmup_from_zero")


def test_a_schedule_one_step_late_is_named():
    _check(lambda *a: learner_loop(*a, lr=lambda s, c: _lr(s - 1, c) if s else 0.0),
           "lr_one_step_late")  # fmt: skip


def test_losses_kept_as_tensors_are_named():
    _check(lambda *a: learner_loop(*a, items=False), "tensor_losses")


def test_a_generator_seeded_inside_the_loop_is_named():
    def loop(model, train_ids, config, callback=None):
        opt = torch.optim.AdamW(model.parameters(), lr=config.lr,
                                weight_decay=config.weight_decay)  # fmt: skip
        model.train()
        losses = []
        for step in range(config.steps):
            g = torch.Generator().manual_seed(config.seed)
            batch = train_ids[torch.randint(len(train_ids), (config.batch_size,), generator=g)]
            for group in opt.param_groups:
                group["lr"] = _lr(step, config)
            loss = F.cross_entropy(model(batch[:, :-1]).transpose(1, 2), batch[:, 1:])
            opt.zero_grad()
            loss.backward()
            if config.grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            opt.step()
            losses.append(loss.item())
            if callback is not None and _due(step, config):
                callback(step + 1, model)
                model.train()
        return losses

    _check(loop, "generator_each_step")


def test_the_check_prints_the_symptom(capsys):
    out = verdict(check_train_loop, lambda *a: learner_loop(*a, zero=False), capsys)
    assert out.startswith("TRY AGAIN") and "first step matches" in out


# ---------------------------------------------------------------- the course's loop and pieces


def _refused(fn, name):
    result = run(TRAIN_LOOP, loop_run(fn))
    assert not result.passed and result.bug == "forbidden", result.message
    assert f"calls course_lib.train.{name}" in result.message
    assert result.steps[0] == TRAIN_LOOP.forbidden_hint
    assert result.steps[-1] == f"See {TRAIN_LOOP.idea}."


def test_a_loop_that_runs_the_courses_train_is_refused():
    def loop(model, train_ids, config, callback=None):
        history = train.train(model, train_ids, train_ids[:2], config, progress=False,
                              callback=callback)  # fmt: skip
        return history.train_loss

    _refused(loop, "train")


def test_a_loop_of_the_courses_train_step_is_refused():
    def loop(model, train_ids, config, callback=None):
        opt = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        g = torch.Generator().manual_seed(config.seed)
        model.train()
        losses = []
        for step in range(config.steps):
            ids = train_ids[torch.randint(len(train_ids), (config.batch_size,), generator=g)]
            losses.append(train.train_step(model, opt, ids, step, config).loss)
            if callback is not None and _due(step, config):
                callback(step + 1, model)
                model.train()
        return losses

    _refused(loop, "train_step")


def test_the_courses_schedule_inside_a_loop_is_refused():
    from course_lib.train import learning_rate  # imported by name: seen all the same

    _refused(lambda *a: learner_loop(*a, lr=learning_rate), "learning_rate")


def test_the_courses_batches_inside_a_loop_is_refused():
    def loop(model, train_ids, config, callback=None):
        opt = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        drawn = train.batches(train_ids, config.batch_size,
                              torch.Generator().manual_seed(config.seed))  # fmt: skip
        model.train()
        losses = []
        for step in range(config.steps):
            ids = next(drawn)
            for group in opt.param_groups:
                group["lr"] = _lr(step, config)
            loss = F.cross_entropy(model(ids[:, :-1]).transpose(1, 2), ids[:, 1:])
            opt.zero_grad()
            loss.backward()
            if config.grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            opt.step()
            losses.append(loss.item())
            if callback is not None and _due(step, config):
                callback(step + 1, model)
                model.train()
        return losses

    _refused(loop, "batches")
