"""Lesson 15a's exercises: learner-style mistakes get their hint.

Every wrong function here is written the way a learner would write it (loops over rows,
torch.tril and triu, deques of keys, lesson 13a's attend_cached changed a little), not taken
from the bug list in course_lib/exercises/lesson15a_sliding_window/. The references are checked
against independent computations: the course's window_mask built by comparisons, and a whole
sequence through F.scaled_dot_product_attention with that mask.
"""

import dataclasses
import math
from pathlib import Path

import nbformat
import pytest
import torch
import torch.nn.functional as F

from course_lib.checks import check_attend_rolling, check_sliding_window_mask
from course_lib.exercises.core import run
from course_lib.exercises.lesson13a_what_generation_recomputes.rope_from import rope_from_reference
from course_lib.exercises.lesson15a_sliding_window import (
    ATTEND_ROLLING,
    SLIDING_WINDOW_MASK,
    attend_rolling_reference,
    rolled,
    sliding_window_mask_reference,
)
from course_lib.exercises.lesson15a_sliding_window.attend_rolling import _layer
from course_lib.sliding_window import window_mask
from helpers import failed_with_hint as _check
from helpers import stub

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "15a_sliding_window.ipynb"


# ---------------------------------------------------------------- right answers, as written


def mask_by_loops(T, window, sinks=0):
    mask = torch.zeros(T, T, dtype=torch.bool)
    for i in range(T):
        for j in range(i + 1):
            if i - j < window or j < sinks:
                mask[i, j] = True
    return mask


def mask_by_triangles(T, window, sinks=0):
    ones = torch.ones(T, T, dtype=torch.bool)
    band = torch.tril(ones) & torch.triu(ones, diagonal=-(window - 1))
    band[:, :sinks] = torch.tril(ones)[:, :sinks]
    return band


def rolling_by_hand(x, qkv, out, num_heads, past_k, past_v, position, window, sinks=0,
                    rope=None):  # fmt: skip
    B, _, D = x.shape
    d = D // num_heads
    q, k, v = qkv(x).chunk(3, dim=-1)
    q, k, v = (t.reshape(B, 1, num_heads, d).permute(0, 2, 1, 3) for t in (q, k, v))
    if rope:
        q, k = rope(q, position), rope(k, position)
    keys, values = torch.cat((past_k, k), 2), torch.cat((past_v, v), 2)
    while keys.shape[2] > sinks + window:
        keys = torch.cat((keys[:, :, :sinks], keys[:, :, sinks + 1 :]), 2)
        values = torch.cat((values[:, :, :sinks], values[:, :, sinks + 1 :]), 2)
    weights = torch.softmax(q @ keys.transpose(-1, -2) / math.sqrt(d), dim=-1)  # (B, H, 1, S)
    y = (weights @ values).permute(0, 2, 1, 3).reshape(B, 1, D)
    return out(y), keys, values


def test_the_right_answers_written_here_pass():
    for fn in (mask_by_loops, mask_by_triangles):
        assert run(SLIDING_WINDOW_MASK, fn).passed, fn.__name__
    assert run(ATTEND_ROLLING, rolling_by_hand).passed


def test_the_courses_window_mask_handed_over_fails_with_its_hint():
    """The course's window_mask has the exercise's signature and meaning: assigned or wrapped,
    it is refused, with the hint that says why."""
    from course_lib import sliding_window

    def wrapped(T, window, sinks=0):
        return sliding_window.window_mask(T, window, sinks)

    for fn in (window_mask, wrapped):
        verdict = run(SLIDING_WINDOW_MASK, fn)
        assert not verdict.passed and verdict.bug == "forbidden", verdict.message
        assert "course_lib.sliding_window.window_mask" in verdict.message
        assert verdict.steps[0] == SLIDING_WINDOW_MASK.forbidden_hint


def test_the_courses_attend_cached_wrapped_fails_with_its_hint():
    """Lesson 13a's attend_cached as earlier_work hands it to a learner who has not written it
    (the course's), turned at `position` and with the eviction around it, computes this step:
    refused, with the hint that says why."""
    from course_lib.exercises.lesson13a_what_generation_recomputes.attend_cached import (
        attend_cached_reference,
    )

    def wrapped(x, qkv, out, num_heads, past_k, past_v, position, window, sinks=0, rope=None):
        if past_k.shape[-2] >= sinks + window:  # full: the entry after the sinks leaves
            keep = [*range(sinks), *range(sinks + 1, past_k.shape[-2])]
            past_k, past_v = past_k[:, :, keep], past_v[:, :, keep]
        turn = None if rope is None else (lambda t, S: rope(t, position))
        return attend_cached_reference(x, qkv, out, num_heads, past_k, past_v, rope=turn)

    assert run(dataclasses.replace(ATTEND_ROLLING, forbidden=()), wrapped).passed
    verdict = run(ATTEND_ROLLING, wrapped)
    assert not verdict.passed and verdict.bug == "forbidden", verdict.message
    assert "attend_cached_reference" in verdict.message
    assert verdict.steps[0] == ATTEND_ROLLING.forbidden_hint


def test_the_mask_reference_is_the_courses_comparison_mask_and_the_loops():
    for T, window, sinks in [(8, 3, 0), (9, 3, 1), (10, 2, 3), (5, 5, 0), (1, 4, 2), (12, 1, 2)]:
        expected = sliding_window_mask_reference(T, window, sinks)
        assert torch.equal(expected, window_mask(T, window, sinks))
        assert torch.equal(expected, mask_by_loops(T, window, sinks))


@pytest.mark.parametrize("window,sinks", [(3, 0), (3, 1), (2, 2), (4, 1), (20, 1), (1, 0)])
def test_the_rolling_reference_is_the_whole_sequence_through_torchs_attention(window, sinks):
    """Fed one token at a time, the reference gives what the whole sequence gives through
    F.scaled_dot_product_attention with the window's mask, at every position."""
    g = torch.Generator().manual_seed(window * 10 + sinks)
    qkv, out = _layer(16, g, torch.float64)
    x = torch.randn(2, 14, 16, generator=g, dtype=torch.float64)
    with torch.no_grad():
        y, k, _ = rolled(attend_rolling_reference, x, qkv, out, 2, window, sinks,
                         rope_from_reference)  # fmt: skip
        q, kk, vv = (t.unflatten(-1, (2, -1)).transpose(1, 2) for t in qkv(x).split(16, -1))
        q, kk = rope_from_reference(q, 0), rope_from_reference(kk, 0)
        whole = F.scaled_dot_product_attention(
            q, kk, vv, attn_mask=mask_by_loops(14, window, sinks)
        )
        whole = out(whole.transpose(1, 2).flatten(-2))
    assert torch.allclose(y, whole, atol=1e-12)
    assert k.shape[-2] == min(14, sinks + window)


def test_no_cell_above_an_exercise_shows_its_solution():
    cells = nbformat.read(NOTEBOOK, as_version=4).cells
    for name, ready_made in (
        ("sliding_window_mask", ("window_mask(", "i - j <", "tril(-")),
        ("attend_rolling", ("attend_rolling_reference", "sinks + 1")),
    ):
        at = next(
            i for i, c in enumerate(cells) if c.cell_type == "code" and f"def {name}(" in c.source
        )
        above = "\n".join(c.source for c in cells[:at] if c.cell_type == "code")
        assert not any(word in above for word in ready_made), name


# ---------------------------------------------------------------- the mask, learner-style


def test_a_mask_with_i_minus_j_at_most_window_is_named():
    def wrong(T, window, sinks=0):
        i, j = torch.arange(T).unsqueeze(1), torch.arange(T).unsqueeze(0)
        return (j <= i) & ((i - j <= window) | (j < sinks))

    _check(SLIDING_WINDOW_MASK, wrong, "one_too_wide")


def test_a_mask_from_triu_with_diagonal_minus_window_plus_one_too_many_is_named():
    def wrong(T, window, sinks=0):
        ones = torch.ones(T, T, dtype=torch.bool)
        band = ones.tril() & ones.triu(-(window - 2))  # one diagonal short
        band[:, :sinks] |= ones.tril()[:, :sinks]
        return band

    _check(SLIDING_WINDOW_MASK, wrong, "one_too_narrow")


def test_a_band_without_the_causal_part_is_named():
    def wrong(T, window, sinks=0):
        pos = torch.arange(T)
        dist = (pos[:, None] - pos[None, :]).abs()
        sink = (pos[None, :] < sinks) & (pos[None, :] <= pos[:, None])
        return (dist < window) | sink

    _check(SLIDING_WINDOW_MASK, wrong, "not_causal")


def test_a_mask_that_forgets_the_sinks_is_named():
    def wrong(T, window, sinks=0):
        mask = torch.zeros(T, T, dtype=torch.bool)
        for i in range(T):
            mask[i, max(0, i - window + 1) : i + 1] = True
        return mask

    _check(SLIDING_WINDOW_MASK, wrong, "sinks_ignored")


def test_sink_columns_set_all_the_way_down_is_named():
    def wrong(T, window, sinks=0):
        mask = torch.ones(T, T, dtype=torch.bool).tril().triu(-(window - 1))
        mask[:, :sinks] = True
        return mask

    _check(SLIDING_WINDOW_MASK, wrong, "sinks_before_written")


def test_a_mask_indexed_key_then_query_is_named():
    def wrong(T, window, sinks=0):
        mask = torch.zeros(T, T, dtype=torch.bool)
        for q in range(T):
            for k in range(T):
                if k <= q and (q - k < window or k < sinks):
                    mask[k, q] = True
        return mask

    _check(SLIDING_WINDOW_MASK, wrong, "transposed")


def test_a_mask_made_of_ones_and_zeros_is_named():
    def wrong(T, window, sinks=0):
        i, j = torch.meshgrid(torch.arange(T), torch.arange(T), indexing="ij")
        return ((j <= i) & ((i - j < window) | (j < sinks))).float()

    _check(SLIDING_WINDOW_MASK, wrong, "float_mask")


def test_a_mask_of_minus_infinity_is_named():
    def wrong(T, window, sinks=0):
        i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
        keep = (j <= i) & ((i - j < window) | (j < sinks))
        return torch.where(keep, 0.0, -math.inf)

    _check(SLIDING_WINDOW_MASK, wrong, "additive_mask")


# ---------------------------------------------------------------- attend_rolling, learner-style


def _split(x, qkv, num_heads):
    B, _, D = x.shape
    return (t.view(B, 1, num_heads, D // num_heads).transpose(1, 2) for t in qkv(x).split(D, -1))


def _finish(out, q, k, v):
    y = F.scaled_dot_product_attention(q, k, v)
    return out(y.transpose(1, 2).flatten(-2))


def test_rope_at_the_caches_length_as_in_lesson_13a_is_named():
    def wrong(x, qkv, out, num_heads, past_k, past_v, position, window, sinks=0, rope=None):
        q, k, v = _split(x, qkv, num_heads)
        S = past_k.shape[2]
        if rope is not None:
            q, k = rope(q, S), rope(k, S)
        k, v = torch.cat([past_k, k], 2), torch.cat([past_v, v], 2)
        if k.shape[2] > sinks + window:
            k = torch.cat([k[:, :, :sinks], k[:, :, sinks + 1 :]], 2)
            v = torch.cat([v[:, :, :sinks], v[:, :, sinks + 1 :]], 2)
        return _finish(out, q, k, v), k, v

    _check(ATTEND_ROLLING, wrong, "rope_at_cache_length")


def test_a_cache_that_is_never_cut_is_named():
    def wrong(x, qkv, out, num_heads, past_k, past_v, position, window, sinks=0, rope=None):
        q, k, v = _split(x, qkv, num_heads)
        if rope is not None:
            q, k = rope(q, position), rope(k, position)
        k, v = torch.cat([past_k, k], 2), torch.cat([past_v, v], 2)
        return _finish(out, q, k, v), k, v

    _check(ATTEND_ROLLING, wrong, "never_trimmed")


def test_cutting_the_cache_after_the_attention_is_named():
    def wrong(x, qkv, out, num_heads, past_k, past_v, position, window, sinks=0, rope=None):
        q, k, v = _split(x, qkv, num_heads)
        if rope is not None:
            q, k = rope(q, position), rope(k, position)
        k, v = torch.cat([past_k, k], 2), torch.cat([past_v, v], 2)
        y = _finish(out, q, k, v)
        if k.size(2) > sinks + window:
            keep = [n for n in range(k.size(2)) if n != sinks]
            k, v = k[:, :, keep], v[:, :, keep]
        return y, k, v

    _check(ATTEND_ROLLING, wrong, "trimmed_after")


def test_dropping_the_first_entry_whatever_the_sinks_is_named():
    def wrong(x, qkv, out, num_heads, past_k, past_v, position, window, sinks=0, rope=None):
        q, k, v = _split(x, qkv, num_heads)
        if rope is not None:
            q, k = rope(q, position), rope(k, position)
        k, v = torch.cat([past_k, k], 2), torch.cat([past_v, v], 2)
        if k.shape[2] > sinks + window:
            k, v = k[:, :, 1:], v[:, :, 1:]  # pop the oldest
        return _finish(out, q, k, v), k, v

    _check(ATTEND_ROLLING, wrong, "sink_dropped")


def test_keeping_only_the_last_window_minus_one_is_named():
    def wrong(x, qkv, out, num_heads, past_k, past_v, position, window, sinks=0, rope=None):
        q, k, v = _split(x, qkv, num_heads)
        if rope is not None:
            q, k = rope(q, position), rope(k, position)
        k, v = torch.cat([past_k, k], 2), torch.cat([past_v, v], 2)
        if k.shape[2] >= sinks + window:  # >= where > was meant
            k = torch.cat([k[:, :, :sinks], k[:, :, sinks + 1 :]], 2)
            v = torch.cat([v[:, :, :sinks], v[:, :, sinks + 1 :]], 2)
        return _finish(out, q, k, v), k, v

    _check(ATTEND_ROLLING, wrong, "one_short")


def test_the_new_token_put_first_is_named():
    def wrong(x, qkv, out, num_heads, past_k, past_v, position, window, sinks=0, rope=None):
        q, k, v = _split(x, qkv, num_heads)
        if rope is not None:
            q, k = rope(q, position), rope(k, position)
        k, v = torch.cat([k, past_k], 2), torch.cat([v, past_v], 2)
        if k.shape[2] > sinks + window:
            k = torch.cat([k[:, :, :sinks], k[:, :, sinks + 1 :]], 2)
            v = torch.cat([v[:, :, :sinks], v[:, :, sinks + 1 :]], 2)
        return _finish(out, q, k, v), k, v

    _check(ATTEND_ROLLING, wrong, "new_first")


def test_the_rolled_layer_is_yours_once_written_and_the_courses_before():
    """rolled_yours_or_course (lesson 15a's trained-layer cell): a stub falls back to the
    course's attend_rolling and says so; a written step is used."""
    from course_lib.exercises.lesson15a_sliding_window import rolled_yours_or_course

    g = torch.Generator().manual_seed(3)
    qkv, out = _layer(16, g, torch.float32)
    x = torch.randn(1, 9, 16, generator=g)
    with torch.no_grad():
        (y, k, _), who = rolled_yours_or_course(stub, x, qkv, out, 2, 4, 1, rope_from_reference)
        expected = rolled(attend_rolling_reference, x, qkv, out, 2, 4, 1, rope_from_reference)
        assert who.startswith("the course's") and torch.equal(y, expected[0])
        (mine, _, _), who = rolled_yours_or_course(rolling_by_hand, x, qkv, out, 2, 4, 1,
                                                   rope_from_reference)  # fmt: skip
    assert who == "yours" and torch.allclose(mine, y, atol=1e-6) and k.shape[-2] == 5
