"""Lesson 04a's exercises: the references are torch's layer, and wrong code written the way a
learner would write it gets the hint meant for it."""

import dataclasses
import math
from pathlib import Path

import nbformat
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_lib import gqa
from course_lib import multihead as course_layers
from course_lib.checks import check_merge_heads, check_multihead, check_split_heads
from course_lib.exercises import lesson04a_multihead_layer
from course_lib.exercises.core import run
from course_lib.multihead import MultiHeadAttention, stacked_heads
from course_lib.mywork import collect
from helpers import stub

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
SPLIT, MERGE, MULTIHEAD = (
    lesson04a_multihead_layer.SPLIT_HEADS,
    lesson04a_multihead_layer.MERGE_HEADS,
    lesson04a_multihead_layer.MULTIHEAD,
)


def failed(exercise, fn):
    verdict = run(exercise, fn)
    assert not verdict.passed, verdict.message
    return verdict


# ---------------------------------------------------------------- the references


def test_multihead_reference_is_torch_multihead_attention_with_the_same_weights():
    """Every case without a rope: torch.nn.MultiheadAttention itself, one sequence at a time
    (so a per-sequence mask needs no conversion), gives the reference's numbers."""
    checked = 0
    for case in MULTIHEAD.case_list():
        x, qkv, out, H = case.args
        mask, rope = case.kwargs["mask"], case.kwargs["rope"]
        if rope is not None:
            continue
        B, T, D = x.shape
        layer = nn.MultiheadAttention(D, H, batch_first=True, dtype=x.dtype)
        with torch.no_grad():
            layer.in_proj_weight.copy_(qkv.weight)
            layer.in_proj_bias.copy_(qkv.bias)
            layer.out_proj.load_state_dict(out.state_dict())
            expected = MULTIHEAD.reference(x, qkv, out, H, mask=mask)
            for b in range(B):
                blocked = None if mask is None else ~mask.expand(B, 1, T, T)[b, 0]  # (T, T)
                theirs, _ = layer(x[b : b + 1], x[b : b + 1], x[b : b + 1], attn_mask=blocked)
                torch.testing.assert_close(expected[b : b + 1], theirs)
        assert expected.dtype == x.dtype
        checked += 1
    assert checked == 6


def test_multihead_reference_with_a_rope_is_the_course_layer():
    checked = 0
    for case in MULTIHEAD.case_list():
        x, qkv, out, H = case.args
        mask, rope = case.kwargs["mask"], case.kwargs["rope"]
        if rope is None:
            continue
        course = MultiHeadAttention(x.shape[-1], H, rope=rope)
        course.qkv.load_state_dict(qkv.state_dict())
        course.out.load_state_dict(out.state_dict())
        with torch.no_grad():
            torch.testing.assert_close(
                MULTIHEAD.reference(x, qkv, out, H, mask=mask, rope=rope), course(x, mask)
            )
        checked += 1
    assert checked == 2


def test_torch_mask_conversion():
    causal = torch.ones(4, 4, dtype=torch.bool).tril()
    assert torch.equal(lesson04a_multihead_layer.torch_attn_mask(causal, 2, 3, 4), ~causal)
    per_sequence = torch.stack([causal, torch.ones(4, 4, dtype=torch.bool)])[:, None]
    converted = lesson04a_multihead_layer.torch_attn_mask(per_sequence, 2, 3, 4)  # (B * H, T, T)
    assert converted.shape == (6, 4, 4)
    assert torch.equal(converted[2], ~causal) and not converted[3].any()


def test_every_case_labels_what_is_special_and_keeps_the_seed():
    torch.manual_seed(0)
    before = torch.rand(1)
    torch.manual_seed(0)
    for exercise in lesson04a_multihead_layer.EXERCISES:
        assert all(case.label for case in exercise.case_list())
    assert torch.equal(torch.rand(1), before)  # building the cases drew no global numbers


def test_no_cell_above_split_heads_hands_the_learner_the_courses_split():
    """The course's MultiHeadAttention (whose split_heads has the exercise's contract) is
    imported only below exercise 1; the picture of the layout is written out from the rule."""
    cells = nbformat.read(NOTEBOOKS / "04a_multihead_layer.ipynb", as_version=4).cells
    exercise = next(
        i for i, c in enumerate(cells)
        if c.metadata.get("nbgrader", {}).get("grade_id") == "split_heads-merge_heads"
    )  # fmt: skip
    above = [c.source for c in cells[:exercise] if c.cell_type == "code"]
    assert not any("MultiHeadAttention" in s or ".split_heads(" in s for s in above)
    assert "check_split_heads, hint" in above[0]


# ---------------------------------------------------------------- right answers pass


def split_with_chunks(x, num_heads):
    return torch.stack(x.chunk(num_heads, dim=-1), dim=1)  # (B, H, T, d)


def merge_with_cat(y):
    return torch.cat(y.unbind(dim=1), dim=-1)  # (B, T, H * d)


def multihead_with_chunks(x, qkv, out, num_heads, mask=None, rope=None):
    """Heads cut with chunk and glued with cat, attention written out with einsum."""
    q, k, v = qkv(x).chunk(3, dim=-1)
    q, k, v = (split_with_chunks(t, num_heads) for t in (q, k, v))
    if rope:
        q, k = rope(q), rope(k)
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), float("-inf"))
    return out(merge_with_cat(torch.softmax(scores, dim=-1) @ v))


def multihead_head_by_head(x, qkv, out, num_heads, mask=None, rope=None):
    """One head at a time, its slices cut by hand, then glued with torch.cat."""
    D = x.shape[-1]
    d = D // num_heads
    q, k, v = qkv(x).split(D, dim=-1)
    heads = []
    for h in range(num_heads):
        part = slice(h * d, (h + 1) * d)
        qh, kh, vh = (t[..., part].unsqueeze(1) for t in (q, k, v))  # (B, 1, T, d)
        if rope is not None:
            qh, kh = rope(qh), rope(kh)
        scores = qh @ kh.transpose(-2, -1) / math.sqrt(d)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        heads.append((scores.softmax(-1) @ vh).squeeze(1))  # (B, T, d)
    return out(torch.cat(heads, dim=-1))


@pytest.mark.parametrize(
    "exercise,fn",
    [
        (SPLIT, split_with_chunks),
        (SPLIT, lambda x, h: x.unflatten(-1, (h, -1)).permute(0, 2, 1, 3)),
        (MERGE, merge_with_cat),
        (MERGE, lambda y: y.permute(0, 2, 1, 3).flatten(2)),
        (MULTIHEAD, multihead_with_chunks),
        (MULTIHEAD, multihead_head_by_head),
    ],
)
def test_other_right_answers_pass(exercise, fn):
    assert run(exercise, fn).passed


# ---------------------------------------------------------------- split_heads: learner mistakes


def test_split_learner_mistakes_get_their_hints():
    def view_straight(x, num_heads):
        B, T, D = x.shape
        return x.view(B, num_heads, T, D // num_heads)

    def forgot_to_swap(x, num_heads):
        B, T, D = x.shape
        return x.view(B, T, num_heads, D // num_heads)

    def cut_the_wrong_way(x, num_heads):
        B, T, D = x.shape
        return x.view(B, T, -1, num_heads).permute(0, 3, 1, 2)

    def swap_then_cut(x, num_heads):
        B, T, D = x.shape
        return x.transpose(1, 2).reshape(B, num_heads, T, -1)

    def split_size_is_the_head_count(x, num_heads):
        return torch.stack(torch.split(x, num_heads, dim=-1), dim=1)

    def tokens_as_columns(x, num_heads):  # each head a (d, T) matrix, like k transposed
        B, T, D = x.shape
        return x.reshape(B, T, num_heads, -1).permute(0, 2, 3, 1)

    def divides_with_a_slash(x, num_heads):
        B, T, D = x.shape
        return x.view(B, T, num_heads, D / num_heads).transpose(1, 2)

    def reshapes_with_a_slash(x, num_heads):
        B, T, D = x.shape
        d = D / num_heads
        return x.reshape(B, T, num_heads, d).permute(0, 2, 1, 3)

    for fn, bug, words in [
        (view_straight, "view_straight", "memory order"),
        (forgot_to_swap, "no_swap", "trade places"),
        (cut_the_wrong_way, "interleaved", "every H-th feature"),
        (swap_then_cut, "swap_first", "along the tokens of one feature"),
        (split_size_is_the_head_count, "pieces_of_width_h", "number of pieces"),
        (tokens_as_columns, "tokens_last", "(B, H, d, T)"),
        (divides_with_a_slash, "true_division_view", "D / H is a float"),
        (reshapes_with_a_slash, "true_division_reshape", "Divide with //"),
    ]:
        verdict = failed(SPLIT, fn)
        assert verdict.bug == bug, (fn.__name__, verdict.message)
        assert words in verdict.message + verdict.steps[0]
        assert verdict.steps[-1].startswith("See the section 'From one wide attention")


def test_split_with_a_head_count_fixed_in_the_code_names_the_shape():
    def four_heads_always(x, num_heads):  # the head count of an earlier cell, not the argument
        B, T, D = x.shape
        return x.view(B, T, 4, D // 4).transpose(1, 2)

    verdict = failed(SPLIT, four_heads_always)
    assert "expected shape (3, 2, 3, 8), got (3, 4, 3, 4)" in verdict.message
    assert "two heads of width 8" in verdict.message and verdict.bug is None


def test_split_into_a_float32_buffer_is_told_about_the_dtype():
    def loop_over_heads(x, num_heads):
        B, T, D = x.shape
        d = D // num_heads
        result = torch.zeros(B, num_heads, T, d)
        for h in range(num_heads):
            result[:, h] = x[:, :, h * d : (h + 1) * d]
        return result

    verdict = failed(SPLIT, loop_over_heads)
    assert "expected dtype torch.float64, got torch.float32" in verdict.message
    assert "float64 x" in verdict.message and "dtype" in verdict.steps[0]


# ---------------------------------------------------------------- merge_heads: learner mistakes


def test_merge_learner_mistakes_get_their_hints():
    def reshape_straight(y):
        B, H, T, d = y.shape
        return y.reshape(B, T, H * d)

    def swap_and_stop(y):
        return y.transpose(1, 2)

    def heads_last(y):
        return y.permute(0, 2, 3, 1).flatten(2)

    def add_the_heads(y):
        return y.sum(dim=1)

    def heads_after_each_other(y):
        return torch.cat([y[:, h] for h in range(y.shape[1])], dim=1)

    def average_the_heads(y):
        return y.mean(1)

    def flatten_after_the_swap(y):
        return y.permute(0, 2, 1, 3).flatten(start_dim=1)

    for fn, bug, words in [
        (reshape_straight, "no_swap", "other tokens"),
        (swap_and_stop, "swap_only", "not joined"),
        (heads_last, "interleaved", "feature by feature"),
        (add_the_heads, "sum", "added the heads"),
        (heads_after_each_other, "along_tokens", "H * T rows"),
        (average_the_heads, "mean", "averaged the heads"),
        (flatten_after_the_swap, "flatten_tokens", "(B, T * D)"),
    ]:
        verdict = failed(MERGE, fn)
        assert verdict.bug == bug, (fn.__name__, verdict.message)
        assert words in verdict.message


def test_merge_with_view_after_a_transpose_reports_torchs_error():
    # the shared core names this mistake for every exercise (a view of a non-contiguous
    # tensor); this exercise adds no copy of that hint
    def view_after_swap(y):
        B, H, T, d = y.shape
        return y.transpose(1, 2).view(B, T, H * d)

    verdict = failed(MERGE, view_after_swap)
    assert "raised RuntimeError: view size is not compatible" in verdict.message
    assert "three heads of width 4" in verdict.message


def test_merge_that_transposes_its_argument_in_place_is_caught():
    def swap_in_place(y):
        B, H, T, d = y.shape
        return y.transpose_(1, 2).reshape(B, T, H * d)

    verdict = failed(MERGE, swap_in_place)
    assert verdict.bug == "in place" and "changed its argument `y` in place" in verdict.message


def test_merge_into_a_float32_buffer_is_told_about_the_dtype():
    def loop_over_heads(y):
        B, H, T, d = y.shape
        merged = torch.empty(B, T, H * d)
        for h in range(H):
            merged[..., h * d : (h + 1) * d] = y[:, h]
        return merged

    verdict = failed(MERGE, loop_over_heads)
    assert "expected dtype torch.float64" in verdict.message and "float64 y" in verdict.message


# ---------------------------------------------------------------- multihead: learner mistakes


def attend(q, k, v, mask=None):
    """A learner's lesson 02b attention (right), which the multihead attempts below call."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


def split(x, num_heads):
    B, T, D = x.shape
    return x.view(B, T, num_heads, D // num_heads).transpose(1, 2)


def merge(y):
    B, H, T, d = y.shape
    return y.transpose(1, 2).reshape(B, T, H * d)


def test_the_learner_style_helpers_are_right():
    assert run(SPLIT, split).passed and run(MERGE, merge).passed


def test_multihead_learner_mistakes_get_their_hints():
    def keeps_the_pair(x, qkv, out, num_heads, mask=None, rope=None):
        q, k, v = (split(t, num_heads) for t in qkv(x).split(x.shape[-1], dim=-1))
        if rope is not None:
            q, k = rope(q), rope(k)
        y, weights = attend(q, k, v, mask)
        return out(merge(y)), weights

    def forgot_out(x, qkv, out, num_heads, mask=None, rope=None):
        q, k, v = (split(t, num_heads) for t in qkv(x).split(x.shape[-1], dim=-1))
        if rope is not None:
            q, k = rope(q), rope(k)
        return merge(attend(q, k, v, mask)[0])

    def no_mask(x, qkv, out, num_heads, mask=None, rope=None):
        q, k, v = (split(t, num_heads) for t in qkv(x).split(x.shape[-1], dim=-1))
        if rope is not None:
            q, k = rope(q), rope(k)
        return out(merge(attend(q, k, v)[0]))

    def torch_mask_convention(x, qkv, out, num_heads, mask=None, rope=None):
        q, k, v = (split(t, num_heads) for t in qkv(x).split(x.shape[-1], dim=-1))
        if rope is not None:
            q, k = rope(q), rope(k)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))  # True = blocked, as in torch
        return out(merge(scores.softmax(-1) @ v))

    def heads_first(x, qkv, out, num_heads, mask=None, rope=None):
        q, k, v = split(qkv(x), num_heads).chunk(3, dim=-1)
        if rope is not None:
            q, k = rope(q), rope(k)
        return out(merge(attend(q, k, v, mask)[0]))

    def forgot_the_scale(x, qkv, out, num_heads, mask=None, rope=None):
        q, k, v = (split(t, num_heads) for t in qkv(x).split(x.shape[-1], dim=-1))
        if rope is not None:
            q, k = rope(q), rope(k)
        scores = q @ k.transpose(-2, -1)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        return out(merge(scores.softmax(-1) @ v))

    def scaled_by_model_width(x, qkv, out, num_heads, mask=None, rope=None):
        D = x.shape[-1]
        q, k, v = (split(t, num_heads) for t in qkv(x).split(D, dim=-1))
        if rope is not None:
            q, k = rope(q), rope(k)
        scores = q @ k.transpose(-2, -1) / D**0.5
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        return out(merge(scores.softmax(-1) @ v))

    def own_split_viewed_straight(x, qkv, out, num_heads, mask=None, rope=None):
        B, T, D = x.shape
        q, k, v = (t.reshape(B, num_heads, T, -1) for t in qkv(x).split(D, dim=-1))
        if rope is not None:
            q, k = rope(q), rope(k)
        return out(merge(attend(q, k, v, mask)[0]))

    def own_merge_without_swap(x, qkv, out, num_heads, mask=None, rope=None):
        B, T, D = x.shape
        q, k, v = (split(t, num_heads) for t in qkv(x).split(D, dim=-1))
        if rope is not None:
            q, k = rope(q), rope(k)
        return out(attend(q, k, v, mask)[0].reshape(B, T, D))

    def never_uses_rope(x, qkv, out, num_heads, mask=None, rope=None):
        q, k, v = (split(t, num_heads) for t in qkv(x).split(x.shape[-1], dim=-1))
        return out(merge(attend(q, k, v, mask)[0]))

    def rope_on_everything(x, qkv, out, num_heads, mask=None, rope=None):
        q, k, v = (split(t, num_heads) for t in qkv(x).split(x.shape[-1], dim=-1))
        if rope is not None:
            q, k, v = (rope(t) for t in (q, k, v))
        return out(merge(attend(q, k, v, mask)[0]))

    def rope_on_queries(x, qkv, out, num_heads, mask=None, rope=None):
        q, k, v = (split(t, num_heads) for t in qkv(x).split(x.shape[-1], dim=-1))
        if rope is not None:
            q = rope(q)
        return out(merge(attend(q, k, v, mask)[0]))

    for fn, bug, words in [
        (keeps_the_pair, "returns_pair", "a pair (output, weights)"),
        (forgot_out, "no_out", "before the output projection"),
        (no_mask, "mask_ignored", "keys the mask blocks"),
        (torch_mask_convention, "mask_inverted", "NaN"),
        (heads_first, "heads_before_qkv", "right with one head"),
        (scaled_by_model_width, "scale_by_d_model", "too large a number"),
        (forgot_the_scale, "unscaled", "not divided by anything"),
        (own_split_viewed_straight, "split_view_straight", "rows are not their tokens"),
        (own_merge_without_swap, "merge_no_swap", "numbers of other tokens"),
        (never_uses_rope, "rope_ignored", "without it"),
        (rope_on_everything, "rope_on_v", "values were rotated"),
        (rope_on_queries, "rope_on_q_only", "only the queries"),
    ]:
        verdict = failed(MULTIHEAD, fn)
        assert verdict.bug == bug, (fn.__name__, verdict.message)
        assert words in verdict.message, (fn.__name__, verdict.message)
        assert len(verdict.steps) == 2 and verdict.steps[1].startswith("See the section")


def test_multihead_that_copies_the_worked_examples_projection_is_told_of_the_bias():
    """The worked example projects with qkv_projection(x, in_proj_weight, D) on torch's layer
    built without biases; copied into multihead as qkv_projection(x, qkv.weight, D), it drops
    qkv's bias, and the check says so by name."""
    from course_lib.exercises.lesson02a_attention import qkv_projection_reference as projection

    def copied_projection(x, qkv, out, num_heads, mask=None, rope=None):
        q, k, v = (split(t, num_heads) for t in projection(x, qkv.weight, x.shape[-1]))
        if rope is not None:
            q, k = rope(q), rope(k)
        return out(merge(attend(q, k, v, mask)[0]))

    verdict = failed(MULTIHEAD, copied_projection)
    assert verdict.bug == "no_qkv_bias", verdict.message
    assert "without qkv's bias" in verdict.message
    assert "bias=False" in verdict.steps[0] and "call qkv(x)" in verdict.steps[0]


def test_multihead_first_failure_names_the_case():
    def no_mask(x, qkv, out, num_heads, mask=None, rope=None):
        q, k, v = (split(t, num_heads) for t in qkv(x).split(x.shape[-1], dim=-1))
        return out(merge(attend(q, k, v)[0]))

    assert "a causal (T, T) mask" in failed(MULTIHEAD, no_mask).message


def test_multihead_with_a_head_count_fixed_in_the_code_fails_on_three_heads():
    def four_heads_always(x, qkv, out, num_heads, mask=None, rope=None):
        q, k, v = (split(t, 4) for t in qkv(x).split(x.shape[-1], dim=-1))
        if rope is not None:
            q, k = rope(q), rope(k)
        return out(merge(attend(q, k, v, mask)[0]))

    verdict = failed(MULTIHEAD, four_heads_always)
    assert verdict.bug is None and "the numbers differ" in verdict.message
    assert "num_heads 3" in verdict.message


def test_multihead_that_flips_the_mask_in_place_is_caught():
    def flips_mask_for_torch(x, qkv, out, num_heads, mask=None, rope=None):
        q, k, v = (split(t, num_heads) for t in qkv(x).split(x.shape[-1], dim=-1))
        if rope is not None:
            q, k = rope(q), rope(k)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            mask.logical_not_()  # now True = blocked, as torch.nn.MultiheadAttention wants
            scores = scores.masked_fill(mask, float("-inf"))
        return out(merge(scores.softmax(-1) @ v))

    verdict = failed(MULTIHEAD, flips_mask_for_torch)
    assert verdict.bug == "in place" and "`mask` in place" in verdict.message


def test_multihead_with_rope_before_the_split_reports_the_error():
    def rope_on_the_whole_width(x, qkv, out, num_heads, mask=None, rope=None):
        q, k, v = qkv(x).split(x.shape[-1], dim=-1)
        if rope is not None:
            q, k = rope(q), rope(k)  # (B, T, D): not yet cut into heads
        q, k, v = (split(t, num_heads) for t in (q, k, v))
        return out(merge(attend(q, k, v, mask)[0]))

    verdict = failed(MULTIHEAD, rope_on_the_whole_width)
    assert "raised ValueError" in verdict.message and "rope given" in verdict.message


def test_multihead_that_merges_into_a_float32_buffer_fails_on_float64():
    def loop_merge(x, qkv, out, num_heads, mask=None, rope=None):
        B, T, D = x.shape
        q, k, v = (split(t, num_heads) for t in qkv(x).split(D, dim=-1))
        if rope is not None:
            q, k = rope(q), rope(k)
        y, _ = attend(q, k, v, mask)
        merged = torch.zeros(B, T, D)
        d = D // num_heads
        for h in range(num_heads):
            merged[..., h * d : (h + 1) * d] = y[:, h]
        return out(merged)

    verdict = failed(MULTIHEAD, loop_merge)
    assert "float64" in verdict.message and "raised RuntimeError" in verdict.message


def test_multihead_that_calls_a_stub_split_is_reported_as_not_written():
    def uses_unwritten_split(x, qkv, out, num_heads, mask=None, rope=None):
        return stub(x, num_heads)

    assert run(MULTIHEAD, uses_unwritten_split).status == "not implemented"


def test_work_in_a_workspaces_03_multihead_is_found_by_lesson_04a(tmp_path):
    """A workspace made before the move keeps 03_multihead.ipynb with the learner's functions;
    04a_multihead_layer arrives beside it with stubs, and later lessons get the functions from
    03."""
    from course_lib.exercises import by_name, lesson_file
    from course_lib.workspace import stub_solutions

    # the learner's attention, which multihead calls, in the lesson that defines it
    source = lesson_file(NOTEBOOKS, by_name("attention").lesson)
    (tmp_path / source.name).write_bytes(source.read_bytes())
    solved = nbformat.read(NOTEBOOKS / "04a_multihead_layer.ipynb", as_version=4)
    nbformat.write(solved, tmp_path / "03_multihead.ipynb")  # the learner's work, earlier name
    stubbed = nbformat.read(NOTEBOOKS / "04a_multihead_layer.ipynb", as_version=4)
    for cell in stubbed.cells:
        if cell.metadata.get("nbgrader", {}).get("solution"):
            cell.source = stub_solutions(cell.source)
    nbformat.write(stubbed, tmp_path / "04a_multihead_layer.ipynb")
    work = collect(["split_heads", "merge_heads", "multihead"], tmp_path)
    assert set(work.origin.values()) == {"lesson 04a: yours in 03_multihead.ipynb"}
    assert all(run(e, work.functions[e.name]).passed for e in lesson04a_multihead_layer.EXERCISES)


# ---------------------------------------------------------------- shortcuts through the course


def test_splits_that_call_the_courses_head_cutting_get_the_hint_for_it(tmp_path):
    def through_the_layer_module(x, num_heads):  # `from course_lib import multihead`
        B, T, D = x.shape
        return course_layers.stacked_heads(x, 1, num_heads, D // num_heads)[0]

    def through_a_course_layer(x, num_heads):  # q of a layer whose projection hands x on
        D = x.shape[-1]
        layer = MultiHeadAttention(D, num_heads).to(x.dtype)
        with torch.no_grad():
            layer.qkv.weight.copy_(torch.eye(D, dtype=x.dtype).repeat(3, 1))
            layer.qkv.bias.zero_()
        q, _, _ = layer.qkv_heads(x)
        return q.detach()

    def through_grouped_query_attention(x, num_heads):
        q, _, _ = gqa.split_qkv(torch.cat([x, x, x], dim=-1), num_heads, num_heads)
        return q

    for fn, called in [
        (through_the_layer_module, "multihead.stacked_heads"),
        (through_a_course_layer, "MultiHeadAttention.qkv_heads"),
        (through_grouped_query_attention, "gqa.split_qkv"),
    ]:
        verdict = failed(SPLIT, fn)
        assert verdict.bug == "forbidden", (fn.__name__, verdict.message)
        assert f"your function calls course_lib.{called}" in verdict.message or (
            f"your function calls {called}" in verdict.message
        ), verdict.message
        assert "a function of their own" in verdict.steps[0]

    def imported_by_name(x, num_heads):  # `from course_lib.multihead import stacked_heads`
        return stacked_heads(x, 1, num_heads, x.shape[-1] // num_heads)[0]

    courses = collect(["split_heads"], tmp_path).functions["split_heads"]  # nothing written here

    def from_earlier_work(x, num_heads):
        return courses(x, num_heads)

    # a forbidden function held by a name imported earlier is refused all the same
    verdict = failed(SPLIT, imported_by_name)
    assert verdict.bug == "forbidden", verdict.message
    assert "your function calls course_lib.multihead.stacked_heads" in verdict.message
    # the course's own split_heads, handed back by earlier_work, is told apart
    verdict = failed(SPLIT, from_earlier_work)
    assert verdict.bug == "course's own", verdict.message
    assert "runs the course's own split_heads_reference" in verdict.message


def test_a_merge_from_earlier_work_is_the_courses_own(tmp_path):
    courses = collect(["merge_heads"], tmp_path).functions["merge_heads"]

    def merge_heads(y):
        return courses(y)

    verdict = failed(MERGE, merge_heads)
    assert verdict.bug == "course's own" and "merge_heads_reference" in verdict.message


def test_multiheads_that_call_torchs_or_the_courses_layer_get_the_hint_for_it():
    def torchs_layer(x, qkv, out, num_heads, mask=None, rope=None):
        B, T, D = x.shape
        layer = nn.MultiheadAttention(D, num_heads, batch_first=True, dtype=x.dtype)
        with torch.no_grad():
            layer.in_proj_weight.copy_(qkv.weight)
            layer.in_proj_bias.copy_(qkv.bias)
            layer.out_proj.load_state_dict(out.state_dict())
        blocked = None if mask is None else ~mask
        return layer(x, x, x, attn_mask=blocked, need_weights=False)[0]

    def the_courses_layer(x, qkv, out, num_heads, mask=None, rope=None):
        layer = MultiHeadAttention(x.shape[-1], num_heads, rope=rope).to(x.dtype)
        layer.qkv.load_state_dict(qkv.state_dict())
        layer.out.load_state_dict(out.state_dict())
        return layer(x, mask)

    def own_split_torchs_attention(x, qkv, out, num_heads, mask=None, rope=None):
        q, k, v = (split(t, num_heads) for t in qkv(x).split(x.shape[-1], dim=-1))
        if rope is not None:
            q, k = rope(q), rope(k)
        return out(merge(F.scaled_dot_product_attention(q, k, v, attn_mask=mask)))

    def the_courses_cut_and_own_attention(x, qkv, out, num_heads, mask=None, rope=None):
        B, T, D = x.shape
        q, k, v = course_layers.stacked_heads(qkv(x), 3, num_heads, D // num_heads)
        if rope is not None:
            q, k = rope(q), rope(k)
        return out(merge(attend(q, k, v, mask)[0]))

    def grouped_query_layer(x, qkv, out, num_heads, mask=None, rope=None):
        layer = gqa.GroupedQueryAttention(x.shape[-1], num_heads, num_heads, rope=rope)
        layer = layer.to(x.dtype)
        layer.qkv.load_state_dict(qkv.state_dict())
        layer.out.load_state_dict(out.state_dict())
        return layer(x, mask)

    for fn, called in [
        (torchs_layer, "MultiheadAttention.forward"),
        (the_courses_layer, "MultiHeadAttention.forward"),
        (own_split_torchs_attention, "torch.nn.functional.scaled_dot_product_attention"),
        (the_courses_cut_and_own_attention, "course_lib.multihead.stacked_heads"),
        (grouped_query_layer, "GroupedQueryAttention.forward"),
    ]:
        verdict = failed(MULTIHEAD, fn)
        assert verdict.bug == "forbidden", (fn.__name__, verdict.message)
        assert f"your function calls {called}" in verdict.message, verdict.message
        assert "yours to assemble from your split_heads" in verdict.steps[0]


def test_multiheads_that_run_the_courses_pieces_by_another_name_are_told(tmp_path):
    def cut_by_a_name_imported(x, qkv, out, num_heads, mask=None, rope=None):
        B, T, D = x.shape
        q, k, v = stacked_heads(qkv(x), 3, num_heads, D // num_heads)
        if rope is not None:
            q, k = rope(q), rope(k)
        return out(merge(attend(q, k, v, mask)[0]))

    found = collect(["split_heads", "merge_heads", "multihead"], tmp_path).functions

    def courses_split_and_merge(x, qkv, out, num_heads, mask=None, rope=None):
        q, k, v = (found["split_heads"](t, num_heads) for t in qkv(x).split(x.shape[-1], -1))
        if rope is not None:
            q, k = rope(q), rope(k)
        return out(found["merge_heads"](attend(q, k, v, mask)[0]))

    def courses_multihead(x, qkv, out, num_heads, mask=None, rope=None):
        return found["multihead"](x, qkv, out, num_heads, mask, rope)

    # forbidden pieces held by other names (an import, earlier_work's fallback) are refused
    for fn, called in [
        (cut_by_a_name_imported, "course_lib.multihead.stacked_heads"),
        (courses_split_and_merge, "split_heads_reference"),
    ]:
        verdict = failed(MULTIHEAD, fn)
        assert verdict.bug == "forbidden", (fn.__name__, verdict.message)
        assert "your function calls" in verdict.message and called in verdict.message
    # the course's multihead runs torch's own multi-head function, which the spy meets first
    verdict = failed(MULTIHEAD, courses_multihead)
    assert verdict.bug == "forbidden"
    assert "calls torch.nn.functional.multi_head_attention_forward" in verdict.message


def test_splits_and_merges_through_later_lessons_exercise_helpers_are_refused():
    # lessons 13a, 13c and 15's exercise modules cut and merge heads with private helpers of
    # their own: right answers (they pass once the forbidden list is emptied), refused by it
    from course_lib.exercises import lesson13c_grouped_query_attention as grouped_multihead
    from course_lib.exercises.lesson13a_what_generation_recomputes import attend_cached
    from course_lib.exercises.lesson15a_sliding_window import attend_rolling

    def through_attend_cached(x, num_heads):
        return attend_cached._heads(x, num_heads)

    def through_attend_rolling(x, num_heads):
        return attend_rolling._heads(x, num_heads)

    def through_grouped_split(x, num_heads):  # q of an identity [q | k | v]
        return grouped_multihead._split(x, lambda t: t.repeat(1, 1, 3), num_heads, num_heads)[0]

    for fn, called in [
        (through_attend_cached, "lesson13a_what_generation_recomputes.attend_cached._heads"),
        (through_grouped_split, "lesson13c_grouped_query_attention._split"),
        (through_attend_rolling, "lesson15a_sliding_window.attend_rolling._heads"),
    ]:
        assert run(dataclasses.replace(SPLIT, forbidden=()), fn).passed, fn.__name__
        verdict = failed(SPLIT, fn)
        assert verdict.bug == "forbidden", (fn.__name__, verdict.message)
        assert f"your function calls course_lib.exercises.{called}" in verdict.message
        assert "later lessons' exercises" in verdict.steps[0]

    for merged, called in [
        (attend_cached._merged, "lesson13a_what_generation_recomputes.attend_cached._merged"),
        (attend_rolling._merged, "lesson15a_sliding_window.attend_rolling._merged"),
    ]:

        def merge_heads(y, merged=merged):
            return merged(y)

        assert run(dataclasses.replace(MERGE, forbidden=()), merge_heads).passed, called
        verdict = failed(MERGE, merge_heads)
        assert verdict.bug == "forbidden", verdict.message
        assert f"your function calls course_lib.exercises.{called}" in verdict.message
        assert "later lessons' exercises merge their heads" in verdict.steps[0]

    def multihead(x, qkv, out, num_heads, mask=None, rope=None):
        q, k, v = (attend_cached._heads(t, num_heads) for t in qkv(x).split(x.shape[-1], -1))
        if rope is not None:
            q, k = rope(q), rope(k)
        return out(attend_cached._merged(attend(q, k, v, mask)[0]))

    verdict = failed(MULTIHEAD, multihead)
    assert verdict.bug == "forbidden", verdict.message
    assert "lesson13a_what_generation_recomputes.attend_cached._heads" in verdict.message
