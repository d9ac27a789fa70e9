"""Lesson 02a_attention's exercises (make_causal_mask, qkv_projection): the notebook's solutions
pass, other right versions pass, and wrong code written the way learners write it gets the
intended hint."""

import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import course_lib.attention
from course_lib.attention import causal_mask
from course_lib.checks import check_causal_mask, check_qkv_projection
from course_lib.exercises import lesson02a_attention as lesson
from course_lib.exercises.core import NO_GRADIENT, run
from helpers import failed_with_hint

LESSON = Path(__file__).resolve().parent.parent / "notebooks" / "02a_attention.ipynb"
MASK, PROJECTION = lesson.CAUSAL_MASK, lesson.QKV_PROJECTION


def test_the_mask_cases_cover_the_contract():
    assert {c.args[0] for c in MASK.case_list()} >= {1, 2, 5}


def test_slicing_the_lessons_mask_fails_on_a_line_longer_than_the_lessons():
    """The lesson's `mask` (12 by 12) cut to T is right up to T = 12: a case of T = 20 refuses
    it, with a hint that names the slice."""
    result = run(MASK, lambda T: lessons_mask[:T, :T])
    assert not result.passed and result.bug == "lesson_mask_cut", result.message
    assert "stays 12 by 12" in result.message and "longer than the lesson's" in result.message
    assert "Build the (T, T) pattern from T" in result.steps[0]
    assert any(case.args[0] > 12 for case in MASK.case_list())


# ---------------------------------------------------------------- make_causal_mask


@pytest.mark.parametrize(
    "fn",
    [
        lambda T: torch.tensor([[s <= t for s in range(T)] for t in range(T)]),
        lambda T: torch.tril(torch.ones(T, T)).bool(),
        lambda T: torch.arange(T)[:, None] >= torch.arange(T),
    ],
)
def test_right_masks_pass(fn):
    assert run(MASK, fn).passed


lessons_mask = torch.ones(12, 12, dtype=torch.bool).tril()  # the lesson's `mask`, a global


@pytest.mark.parametrize(
    "fn, bug",
    [
        (lambda T: torch.tensor([[s >= t for s in range(T)] for t in range(T)]), "transposed"),
        (lambda T: torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1), "inverted"),
        (lambda T: torch.tensor([[s > t for s in range(T)] for t in range(T)]), "inverted"),
        (lambda T: torch.ones(T, T, dtype=torch.bool).tril(diagonal=-1), "no_diagonal"),
        (lambda T: torch.tril(torch.ones(T, T)), "not_bool"),
        (lambda T: torch.tril(torch.ones(T, T, dtype=torch.int64)), "not_bool"),
        (lambda T: lessons_mask, "lesson_size"),
        (lambda T: lessons_mask[:T, :T], "lesson_mask_cut"),
    ],
)
def test_mask_mistakes_get_their_own_hint(fn, bug):
    failed_with_hint(MASK, fn, bug)


def returns_the_courses_mask(T):  # causal_mask, as the lesson's first cell imports it
    return causal_mask(T)


def returns_the_courses_mask_by_module(T):
    return course_lib.attention.causal_mask(T).clone()


def the_courses_mask_as_bool(T):
    return course_lib.attention.causal_mask(T, device="cpu").bool()


@pytest.mark.parametrize(
    "fn", [returns_the_courses_mask, returns_the_courses_mask_by_module, the_courses_mask_as_bool]
)
def test_calling_the_courses_causal_mask_fails_with_the_build_it_yourself_hint(fn):
    result = run(MASK, fn)
    assert not result.passed and result.bug == "forbidden", result.message
    assert "your function calls course_lib.attention.causal_mask" in result.message
    assert result.steps == (MASK.forbidden_hint, f"See {MASK.idea}.")
    assert "build" in MASK.forbidden_hint and "course_lib.attention.causal_mask(" not in (
        MASK.forbidden_hint
    )
    assert course_lib.attention.causal_mask is causal_mask and sys.getprofile() is None


def test_a_numpy_mask_is_told_to_be_a_tensor():
    result = run(MASK, lambda T: np.tril(np.ones((T, T), dtype=bool)))
    assert "expected a torch.Tensor" in result.message


# ---------------------------------------------------------------- qkv_projection


def test_the_projection_cases_cover_the_contract():
    cases = PROJECTION.case_list()
    widths = {(c.args[1].shape[0] - 2 * c.args[2], c.args[2]) for c in cases}  # (d_v, d_k)
    assert any(dv < dk for dv, dk in widths) and any(dv > dk for dv, dk in widths)
    assert any(dv == dk for dv, dk in widths)
    assert {c.args[0].dim() for c in cases} >= {2, 3, 4}
    assert any(c.args[1].shape[0] == c.args[1].shape[1] for c in cases)  # square w_qkv
    assert any(c.args[0].dtype == torch.float64 for c in cases)


def projection_by_three_linears(x, w_qkv, d_k):
    w_q, w_k, w_v = w_qkv[:d_k], w_qkv[d_k : 2 * d_k], w_qkv[2 * d_k :]  # rows of each
    return F.linear(x, w_q), F.linear(x, w_k), F.linear(x, w_v)


def projection_by_einsum(x, w_qkv, d_k):
    y = torch.einsum("...td,od->...to", x, w_qkv)
    return list(torch.split(y, [d_k, d_k, y.shape[-1] - 2 * d_k], dim=-1))


def projection_with_mT(x, w_qkv, d_k):
    out = torch.matmul(x, w_qkv.mT)
    q, k, v = out[..., :d_k], out[..., d_k : 2 * d_k], out[..., 2 * d_k :]
    return q, k, v


@pytest.mark.parametrize(
    "fn", [projection_by_three_linears, projection_by_einsum, projection_with_mT]
)
def test_other_right_projections_pass(fn):
    result = run(PROJECTION, fn)
    assert result.passed, result.message


def projection_in_thirds(x, w_qkv, d_k):
    q, k, v = torch.chunk(x @ w_qkv.T, 3, dim=-1)
    return q, k, v


def projection_in_thirds_by_rows(x, w_qkv, d_k):
    size = w_qkv.shape[0] // 3
    q = x @ w_qkv[:size].T
    k = x @ w_qkv[size : 2 * size].T
    v = x @ w_qkv[2 * size :].T
    return q, k, v


def projection_with_v_of_width_d_k(x, w_qkv, d_k):
    y = x @ w_qkv.T
    return y[..., 0:d_k], y[..., d_k : 2 * d_k], y[..., 2 * d_k : 3 * d_k]


def projection_without_turning_w(x, w_qkv, d_k):
    y = torch.matmul(x, w_qkv)
    return y[..., :d_k], y[..., d_k : 2 * d_k], y[..., 2 * d_k :]


def projection_split_on_axis_1(x, w_qkv, d_k):
    d_v = w_qkv.size(0) - 2 * d_k
    q, k, v = torch.split(x @ w_qkv.t(), [d_k, d_k, d_v], 1)
    return q, k, v


def projection_keys_first(x, w_qkv, d_k):
    y = x @ w_qkv.T
    return y[..., d_k : 2 * d_k], y[..., :d_k], y[..., 2 * d_k :]


@pytest.mark.parametrize(
    "fn, bug, words",
    [
        (projection_in_thirds, "equal_thirds", "three equal parts"),
        (projection_in_thirds_by_rows, "equal_thirds", "three equal parts"),
        (projection_with_v_of_width_d_k, "v_as_wide_as_k", "cut d_k wide"),
        (projection_without_turning_w, "weight_as_given", "not turned around"),
        (projection_split_on_axis_1, "split_along_positions", "once a batch axis"),
        (projection_keys_first, "keys_first", "q holds the keys"),
    ],
)
def test_projection_mistakes_get_their_own_hint(fn, bug, words):
    failed_with_hint(PROJECTION, fn, bug, [words])


def test_a_projection_cut_off_from_autograd_is_told_so():
    def under_no_grad(x, w_qkv, d_k):
        with torch.no_grad():
            return qkv_projection_right(x, w_qkv, d_k)

    result = run(PROJECTION, under_no_grad)
    assert result.bug == "no gradient" and result.steps[0] == NO_GRADIENT[1]


def qkv_projection_right(x, w_qkv, d_k):
    y = x @ w_qkv.T
    return y[..., :d_k], y[..., d_k : 2 * d_k], y[..., 2 * d_k :]


def test_a_float32_weight_on_float64_input_is_told_its_dtype():
    def casts_to_float32(x, w_qkv, d_k):
        return qkv_projection_right(x.float(), w_qkv.float(), d_k)

    result = run(PROJECTION, casts_to_float32)
    assert "float64 inputs" in result.message and "expected dtype torch.float64" in result.message
