"""Lesson 02b_attention_in_batches's exercises (attention, padding_mask): the notebook's
solutions pass, other right versions pass, and wrong code written the way learners write it
gets the intended hint."""

import math
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.nn.functional import scaled_dot_product_attention as fused_attention

import course_lib.attention
from course_lib.attention import attend, scaled_dot_product_attention
from course_lib.checks import check_attention, check_padding_mask
from course_lib.exercises import lesson02b_attention_in_batches as lesson
from course_lib.exercises.core import DTYPE_HINT, run
from helpers import failed_with_hint

LESSON = Path(__file__).resolve().parent.parent / "notebooks" / "02b_attention_in_batches.ipynb"
ATTENTION, PADDING = lesson.ATTENTION, lesson.PADDING_MASK
d_k = 2  # as in lesson 02a: a learner's function may read it by mistake


def test_the_cases_cover_the_contract():
    """Every promise of the exercise's text is tried by at least one case."""
    cases = ATTENTION.case_list()
    ranks = {case.args[0].dim() for case in cases}
    assert {2, 3, 4} <= ranks
    assert any(c.args[0].shape[:-2] != c.args[1].shape[:-2] for c in cases)  # broadcast batch
    assert any(c.args[0].shape[-2] != c.args[1].shape[-2] for c in cases)  # T_q != T_k
    assert any(c.args[1].shape[-1] != c.args[2].shape[-1] for c in cases)  # d_v != d_k
    assert any(c.args[0].dtype == torch.float64 for c in cases)
    masks = [c.kwargs["mask"] for c in cases if "mask" in c.kwargs]
    assert any(m.dim() == 2 for m in masks) and any(m.dim() > 2 for m in masks)
    assert any(m.shape[-2] == 1 for m in masks)  # broadcast over the queries too
    assert any("mask" not in c.kwargs for c in cases)  # mask left out: its default None


# ---------------------------------------------------------------- attention: right variants


def by_einsum(q, k, v, mask=None):
    scores = torch.einsum("...qd,...kd->...qk", q, k) / q.size(-1) ** 0.5
    if mask is not None:
        scores = torch.where(mask, scores, torch.tensor(float("-inf"), dtype=scores.dtype))
    weights = scores.softmax(-1)
    return torch.einsum("...qk,...kd->...qd", weights, v), weights


def large_negative_fill(q, k, v, mask=None):
    scores = q @ k.mT / math.sqrt(k.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def scale_q_first(q, k, v, mask=None):
    q = q / math.sqrt(q.shape[-1])  # a new tensor: the caller's q is untouched
    scores = q @ k.transpose(-1, -2)
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


@pytest.mark.parametrize("fn", [by_einsum, large_negative_fill, scale_q_first])
def test_other_right_versions_pass(fn):
    result = run(ATTENTION, fn)
    assert result.passed, result.message


# ------------------------------------------------------- attention, as learners get it wrong


def learner(
    softmax_dim=-1,
    transpose=(-2, -1),
    divide_by=lambda q: math.sqrt(q.shape[-1]),
    scale_after=False,
    fill=float("-inf"),
    mask_mode="fill",
):
    def attention(q, k, v, mask=None):
        scores = q @ k.transpose(*transpose)
        if not scale_after:
            scores = scores / divide_by(q)
        if mask is not None:
            if mask_mode == "fill":
                scores = scores.masked_fill(~mask, fill)
            elif mask_mode == "forgot to keep":
                scores.masked_fill(~mask, fill)  # returns a new tensor, dropped here
            elif mask_mode == "fill where True":
                scores = scores.masked_fill(mask, fill)
            elif mask_mode == "multiply":
                scores = scores * mask
        weights = torch.softmax(scores, dim=softmax_dim)
        if mask is not None and mask_mode == "zero weights":
            weights = weights * mask
        if scale_after:
            weights = weights / divide_by(q)
        return weights @ v, weights

    return attention


def uses_the_lessons_d_k(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # d_k = 2, from outside the function
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def own_softmax(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    e = torch.exp(scores)
    weights = e / e.sum(dim=-1, keepdim=True)
    return weights @ v, weights


def scaled_by_the_value_width(q, k, v, mask=None):
    width = v.shape[-1]  # the width of what comes out
    scores = q @ k.transpose(-2, -1) / width**0.5
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


def k_dot_T(q, k, v, mask=None):  # .T reverses every axis of a batched k, not the last two
    with warnings.catch_warnings():  # torch warns that .T on 3-D tensors is deprecated
        warnings.simplefilter("ignore", UserWarning)
        scores = q @ k.T / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def k_dot_T_in_matmul(q, k, v, mask=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        weights = torch.softmax(torch.matmul(q, k.T) / q.size(-1) ** 0.5, -1)
    return torch.matmul(weights, v), weights


def weights_first(q, k, v, mask=None):
    out, weights = learner()(q, k, v, mask)
    return weights, out


@pytest.mark.parametrize(
    "fn, bug, words",
    [
        (learner(softmax_dim=1), "softmax_over_queries", "a batch of 2 sentences"),
        (learner(softmax_dim=2), "softmax_over_queries", "4-D"),  # right on 3-D only
        (learner(softmax_dim=-2), "softmax_over_queries", "down each column"),
        (learner(transpose=(1, 2)), "transpose_1_2", "right on 3-D inputs, wrong on 4-D"),
        (learner(divide_by=lambda q: 1), "no_scale", "not scaled"),
        (learner(divide_by=lambda q: q.shape[-1]), "scale_by_d_k", "shrunk too much"),
        (learner(scale_after=True), "scale_after_softmax", "1/sqrt(d_k)"),
        (learner(divide_by=lambda q: math.sqrt(q.shape[1])), "scale_by_length", "number of"),
        (learner(divide_by=lambda q: math.sqrt(q.shape[2])), "scale_by_length", "T != d"),
        (uses_the_lessons_d_k, "scale_fixed_at_2", "1/sqrt(2) whatever the width"),
        (scaled_by_the_value_width, "scale_by_d_v", "right when d_v = d_k"),
        (k_dot_T, "dot_T_on_a_batch", "`.T` reversed every axis of a batched k"),
        (k_dot_T_in_matmul, "dot_T_on_a_batch", "`.T` reversed every axis of a batched k"),
        (learner(mask_mode="forgot to keep"), "mask_ignored", "blocked keys still get weight"),
        (learner(mask_mode="fill where True"), "inverted_mask", "NaN"),
        (learner(fill=0.0), "fill_zero", "their weights are not 0"),
        (learner(mask_mode="multiply"), "fill_zero", "their weights are not 0"),
        (learner(mask_mode="zero weights"), "mask_after_softmax", "no longer sum to 1"),
        (own_softmax, "unstable_softmax", "large scores"),
        (weights_first, "swapped_results", "weights first"),
    ],
)
def test_learner_mistakes_get_their_own_hint(fn, bug, words):
    result = failed_with_hint(ATTENTION, fn, bug, [words])
    cause = next(b.cause for b in ATTENTION.bugs if b.name == bug)
    assert result.steps == (cause, f"See {ATTENTION.idea}.")


# ------------------------------------ attention, by wrapping what the lesson imported or called


def wraps_the_courses_attention(q, k, v, mask=None):  # imported by the lesson's first cell
    return scaled_dot_product_attention(q, k, v, mask)


def wraps_it_through_the_module(q, k, v, mask=None):
    output, weights = course_lib.attention.scaled_dot_product_attention(q, k, v, mask=mask)
    return output, weights


def wraps_attend(q, k, v, mask=None):  # the function the course's attention calls
    return attend(q, k, v, mask, 1 / math.sqrt(q.shape[-1]))


def fused_output_and_own_weights(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), weights


def fused_imported_by_name(q, k, v, mask=None):  # the learner's weights, torch's output
    return fused_attention(q, k, v, attn_mask=mask), learner()(q, k, v, mask)[1]


@pytest.mark.parametrize(
    "fn, called",
    [
        (wraps_the_courses_attention, "course_lib.attention.scaled_dot_product_attention"),
        (wraps_it_through_the_module, "course_lib.attention.scaled_dot_product_attention"),
        (wraps_attend, "course_lib.attention.attend"),
        (fused_output_and_own_weights, "torch.nn.functional.scaled_dot_product_attention"),
        (fused_imported_by_name, "torch.nn.functional.scaled_dot_product_attention"),
    ],
)
def test_wrapping_the_courses_or_torchs_attention_fails_with_the_write_it_yourself_hint(fn, called):
    result = run(ATTENTION, fn)
    assert not result.passed and result.bug == "forbidden", result.message
    assert f"your function calls {called}" in result.message
    assert result.steps == (ATTENTION.forbidden_hint, f"See {ATTENTION.idea}.")
    # the watch is gone afterwards: the course's attention and torch's are themselves again
    assert course_lib.attention.scaled_dot_product_attention is scaled_dot_product_attention
    assert F.scaled_dot_product_attention.__name__ == "scaled_dot_product_attention"
    assert sys.getprofile() is None and run(ATTENTION, learner()).passed


def test_the_hints_name_the_real_cause():
    causes = {b.name: b.cause for b in ATTENTION.bugs}
    assert "blocks the allowed keys" in causes["inverted_mask"]
    assert "axes 1 and 2" in causes["transpose_1_2"]
    assert "e^0 = 1" in causes["fill_zero"]
    assert "without keeping its result" in causes["mask_ignored"]
    assert "width d_k" in causes["scale_by_d_v"] and "v never enters" in causes["scale_by_d_v"]
    assert "(d_k, T_k, B)" in causes["dot_T_on_a_batch"]
    for text in [*causes.values(), *ATTENTION.hints]:
        assert "transpose(-2" not in text and "masked_fill(~" not in text and "dim=-1" not in text


@pytest.mark.parametrize("copy", ["notebooks", "learner"])
def test_the_attention_contract_says_the_scale_is_sqrt_d_k(copy):
    """What the learner reads before writing attention: the scores are divided by sqrt(d_k),
    the width of queries and keys, never of the values (the scale_by_d_v hint rests on it)."""
    import nbformat

    notebook = LESSON.parent.parent / copy / LESSON.name
    cells = nbformat.read(notebook, as_version=4).cells
    (contract,) = [c.source for c in cells if "### Exercise 1: attention" in c.source]
    assert "The scores are divided by $\\sqrt{d_k}$." in contract
    assert "sqrt{d_v}" not in contract
    assert "divided by sqrt(d_k)" in " ".join(lesson.__doc__.split())


def test_changing_an_input_in_place_is_caught():
    def scales_q_in_place(q, k, v, mask=None):
        q /= math.sqrt(q.shape[-1])
        weights = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
        return weights @ v, weights

    result = run(ATTENTION, scales_q_in_place)
    assert result.bug == "in place" and "argument `q`" in result.message

    def flips_the_mask_in_place(q, k, v, mask=None):
        if mask is not None:
            mask.logical_not_()  # now True where blocked
            return learner(mask_mode="fill where True")(q, k, v, mask)
        return learner()(q, k, v)

    result = run(ATTENTION, flips_the_mask_in_place)
    assert result.bug == "in place" and "argument `mask`" in result.message


def test_a_float64_result_from_float32_inputs_fails_on_its_dtype():
    def in_float64_for_precision(q, k, v, mask=None):
        q, k, v = q.double(), k.double(), v.double()
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        return weights @ v, weights

    result = run(ATTENTION, in_float64_for_precision)
    assert "expected dtype torch.float32, got torch.float64" in result.message
    assert "a batch of 2 sentences" in result.message
    assert result.steps[0] == DTYPE_HINT


def test_a_float64_mask_made_with_numpy_is_told_where_it_breaks():
    def additive_mask_from_numpy(q, k, v, mask=None):
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            scores = scores + torch.from_numpy(np.where(mask.numpy(), 0.0, -np.inf))
        weights = torch.softmax(scores, dim=-1)
        return weights @ v, weights  # float64 weights meet float32 values

    result = run(ATTENTION, additive_mask_from_numpy)
    assert "raised RuntimeError: expected scalar type Double" in result.message
    assert "one causal mask for the whole batch" in result.message


def test_float64_inputs_must_give_float64_results():
    def softmax_in_float32(q, k, v, mask=None):
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1, dtype=torch.float32)
        return weights.to(v.dtype) @ v, weights

    result = run(ATTENTION, softmax_in_float32)
    assert "float64 q, k, v" in result.message
    assert "expected dtype torch.float64, got torch.float32" in result.message


def batched_matmul_only(q, k, v, mask=None):  # bmm takes exactly 3-D tensors
    weights = (torch.bmm(q, k.transpose(1, 2)) / math.sqrt(q.shape[2])).softmax(dim=2)
    return torch.bmm(weights, v), weights


def test_code_that_only_works_on_some_ranks_is_told_which_case():
    fn, error, case = batched_matmul_only, "raised RuntimeError", "4-D"
    result = run(ATTENTION, fn)
    assert error in result.message and case in result.message
    assert any("count" in step.lower() and "from the end" in step for step in result.steps)


def test_indexing_with_a_smaller_mask_is_told_to_broadcast():
    def boolean_index(q, k, v, mask=None):
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            scores[~mask] = float("-inf")
        weights = torch.softmax(scores, dim=-1)
        return weights @ v, weights

    result = run(ATTENTION, boolean_index)
    assert "raised IndexError" in result.message
    assert "one causal mask for the whole batch" in result.message
    assert any("broadcast" in step for step in result.steps)


def test_a_mask_without_a_default_fails_on_the_unmasked_case():
    def mask_required(q, k, v, mask):
        return learner()(q, k, v, mask)

    result = run(ATTENTION, mask_required)
    assert "raised TypeError" in result.message and "mask" in result.message


def test_returning_only_the_output_is_told_the_form():
    result = run(ATTENTION, lambda q, k, v, mask=None: learner()(q, k, v, mask)[0])
    assert "expected a tuple of 2 results" in result.message


# ---------------------------------------------------------------- padding_mask


@pytest.mark.slow  # torch's MultiheadAttention takes about 1 s on its first call
def test_the_padding_mask_reference_matches_torchs_key_padding_convention():
    """Independent check: nn.MultiheadAttention given ~mask as key_padding_mask attends as our
    attention does with the mask (torch: True = blocked there; ours: True = may attend)."""
    lengths, T, D = torch.tensor([3, 5, 2]), 5, 8
    mask = lesson.padding_mask_reference(lengths, T)  # (B, 1, T)
    layer = torch.nn.MultiheadAttention(D, 1, bias=False, batch_first=True)
    x = torch.randn(3, T, D)
    with torch.no_grad():
        theirs, their_weights = layer(x, x, x, key_padding_mask=~mask[:, 0])
        w_q, w_k, w_v = layer.in_proj_weight.chunk(3)
        ours, weights = lesson.attention_reference(x @ w_q.T, x @ w_k.T, x @ w_v.T, mask)
        ours = ours @ layer.out_proj.weight.T
    torch.testing.assert_close(weights, their_weights)
    torch.testing.assert_close(ours, theirs)


def test_the_padding_cases_cover_the_contract():
    cases = PADDING.case_list()
    assert any(int(c.args[0].max()) < c.args[1] for c in cases)  # padded past the longest
    assert any(bool((c.args[0] == c.args[1]).all()) for c in cases)  # no padding at all
    assert any(len(c.args[0]) == c.args[1] for c in cases)  # B = T


def mask_by_loop(lengths, T):
    rows = [[s < n for s in range(T)] for n in lengths.tolist()]
    return torch.tensor(rows).unsqueeze(1)


def mask_by_comparison(lengths, T):
    return (torch.arange(T)[None, :] < lengths[:, None]).unsqueeze(-2)


def mask_by_sequence_mask(lengths, T):
    return torch.arange(T).expand(len(lengths), 1, T) < lengths.view(-1, 1, 1)


@pytest.mark.parametrize("fn", [mask_by_loop, mask_by_comparison, mask_by_sequence_mask])
def test_right_padding_masks_pass(fn):
    result = run(PADDING, fn)
    assert result.passed, result.message


def torch_style_mask(lengths, T):
    return (torch.arange(T) >= lengths[:, None])[:, None, :]  # True at the pads


def mask_one_too_far(lengths, T):
    return (torch.arange(T) <= lengths[:, None])[:, None, :]


def mask_without_query_axis(lengths, T):
    return torch.arange(T) < lengths[:, None]


def mask_over_queries(lengths, T):
    return (torch.arange(T) < lengths[:, None]).unsqueeze(-1)


def mask_to_the_longest(lengths, T):
    longest = int(lengths.max())
    return (torch.arange(longest) < lengths[:, None])[:, None, :]


def mask_of_ones_and_zeros(lengths, T):
    return (torch.arange(T) < lengths[:, None]).float()[:, None, :]


@pytest.mark.parametrize(
    "fn, bug, words",
    [
        (torch_style_mask, "torch_convention", "True at the pads"),
        (mask_one_too_far, "one_pad_too_many", "first pad"),
        (mask_without_query_axis, "no_query_axis", "no axis for the queries"),
        (mask_over_queries, "blocks_queries", "whole rows"),
        (mask_to_the_longest, "stops_at_the_longest", "not at T keys"),
        (mask_of_ones_and_zeros, "not_bool", "not a bool tensor"),
    ],
)
def test_padding_mask_mistakes_get_their_own_hint(fn, bug, words):
    failed_with_hint(PADDING, fn, bug, [words])


def test_the_padding_hint_names_torchs_opposite_convention():
    causes = {b.name: b.cause for b in PADDING.bugs}
    assert "key_padding_mask" in causes["torch_convention"]
    assert "F.scaled_dot_product_attention" in causes["torch_convention"]
