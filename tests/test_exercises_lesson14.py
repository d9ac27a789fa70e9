"""Lesson 14's exercises: learner-style mistakes get their hint.

Every wrong function here is written the way a learner would write it (x.pow(2).mean, norms
and rsqrt, the layers called in turn), not taken from the bug list in
course_lib/exercises/lesson14/.
"""

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_lib.checks import check_rms_norm, check_swiglu
from course_lib.exercises.core import run
from course_lib.exercises.lesson14 import (
    RMS_NORM,
    SWIGLU,
    rms_norm_reference,
    swiglu_reference,
)
from helpers import failed_with_hint as _check
from helpers import lesson_cells

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "14_todays_block.ipynb"


# ---------------------------------------------------------------- right answers, as written


def rms_norm(x, weight, eps=1e-5):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rms_norm_by_norm(x, weight, eps=1e-5):
    D = x.shape[-1]
    return weight * x / torch.sqrt(torch.linalg.vector_norm(x, dim=-1, keepdim=True) ** 2 / D + eps)


def swiglu(x, gate, up, down):
    return down(F.silu(gate(x)) * up(x))


def swiglu_by_hand(x, gate, up, down):
    g = gate(x)
    return down(g * torch.sigmoid(g) * up(x))


def test_the_right_answers_written_here_pass():
    for fn in (rms_norm, rms_norm_by_norm):
        assert run(RMS_NORM, fn).passed
    for fn in (swiglu, swiglu_by_hand):
        assert run(SWIGLU, fn).passed


def test_the_references_are_torchs_rmsnorm_and_an_independent_swiglu():
    for case in RMS_NORM.case_list():
        x, weight, *rest = case.args
        eps = case.kwargs.get("eps", rest[0] if rest else 1e-5)
        module = nn.RMSNorm(x.shape[-1], eps=eps, dtype=x.dtype)
        with torch.no_grad():
            module.weight.copy_(weight)
        expected = rms_norm_reference(*case.args, **case.kwargs)
        assert torch.allclose(module(x), expected, atol=1e-6), case.label
        assert torch.allclose(rms_norm(*case.args, **case.kwargs), expected, atol=1e-6)
    for case in SWIGLU.case_list():
        assert torch.allclose(swiglu(*case.args), swiglu_reference(*case.args), atol=1e-6)


def test_no_cell_above_an_exercise_shows_its_solution():
    """No worked RMSNorm or SwiGLU before the learner writes one: no code cell above an
    exercise calls torch's rms_norm / RMSNorm or silu, or the course's reference."""
    cells = lesson_cells(NOTEBOOK)
    for name, ready_made in (
        ("rms_norm", ("F.rms_norm", "torch.rms_norm", "RMSNorm(", "rms_norm_reference(")),
        ("swiglu", ("silu(", "SiLU(", "swiglu_reference(", 'ff="swiglu"')),
    ):
        at = next(
            i for i, c in enumerate(cells) if c.cell_type == "code" and f"def {name}(" in c.source
        )
        above = "\n".join(c.source for c in cells[:at] if c.cell_type == "code")
        assert not any(word in above for word in ready_made), name


# ---------------------------------------------------------------- rms_norm, learner-style


def test_rms_norm_that_subtracts_the_mean_first_is_named():
    def wrong(x, weight, eps=1e-5):
        centred = x - x.mean(dim=-1, keepdim=True)
        return centred / torch.sqrt(centred.pow(2).mean(-1, keepdim=True) + eps) * weight

    _check(RMS_NORM, wrong, "mean_subtracted")


def test_rms_norm_with_eps_added_after_the_root_is_named():
    def wrong(x, weight, eps=1e-5):
        rms = x.pow(2).mean(-1, keepdim=True).sqrt()
        return weight * x / (rms + eps)

    _check(RMS_NORM, wrong, "eps_outside")


def test_rms_norm_with_the_root_of_the_sum_is_named():
    def wrong(x, weight, eps=1e-5):
        return weight * x / torch.sqrt((x * x).sum(-1, keepdim=True) + eps)

    _check(RMS_NORM, wrong, "sqrt_of_sum")


def test_rms_norm_over_the_first_axis_is_named():
    def wrong(x, weight, eps=1e-5):
        return weight * x * torch.rsqrt(x.pow(2).mean(0, keepdim=True) + eps)

    _check(RMS_NORM, wrong, "first_axis")


def test_rms_norm_over_every_axis_is_named():
    def wrong(x, weight, eps=1e-5):
        return weight * x / torch.sqrt(torch.mean(x**2) + eps)

    _check(RMS_NORM, wrong, "every_axis")


def test_rms_norm_that_adds_the_weight_is_named():
    def wrong(x, weight, eps=1e-5):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) + weight

    _check(RMS_NORM, wrong, "weight_added")


def test_rms_norm_without_the_weight_is_named():
    def wrong(x, weight, eps=1e-5):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)

    _check(RMS_NORM, wrong, "no_weight")


def test_rms_norm_dividing_by_the_standard_deviation_is_named():
    def wrong(x, weight, eps=1e-5):
        return weight * x / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + eps)

    _check(RMS_NORM, wrong, "variance")


def test_rms_norm_with_a_fixed_eps_is_named():
    def wrong(x, weight, eps=1e-5):
        return weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)

    _check(RMS_NORM, wrong, "eps_ignored")


def test_rms_norm_that_forgets_the_root_is_named():
    def wrong(x, weight, eps=1e-5):
        return weight * x / (x.pow(2).mean(-1, keepdim=True) + eps)

    _check(RMS_NORM, wrong, "no_root")


# ---------------------------------------------------------------- swiglu, learner-style


def test_swiglu_with_gelu_is_named():
    def wrong(x, gate, up, down):
        return down(nn.GELU()(gate(x)) * up(x))

    _check(SWIGLU, wrong, "gelu")


def test_swiglu_with_a_plain_sigmoid_is_named():
    def wrong(x, gate, up, down):
        return down(torch.sigmoid(gate(x)) * up(x))

    _check(SWIGLU, wrong, "sigmoid")


def test_swiglu_with_gate_and_up_swapped_is_named():
    def wrong(x, gate, up, down):
        a, b = up(x), gate(x)
        return down(a * torch.sigmoid(a) * b)

    _check(SWIGLU, wrong, "swapped")


def test_swiglu_without_the_up_projection_is_named():
    def wrong(x, gate, up, down):
        return down(F.silu(gate(x)))

    _check(SWIGLU, wrong, "no_up")


def test_swiglu_without_the_gate_is_named():
    def wrong(x, gate, up, down):
        return down(F.silu(up(x)))

    _check(SWIGLU, wrong, "no_gate")


def test_swiglu_that_multiplies_before_the_activation_is_named():
    def wrong(x, gate, up, down):
        return down(F.silu(gate(x) * up(x)))

    _check(SWIGLU, wrong, "product_first")


def test_swiglu_with_silu_on_both_is_named():
    def wrong(x, gate, up, down):
        return down(F.silu(gate(x)) * F.silu(up(x)))

    _check(SWIGLU, wrong, "silu_both")


def test_swiglu_with_relu_is_named():
    def wrong(x, gate, up, down):
        return down(torch.relu(gate(x)) * up(x))

    _check(SWIGLU, wrong, "relu")


def test_swiglu_that_adds_the_residual_is_named():
    def wrong(x, gate, up, down):
        return x + down(F.silu(gate(x)) * up(x))

    _check(SWIGLU, wrong, "residual_inside")


def test_swiglu_that_adds_gate_and_up_is_named():
    def wrong(x, gate, up, down):
        return down(F.silu(gate(x)) + up(x))

    _check(SWIGLU, wrong, "added")


# ---------------------------------------------------------------- torch's own, called


def rms_norm_by_torch(x, weight, eps=1e-5):
    return F.rms_norm(x, x.shape[-1:], weight, eps)


def rms_norm_by_module(x, weight, eps=1e-5):
    norm = nn.RMSNorm(x.shape[-1], eps=eps, dtype=x.dtype)
    with torch.no_grad():
        norm.weight.copy_(weight)
    return norm(x)


@pytest.mark.parametrize("fn", [rms_norm_by_torch, rms_norm_by_module])
def test_calling_torchs_rms_norm_fails_with_the_write_it_yourself_hint(fn):
    result = run(RMS_NORM, fn)
    assert not result.passed and result.bug == "forbidden", result.message
    assert "rms_norm" in result.message and result.steps[0] == RMS_NORM.forbidden_hint
    assert F.rms_norm.__name__ == "rms_norm" and run(RMS_NORM, rms_norm).passed  # spy removed
