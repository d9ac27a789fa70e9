"""Lesson 13c's exercise: learner-style mistakes get their hint, and answers built on the course's
grouped attention are refused.

Every wrong function here is written the way a learner would write it (heads copied with
repeat, keys and values swapped), not taken from the bug list in
course_lib/exercises/lesson13c_grouped_query_attention.py.
"""

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from course_lib.checks import check_grouped_multihead
from course_lib.exercises.core import run
from course_lib.exercises.lesson13c_grouped_query_attention import GROUPED_MULTIHEAD
from helpers import failed_with_hint as _check
from helpers import notebook_functions

NOTEBOOK = (
    Path(__file__).resolve().parent.parent / "notebooks" / "13c_grouped_query_attention.ipynb"
)


# ---------------------------------------------------------------- right answers, as written


def grouped_multihead(x, qkv, out, num_heads, num_kv_heads, mask=None, rope=None):
    B, T, D = x.shape
    d = D // num_heads
    q, k, v = qkv(x).split([D, num_kv_heads * d, num_kv_heads * d], dim=-1)
    q = q.view(B, T, num_heads, d).transpose(1, 2)
    k = k.view(B, T, num_kv_heads, d).transpose(1, 2)
    v = v.view(B, T, num_kv_heads, d).transpose(1, 2)
    if rope is not None:
        q, k = rope(q), rope(k)
    G = num_heads // num_kv_heads
    k, v = k.repeat_interleave(G, dim=1), v.repeat_interleave(G, dim=1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    y = torch.softmax(scores, dim=-1) @ v
    return out(y.transpose(1, 2).reshape(B, T, D))


# ---------------------------------------------------------------- every exercise


def test_the_right_answer_written_here_passes():
    assert run(GROUPED_MULTIHEAD, grouped_multihead).passed


# ---------------------------------------------------------------- grouped_multihead


def _grouped_with(
    *,
    share=lambda t, G: t.repeat_interleave(G, dim=1),
    order="kv",
    use_mask=True,
    project=True,
    rope_v=False,
):
    def grouped(x, qkv, out, num_heads, num_kv_heads, mask=None, rope=None):
        B, T, D = x.shape
        d = D // num_heads
        q, k, v = qkv(x).split([D, num_kv_heads * d, num_kv_heads * d], dim=-1)
        if order == "vk":
            k, v = v, k
        q = q.view(B, T, num_heads, d).transpose(1, 2)
        k = k.view(B, T, num_kv_heads, d).transpose(1, 2)
        v = v.view(B, T, num_kv_heads, d).transpose(1, 2)
        if rope is not None:
            q, k = rope(q), rope(k)
            if rope_v:
                v = rope(v)
        G = num_heads // num_kv_heads
        k, v = share(k, G), share(v, G)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask if use_mask else None)
        y = y.transpose(1, 2).reshape(B, T, D)
        return out(y) if project else y

    return grouped


def test_grouped_heads_copied_with_repeat_are_named():
    _check(GROUPED_MULTIHEAD, _grouped_with(share=lambda t, G: t.repeat(1, G, 1, 1)), "tiled")


def test_grouped_heads_copied_with_cat_are_named():
    _check(GROUPED_MULTIHEAD, _grouped_with(share=lambda t, G: torch.cat([t] * G, dim=1)), "tiled")


def test_grouped_keys_and_values_swapped_are_named():
    _check(GROUPED_MULTIHEAD, _grouped_with(order="vk"), "k_and_v_swapped")


def test_grouped_with_one_key_head_for_all_is_named():
    wrong = _grouped_with(share=lambda t, G: t[:, :1].expand(-1, t.shape[1] * G, -1, -1))
    _check(GROUPED_MULTIHEAD, wrong, "one_key_head")


def test_grouped_without_the_mask_is_named():
    _check(GROUPED_MULTIHEAD, _grouped_with(use_mask=False), "mask_ignored")


def test_grouped_without_the_output_projection_is_named():
    _check(GROUPED_MULTIHEAD, _grouped_with(project=False), "no_out")


def test_grouped_with_rope_on_the_values_is_named():
    _check(GROUPED_MULTIHEAD, _grouped_with(rope_v=True), "rope_on_v")


def test_grouped_by_broadcasting_the_groups_passes():
    # no copies: each group of query heads laid beside its key head, broadcast
    def grouped(x, qkv, out, num_heads, num_kv_heads, mask=None, rope=None):
        B, T, D = x.shape
        d = D // num_heads
        q, k, v = qkv(x).split([D, num_kv_heads * d, num_kv_heads * d], dim=-1)
        q = q.view(B, T, num_heads, d).transpose(1, 2)
        k, v = (t.view(B, T, num_kv_heads, d).transpose(1, 2) for t in (k, v))
        if rope is not None:
            q, k = rope(q), rope(k)
        q = q.unflatten(1, (num_kv_heads, -1))  # (B, H_kv, G, T, d)
        scores = q @ k[:, :, None].transpose(-2, -1) / math.sqrt(d)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        y = (torch.softmax(scores, dim=-1) @ v[:, :, None]).flatten(1, 2)  # (B, H, T, d)
        return out(y.transpose(1, 2).reshape(B, T, D))

    assert run(GROUPED_MULTIHEAD, grouped).passed


# ---------------------------------------------------------------- the course's own


def _through_split_qkv(x, qkv, out, num_heads, num_kv_heads, mask=None, rope=None):
    """The course's split into heads and its sharing, wrapped: right numbers, nothing written."""
    from course_lib import gqa

    q, k, v = gqa.split_qkv(qkv(x), num_heads, num_kv_heads)
    if rope is not None:
        q, k = rope(q), rope(k)
    y, _ = gqa.grouped_attend(q, k, v, mask, 1 / math.sqrt(q.shape[-1]))
    return out(y.transpose(1, 2).flatten(-2))


def _through_tied_weights(x, qkv, out, num_heads, num_kv_heads, mask=None, rope=None):
    """Multi-head attention on the course's tied weights (the lesson's own cross-check)."""
    from course_lib.gqa import as_multihead

    multihead = notebook_functions("multihead")["multihead"]
    return multihead(x, as_multihead(qkv, num_heads, num_kv_heads), out, num_heads, mask, rope)


def _through_torchs_flag(x, qkv, out, num_heads, num_kv_heads, mask=None, rope=None):
    """The heads split by hand, the sharing left to torch's enable_gqa=True."""
    from torch.nn.functional import scaled_dot_product_attention as sdpa  # another name

    B, T, D = x.shape
    d = D // num_heads
    q, k, v = qkv(x).split([D, num_kv_heads * d, num_kv_heads * d], dim=-1)
    q = q.view(B, T, num_heads, d).transpose(1, 2)
    k, v = (t.view(B, T, num_kv_heads, d).transpose(1, 2) for t in (k, v))
    if rope is not None:
        q, k = rope(q), rope(k)
    y = sdpa(q, k, v, attn_mask=mask, enable_gqa=True)
    return out(y.transpose(1, 2).reshape(B, T, D))


@pytest.mark.parametrize(
    ("route", "called"),
    [
        (_through_split_qkv, "course_lib.gqa.split_qkv"),
        (_through_tied_weights, "course_lib.gqa.as_multihead"),
        (
            _through_torchs_flag,
            "torch.nn.functional.scaled_dot_product_attention with enable_gqa=True",
        ),
    ],
    ids=["split_qkv and grouped_attend", "as_multihead", "enable_gqa"],
)
def test_the_courses_own_grouped_attention_is_refused(route, called):
    result = run(GROUPED_MULTIHEAD, route)
    assert not result.passed and result.bug == "forbidden", result.message
    assert f"your function calls {called}" in result.message
    assert result.steps[0] == GROUPED_MULTIHEAD.forbidden_hint
