"""Lesson 01b_loss_and_floor's exercise: learner-style mistakes get the hint that names them.

Every wrong function here is written the way a learner would write it (loops, hand-made
log-softmaxes, shifts by slicing), not taken from the bug list in
course_lib/exercises/lesson01b_loss_and_floor.py. Each asserts the hint of its own mistake.
"""

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from course_lib.checks import check_next_token_cross_entropy
from course_lib.exercises import by_name
from course_lib.exercises.core import DTYPE_HINT, run
from course_lib.exercises.lesson01b_loss_and_floor import EXERCISES, NEXT_TOKEN_CROSS_ENTROPY
from helpers import failed_with_hint as _check
from helpers import failed_without_gradient

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "01b_loss_and_floor.ipynb"


# ---------------------------------------------------------------- every exercise


def test_the_name_is_the_courses_own_and_collides_with_no_other_lesson():
    # the retired lesson 06 had next_token_loss and train_step: this name is new
    assert [e.name for e in EXERCISES] == ["next_token_cross_entropy"]
    assert by_name("next_token_cross_entropy").lesson == "01b_loss_and_floor"


def test_the_reference_is_torchs_own_loss():
    # against a formulation that shares nothing with it: a loop over predictions
    g = torch.Generator().manual_seed(5)
    logits = torch.randn(2, 5, 11, generator=g, dtype=torch.float64)
    ids = torch.randint(11, (2, 5), generator=g)
    each = [
        -math.log(torch.softmax(logits[b, t], -1)[ids[b, t + 1]].item())
        for b in range(2) for t in range(4)
    ]  # fmt: skip
    loss = NEXT_TOKEN_CROSS_ENTROPY.reference(logits, ids)
    assert loss.item() == pytest.approx(sum(each) / len(each), rel=1e-12)


def test_torchs_own_loss_is_refused_by_every_route():
    """The fresh read passed the exercise with the torch one-liner the lesson names
    (F.cross_entropy): the check now refuses it, the modules that call it, and the course's
    own per-token losses, which the lesson imports."""
    import json

    from course_lib import train

    text = "".join(
        "".join(c["source"]) for c in json.loads(NOTEBOOK.read_text())["cells"]
        if c["cell_type"] == "markdown"
    )  # fmt: skip
    assert text.count("the check refuses") == 1

    def as_module(logits, ids):
        return torch.nn.CrossEntropyLoss()(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten())

    def nll(logits, ids):
        logp = F.log_softmax(logits[:, :-1], dim=-1).flatten(0, 1)
        return F.nll_loss(logp, ids[:, 1:].flatten())

    class Model(torch.nn.Module):  # hands the logits to train.token_losses as a "model"
        def __init__(self, logits):
            super().__init__()
            self.logits = logits

        def forward(self, ids):
            return self.logits[:, : ids.shape[1]]

    def the_courses(logits, ids):
        return train.token_losses(Model(logits), ids).mean()

    routes = [
        (as_module, "torch.nn.functional.cross_entropy"),
        (nll, "torch.nn.functional.nll_loss"),
        (the_courses, "torch.nn.functional.cross_entropy"),
    ]
    for fn, name in routes:
        result = run(NEXT_TOKEN_CROSS_ENTROPY, fn)
        assert not result.passed and result.bug == "forbidden", result.message
        assert f"calls {name}," in result.message, result.message
        assert result.steps[0] == NEXT_TOKEN_CROSS_ENTROPY.forbidden_hint


# ---------------------------------------------------------------- next_token_cross_entropy


def _log_softmax(x):
    shifted = x - x.max(dim=-1, keepdim=True).values  # lesson 00's shift
    return shifted - shifted.exp().sum(dim=-1, keepdim=True).log()


def test_loss_from_a_hand_made_log_softmax_passes():
    def next_token_cross_entropy(logits, ids):
        logp = _log_softmax(logits[:, :-1])  # (B, T-1, V)
        right = logp.gather(-1, ids[:, 1:, None])  # (B, T-1, 1)
        return -right.mean()

    assert run(NEXT_TOKEN_CROSS_ENTROPY, next_token_cross_entropy).passed


def test_loss_by_a_loop_over_the_batch_passes():
    def next_token_cross_entropy(logits, ids):
        B, T, V = logits.shape
        total = 0
        for b in range(B):
            logp = torch.log_softmax(logits[b, :-1], dim=-1)  # (T-1, V)
            total = total - logp[torch.arange(T - 1), ids[b, 1:]].sum()
        return total / (B * (T - 1))

    assert run(NEXT_TOKEN_CROSS_ENTROPY, next_token_cross_entropy).passed


def test_loss_without_the_shift_is_named():
    def next_token_cross_entropy(logits, ids):
        logp = torch.log_softmax(logits, dim=-1)
        return -logp.gather(2, ids.unsqueeze(2)).mean()

    _check(NEXT_TOKEN_CROSS_ENTROPY, next_token_cross_entropy, "not_shifted", ["same position"])


def test_loss_that_trims_the_logits_but_not_the_targets_is_named():
    def next_token_cross_entropy(logits, ids):
        logp = torch.log_softmax(logits[:, :-1], dim=-1)
        return -logp.gather(2, ids[:, :-1].unsqueeze(2)).mean()

    _check(NEXT_TOKEN_CROSS_ENTROPY, next_token_cross_entropy, "targets_not_shifted")


def test_loss_with_the_shift_reversed_is_named():
    def next_token_cross_entropy(logits, ids):
        predictions, targets = logits[:, 1:], ids[:, :-1]
        logp = torch.log_softmax(predictions, dim=-1)
        return -logp.gather(-1, targets[..., None]).squeeze(-1).mean()

    _check(NEXT_TOKEN_CROSS_ENTROPY, next_token_cross_entropy, "shifted_backwards", ["t - 1"])


def test_loss_that_keeps_the_last_positions_logits_is_named():
    def next_token_cross_entropy(logits, ids):
        logp = torch.log_softmax(logits, dim=-1)[:, 1:]
        return -logp.gather(-1, ids[:, 1:, None]).mean()

    _check(NEXT_TOKEN_CROSS_ENTROPY, next_token_cross_entropy, "kept_wrong_end")


def test_loss_summed_over_the_positions_is_named():
    def next_token_cross_entropy(logits, ids):
        logp = torch.log_softmax(logits[:, :-1], dim=-1)
        nll = -logp.gather(-1, ids[:, 1:, None]).squeeze(-1)  # (B, T-1)
        return nll.sum(dim=1).mean()  # per sequence, then over the batch

    _check(NEXT_TOKEN_CROSS_ENTROPY, next_token_cross_entropy, "summed_over_T", ["T - 1 times"])


def test_loss_summed_over_everything_is_named():
    def next_token_cross_entropy(logits, ids):
        logp = torch.log_softmax(logits[:, :-1], dim=-1)
        return -logp.gather(-1, ids[:, 1:, None]).sum()

    _check(NEXT_TOKEN_CROSS_ENTROPY, next_token_cross_entropy, "summed", ["a sum"])


def test_loss_with_the_softmax_over_the_positions_is_named():
    def next_token_cross_entropy(logits, ids):
        logp = torch.log_softmax(logits[:, :-1], dim=1)  # the class axis, as F.cross_entropy has it
        return -logp.gather(-1, ids[:, 1:, None]).mean()

    _check(NEXT_TOKEN_CROSS_ENTROPY, next_token_cross_entropy, "positions_axis", ["positions"])


def test_loss_as_the_log_of_lesson_00s_softmax_is_named_where_it_underflows():
    def softmax(x):  # lesson 00's exercise, right as it stands
        e = (x - x.max(dim=-1, keepdim=True).values).exp()
        return e / e.sum(dim=-1, keepdim=True)

    def next_token_cross_entropy(logits, ids):
        p = softmax(logits[:, :-1]).gather(-1, ids[:, 1:, None])
        return -torch.log(p).mean()

    result = _check(NEXT_TOKEN_CROSS_ENTROPY, next_token_cross_entropy, "log_of_softmax")
    assert "your loss is inf" in result.message and "underflows" in result.steps[0]


def test_loss_without_the_minus_sign_is_named():
    def next_token_cross_entropy(logits, ids):
        logp = torch.log_softmax(logits[:, :-1], dim=-1)
        return logp.gather(-1, ids[:, 1:, None]).mean()

    _check(NEXT_TOKEN_CROSS_ENTROPY, next_token_cross_entropy, "sign", ["negative"])


def test_loss_returned_as_a_python_number_is_named():
    def next_token_cross_entropy(logits, ids):
        logp = torch.log_softmax(logits[:, :-1], dim=-1)
        return -logp.gather(-1, ids[:, 1:, None]).mean().item()

    _check(NEXT_TOKEN_CROSS_ENTROPY, next_token_cross_entropy, "python_number")


def test_loss_under_no_grad_says_so_before_training_does():
    def next_token_cross_entropy(logits, ids):
        with torch.no_grad():
            logp = torch.log_softmax(logits[:, :-1], dim=-1)
            return -logp.gather(-1, ids[:, 1:, None]).mean()

    failed_without_gradient(NEXT_TOKEN_CROSS_ENTROPY, next_token_cross_entropy)


def test_loss_in_float32_only_is_told_about_the_dtype():
    def next_token_cross_entropy(logits, ids):
        logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
        return -logp.gather(-1, ids[:, 1:, None]).mean()

    result = _check(NEXT_TOKEN_CROSS_ENTROPY, next_token_cross_entropy, None, ["float64"])
    assert result.steps[0] == DTYPE_HINT


def test_loss_that_takes_the_largest_logit_away_twice_is_named():
    """The lesson once said torch.logsumexp computes the formula's last term; it computes the
    last two (m + log sum exp(s - m)), and a learner who took the sentence literally subtracted
    m twice."""

    def next_token_cross_entropy(logits, ids):
        s = logits[:, :-1]
        m = s.max(dim=-1, keepdim=True).values
        logp = s - m - torch.logsumexp(s, dim=-1, keepdim=True)
        return -logp.gather(-1, ids[:, 1:, None]).mean()

    result = _check(NEXT_TOKEN_CROSS_ENTROPY, next_token_cross_entropy, "max_twice", ["largest"])
    assert "log softmax(s) = s - logsumexp(s)" in result.steps[0]
    assert "subtract the largest score m twice" in result.steps[0]


def test_loss_from_the_shifted_scores_logsumexp_passes():
    def next_token_cross_entropy(logits, ids):
        s = logits[:, :-1]
        shifted = s - s.max(dim=-1, keepdim=True).values
        logp = shifted - torch.logsumexp(shifted, dim=-1, keepdim=True)  # the shift cancels
        return -logp.gather(-1, ids[:, 1:, None]).mean()

    assert run(NEXT_TOKEN_CROSS_ENTROPY, next_token_cross_entropy).passed


def test_the_log_of_softmax_hint_says_what_logsumexp_computes():
    (bug,) = [b for b in NEXT_TOKEN_CROSS_ENTROPY.bugs if b.name == "log_of_softmax"]
    assert "torch.logsumexp(s) computes m + log(sum_j exp(s_j - m))" in bug.cause
    assert "log softmax(s) = s - logsumexp(s)" in bug.cause
