"""Lesson 13a's exercises: learner-style mistakes get their hint.

Every wrong function here is written the way a learner would write it (angle tables with the
wrong rows, masks from tril), not taken from the bug list in
course_lib/exercises/lesson13a_what_generation_recomputes/. Lesson 13b's tests build on the
right answers written here.
"""

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from course_lib.checks import check_attend_cached, check_rope_from
from course_lib.exercises.core import run
from course_lib.exercises.lesson13a_what_generation_recomputes import (
    ATTEND_CACHED,
    ROPE_FROM,
)
from helpers import failed_with_hint as _check
from helpers import notebook_functions

NOTEBOOK = (
    Path(__file__).resolve().parent.parent / "notebooks" / "13a_what_generation_recomputes.ipynb"
)


# ---------------------------------------------------------------- right answers, as written


def rope_from(x, start):
    T, d = x.shape[-2:]
    theta = 10000 ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)  # (d/2,)
    angles = torch.arange(start, start + T, dtype=x.dtype)[:, None] * theta  # (T, d/2)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack(
        (a * angles.cos() - b * angles.sin(), a * angles.sin() + b * angles.cos()), dim=-1
    ).flatten(-2)


def _attend_with(
    *,
    start=lambda S: S,
    cat=lambda past, new: torch.cat([past, new], dim=2),
    allowed=lambda S, T: torch.ones(T, S + T, dtype=torch.bool).tril(diagonal=S),
    returned=lambda k, new_k: k,
):
    def attend(x, qkv, out, num_heads, past_k, past_v, rope=None):
        B, T, D = x.shape
        S = past_k.shape[2]
        q, k, v = qkv(x).split(D, dim=-1)
        q, k, v = (t.view(B, T, num_heads, D // num_heads).transpose(1, 2) for t in (q, k, v))
        if rope is not None:
            q, k = rope(q, start(S)), rope(k, start(S))
        keys, values = cat(past_k, k), cat(past_v, v)
        scores = q @ keys.transpose(-2, -1) / math.sqrt(D // num_heads)
        mask = allowed(S, T)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        y = (torch.softmax(scores, dim=-1) @ values).transpose(1, 2).reshape(B, T, D)
        return out(y), returned(keys, k), returned(values, v)

    return attend


# a right answer: scores by hand, the mask from tril shifted by the cache's length
attend_cached = _attend_with()


# ---------------------------------------------------------------- every exercise


def test_the_right_answers_written_here_pass():
    assert run(ROPE_FROM, rope_from).passed
    assert run(ATTEND_CACHED, attend_cached).passed


# ---------------------------------------------------------------- rope_from


def _rope_from_with(positions):
    def rope(x, start):
        T, d = x.shape[-2:]
        theta = 10000 ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)
        angles = positions(start, T).to(x.dtype)[:, None] * theta  # (T, d/2)
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack(
            (a * angles.cos() - b * angles.sin(), a * angles.sin() + b * angles.cos()), dim=-1
        ).flatten(-2)

    return rope


def test_rope_from_that_forgets_start_is_named():
    _check(ROPE_FROM, _rope_from_with(lambda start, T: torch.arange(T)), "start_ignored")


def test_rope_from_that_starts_one_past_is_named():
    wrong = _rope_from_with(lambda start, T: torch.arange(1, T + 1) + start)
    _check(ROPE_FROM, wrong, "one_past_start")


def test_rope_from_that_turns_every_row_by_start_is_named():
    def rope(x, start):
        d = x.shape[-1]
        angle = start * 10000 ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)  # (d/2,): T = 1
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack(
            (a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()), dim=-1
        ).flatten(-2)

    result = _check(ROPE_FROM, rope, "every_row_at_start")
    assert "start 0" in result.message  # its first failing case: 6 rows from position 0


def test_rope_from_that_subtracts_start_is_named():
    _check(ROPE_FROM, _rope_from_with(lambda start, T: torch.arange(T) - start), "start_subtracted")


def test_rope_from_in_the_rotate_half_layout_is_named():
    def rope(x, start):
        T, d = x.shape[-2:]
        theta = 10000 ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)
        angles = torch.arange(start, start + T, dtype=x.dtype)[:, None] * theta
        first, second = x.chunk(2, dim=-1)
        return torch.cat(
            (
                first * angles.cos() - second * angles.sin(),
                first * angles.sin() + second * angles.cos(),
            ),
            dim=-1,
        )

    _check(ROPE_FROM, rope, "rotate_half")


def _padded(rope_heads):
    """rope_from as rope_heads on x with start rows of zeros in front, the front cut off."""

    def rope(x, start):
        pad = x.new_zeros(*x.shape[:-2], start, x.shape[-1])
        return rope_heads(torch.cat([pad, x], dim=-2))[..., start:, :]

    return rope


def _through_apply_rope(x, start):
    from course_lib.positional import apply_rope

    return apply_rope(x, torch.arange(start, start + x.shape[-2]))


def _through_rotate_from():
    from course_lib.kv_cache import rotate_from
    from course_lib.positional import RotaryEmbedding

    ropes = {d: RotaryEmbedding(d, max_len=2048) for d in (6, 8, 16)}  # built before the check

    def rope(x, start):
        return rotate_from(ropes[x.shape[-1]], x, start)

    return rope


def _learners_rope_heads():
    # the learner's own rope_heads of lesson 07, read from that notebook as earlier_work reads it
    return _padded(notebook_functions("rope_heads")["rope_heads"])


def _courses_rope_heads():
    # what earlier_work hands a learner who skipped lesson 07
    from course_lib.exercises.lesson07a_rope_in_a_model import rope_heads_reference

    return _padded(rope_heads_reference)


@pytest.mark.parametrize(
    ("route", "called"),
    [
        (lambda: _through_apply_rope, "course_lib.positional.apply_rope"),
        (_through_rotate_from, "course_lib.kv_cache.rotate_from"),
        (_learners_rope_heads, "rope_heads"),
        (_courses_rope_heads, "lesson07a_rope_in_a_model.rope_heads.rope_heads_reference"),
    ],
    ids=["apply_rope", "rotate_from", "your rope_heads, padded", "the course's rope_heads, padded"],
)
def test_rope_from_built_on_a_rope_that_exists_is_refused(route, called):
    result = run(ROPE_FROM, route())
    assert not result.passed and result.bug == "forbidden", result.message
    assert f"your function calls {called}" in result.message.replace("course_lib.exercises.", "")
    assert result.steps[0] == ROPE_FROM.forbidden_hint


def test_a_padded_route_gives_the_right_numbers_without_the_refusal():
    # the refusal is what fails these routes: their numbers are right
    from course_lib.exercises.core import close

    fn = _learners_rope_heads()
    for case in ROPE_FROM.case_list():
        assert close(fn(*case.args), ROPE_FROM.reference(*case.args), 1e-5, 1e-4)


# ---------------------------------------------------------------- attend_cached


def test_attend_cached_that_turns_from_zero_is_named():
    _check(ATTEND_CACHED, _attend_with(start=lambda S: 0), "no_offset")


def test_attend_cached_that_turns_one_past_the_cache_is_named():
    _check(ATTEND_CACHED, _attend_with(start=lambda S: S + 1), "one_past")


def test_attend_cached_that_forgets_the_cache_is_named():
    wrong = _attend_with(
        cat=lambda past, new: new, allowed=lambda S, T: torch.ones(T, T, dtype=torch.bool).tril()
    )
    _check(ATTEND_CACHED, wrong, "past_dropped")


def test_attend_cached_that_appends_twice_is_named():
    wrong = _attend_with(returned=lambda keys, new: torch.cat([keys, new], dim=2))
    _check(ATTEND_CACHED, wrong, "appended_twice")


def test_attend_cached_with_the_new_keys_first_is_named():
    _check(
        ATTEND_CACHED,
        _attend_with(cat=lambda past, new: torch.cat([new, past], dim=2)),
        "new_first",
    )


def test_attend_cached_without_a_mask_is_named():
    _check(ATTEND_CACHED, _attend_with(allowed=lambda S, T: None), "no_mask")


def _fused_with(options):
    """attend_cached on torch's fused attention, called with options(S, T) as its keywords."""

    def attend(x, qkv, out, num_heads, past_k, past_v, rope=None):
        B, T, D = x.shape
        S = past_k.shape[2]
        q, k, v = (
            t.unflatten(-1, (num_heads, -1)).transpose(1, 2) for t in qkv(x).chunk(3, dim=-1)
        )
        if rope is not None:
            q, k = rope(q, S), rope(k, S)
        k, v = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)
        y = F.scaled_dot_product_attention(q, k, v, **options(S, T))
        return out(y.transpose(1, 2).reshape(B, T, D)), k, v

    return attend


def test_attend_cached_with_is_causal_is_named():
    # torch's is_causal=True masks from the top left: with a cache, the new token sees key 0
    result = _check(
        ATTEND_CACHED, _fused_with(lambda S, T: {"is_causal": True}), "mask_not_shifted"
    )
    assert "is_causal=True" in result.steps[0]


def test_attend_cached_with_a_t_by_t_causal_mask_cut_wide_is_named():
    wrong = _attend_with(allowed=lambda S, T: torch.ones(T, S + T, dtype=torch.bool).tril())
    _check(ATTEND_CACHED, wrong, "mask_not_shifted")


def test_attend_cached_with_torchs_fused_attention_and_a_mask_passes():
    def shifted(S, T):
        keys_at, queries_at = torch.arange(S + T), torch.arange(S, S + T)
        return {"attn_mask": keys_at[None, :] <= queries_at[:, None]}

    assert run(ATTEND_CACHED, _fused_with(shifted)).passed
