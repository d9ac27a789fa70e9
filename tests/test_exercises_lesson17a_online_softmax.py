"""Lesson 17a's exercise: learner-style mistakes get their hint.

Every wrong function here is written the way a learner would write it (a loop over tiles with
one line changed, a guard left out, a boundary counted wrong), not taken from the bug lists in
course_lib/exercises/lesson17a_online_softmax/.
"""

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from course_lib.checks import check_online_attention
from course_lib.exercises.core import run
from course_lib.exercises.lesson17a_online_softmax import (
    GRADIENTS,
    ONLINE_ATTENTION,
    gradients_of,
    run_online,
)
from helpers import lesson_cells
from helpers import verdict_failed_with_hint as _expect

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "17a_online_softmax.ipynb"
INF = float("inf")


# ---------------------------------------------------------------- every exercise


def test_every_gradient_bug_runs_on_every_case_and_none_is_dead():
    # GRADIENTS is the part of the check that all_exercises() does not list: the forward's
    # bugs are tests/test_every_exercise.py's, with every other exercise's
    for case in GRADIENTS.case_list():
        for bug in GRADIENTS.bugs:
            bug.wrong(*case.args, **case.kwargs)
    for bug in GRADIENTS.bugs:
        found = run(GRADIENTS, bug.wrong)
        assert not found.passed and found.bug == bug.name, (bug.name, found.message)


def test_the_gradient_bugs_have_a_right_forward():
    # each is a mistake that only the backward shows: the forward check passes them
    for bug in GRADIENTS.bugs:
        forward = bug.wrong.forward
        assert run(ONLINE_ATTENTION, forward).passed, bug.name


# ---------------------------------------------------------------- online_attention


def _tiles(T_k, tile_size):
    return [(s, min(s + tile_size, T_k)) for s in range(0, T_k, tile_size)]


def good(q, k, v, mask=None, tile_size=64):
    """A right one, as a learner writes it, for the wrong versions below to change."""
    T_k, d = k.shape[-2], q.shape[-1]
    m = torch.full(q.shape[:-1], -INF, dtype=q.dtype)
    total = torch.zeros(q.shape[:-1], dtype=q.dtype)
    acc = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)
    for start, stop in _tiles(T_k, tile_size):
        s = q @ k[..., start:stop, :].transpose(-2, -1) / math.sqrt(d)
        if mask is not None:
            s = s.masked_fill(~mask[..., start:stop], -INF)
        m_new = torch.maximum(m, s.max(dim=-1).values)
        shift = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        p = torch.exp(s - shift.unsqueeze(-1))
        fix = torch.exp(m - shift)
        total = total * fix + p.sum(-1)
        acc = acc * fix.unsqueeze(-1) + p @ v[..., start:stop, :]
        m = m_new
    return acc / total.unsqueeze(-1)


def test_the_learners_right_version_passes():
    assert run_online(good).passed


def sum_not_rescaled(q, k, v, mask=None, tile_size=64):
    # the accumulator is corrected when the max rises, the running sum is not
    d = q.shape[-1]
    m = torch.full(q.shape[:-1], -INF, dtype=q.dtype)
    total = torch.zeros(q.shape[:-1], dtype=q.dtype)
    acc = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)
    for start in range(0, k.shape[-2], tile_size):
        s = q @ k[..., start : start + tile_size, :].transpose(-2, -1) / math.sqrt(d)
        if mask is not None:
            s = s.masked_fill(~mask[..., start : start + tile_size], -INF)
        m_new = torch.maximum(m, s.amax(-1))
        safe = torch.where(m_new == -INF, 0.0, m_new)
        p = torch.exp(s - safe[..., None])
        acc = acc * torch.exp(m - safe)[..., None] + p @ v[..., start : start + tile_size, :]
        total = total + p.sum(-1)
        m = m_new
    return acc / total[..., None]


def test_forgetting_to_rescale_the_running_sum():
    _expect(run_online(sum_not_rescaled), ONLINE_ATTENTION, "sum_not_rescaled")


def stale_factor(q, k, v, mask=None, tile_size=64):
    # m is updated first, so the correction exp(m - m_new) is computed from the new m twice:
    # it is always 1 and nothing earlier is ever corrected
    d = q.shape[-1]
    m = torch.full(q.shape[:-1], -INF, dtype=q.dtype)
    total = torch.zeros_like(m)
    acc = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)
    for start in range(0, k.shape[-2], tile_size):
        kt, vt = k[..., start : start + tile_size, :], v[..., start : start + tile_size, :]
        s = (q @ kt.transpose(-2, -1)) / math.sqrt(d)
        if mask is not None:
            s = s.masked_fill(~mask[..., start : start + tile_size], -INF)
        m = torch.maximum(m, s.amax(-1))
        m_new = m
        safe = torch.where(torch.isinf(m_new), 0.0, m_new)
        fix = torch.exp(torch.where(torch.isinf(m), 0.0, m) - safe)
        p = torch.exp(s - safe[..., None])
        total = total * fix + p.sum(-1)
        acc = acc * fix[..., None] + p @ vt
    return acc / total[..., None]


def test_updating_the_max_before_the_correction_corrects_nothing():
    _expect(run_online(stale_factor), ONLINE_ATTENTION, "never_corrected")


def inverted_factor(q, k, v, mask=None, tile_size=64):
    # the correction written the other way up, exp(m_new - m), guarded for the first tile
    d = q.shape[-1]
    m = torch.full(q.shape[:-1], -INF, dtype=q.dtype)
    total = torch.zeros_like(m)
    acc = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)
    for start in range(0, k.shape[-2], tile_size):
        s = q @ k[..., start : start + tile_size, :].mT / d**0.5
        if mask is not None:
            s = s.masked_fill(~mask[..., start : start + tile_size], -INF)
        m_new = torch.maximum(m, s.amax(-1))
        safe = torch.where(torch.isinf(m_new), 0.0, m_new)
        fix = torch.where(torch.isinf(m), 1.0, torch.exp(safe - m))
        p = torch.exp(s - safe[..., None])
        total = total * fix + p.sum(-1)
        acc = acc * fix[..., None] + p @ v[..., start : start + tile_size, :]
        m = m_new
    return acc / total[..., None]


def test_rescaling_by_the_inverted_factor():
    _expect(run_online(inverted_factor), ONLINE_ATTENTION, "factor_inverted")


def acc_not_rescaled(q, k, v, mask=None, tile_size=64):
    d = q.shape[-1]
    m = torch.full(q.shape[:-1], -INF, dtype=q.dtype)
    total = torch.zeros_like(m)
    acc = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)
    for start in range(0, k.shape[-2], tile_size):
        s = q @ k[..., start : start + tile_size, :].transpose(-1, -2) / math.sqrt(d)
        if mask is not None:
            s = s.masked_fill(~mask[..., start : start + tile_size], -INF)
        m_new = torch.maximum(m, s.amax(-1))
        safe = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(s - safe[..., None])
        total = total * torch.exp(m - safe) + p.sum(-1)
        acc = acc + p @ v[..., start : start + tile_size, :]  # forgot: acc * exp(m - m_new)
        m = m_new
    return acc / total[..., None]


def test_forgetting_to_rescale_the_output_accumulator():
    _expect(run_online(acc_not_rescaled), ONLINE_ATTENTION, "acc_not_rescaled")


def normalised_each_tile(q, k, v, mask=None, tile_size=64):
    # divides by the running sum after every tile instead of once at the end
    d = q.shape[-1]
    m = torch.full(q.shape[:-1], -INF, dtype=q.dtype)
    total = torch.zeros_like(m)
    out = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)
    for start in range(0, k.shape[-2], tile_size):
        s = q @ k[..., start : start + tile_size, :].transpose(-2, -1) / math.sqrt(d)
        if mask is not None:
            s = s.masked_fill(~mask[..., start : start + tile_size], -INF)
        m_new = torch.maximum(m, s.amax(-1))
        safe = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(s - safe[..., None])
        fix = torch.exp(m - safe)
        total = total * fix + p.sum(-1)
        out = (out * fix[..., None] + p @ v[..., start : start + tile_size, :]) / total.clamp(
            min=1e-30
        )[..., None]
        m = m_new
    return out


def test_dividing_by_the_sum_after_each_tile():
    _expect(run_online(normalised_each_tile), ONLINE_ATTENTION, "divided_each_tile")


def drops_the_last_tile(q, k, v, mask=None, tile_size=64):
    # counts whole tiles only: the keys past the last full tile are never read
    d = q.shape[-1]
    m = torch.full(q.shape[:-1], -INF, dtype=q.dtype)
    total = torch.zeros_like(m)
    acc = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)
    for t in range(max(k.shape[-2] // tile_size, 1)):
        a, b = t * tile_size, (t + 1) * tile_size
        s = q @ k[..., a:b, :].transpose(-2, -1) / math.sqrt(d)
        if mask is not None:
            s = s.masked_fill(~mask[..., a:b], -INF)
        m_new = torch.maximum(m, s.amax(-1))
        safe = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(s - safe[..., None])
        fix = torch.exp(m - safe)
        total = total * fix + p.sum(-1)
        acc = acc * fix[..., None] + p @ v[..., a:b, :]
        m = m_new
    return acc / total[..., None]


def test_an_off_by_one_boundary_that_drops_the_last_partial_tile():
    found = _expect(run_online(drops_the_last_tile), ONLINE_ATTENTION, "last_tile_dropped")
    assert "does not divide" in found.message  # the first case where it shows


def no_guard(q, k, v, mask=None, tile_size=64):
    # m starts at -inf and is used as it is: a tile with no allowed key gives -inf - -inf
    d = q.shape[-1]
    m = torch.full(q.shape[:-1], -INF, dtype=q.dtype)
    total = torch.zeros_like(m)
    acc = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)
    for start in range(0, k.shape[-2], tile_size):
        s = q @ k[..., start : start + tile_size, :].transpose(-2, -1) / math.sqrt(d)
        if mask is not None:
            s = s.masked_fill(~mask[..., start : start + tile_size], -INF)
        m_new = torch.maximum(m, s.amax(-1))
        p = torch.exp(s - m_new[..., None])
        fix = torch.exp(m - m_new)
        total = total * fix + p.sum(-1)
        acc = acc * fix[..., None] + p @ v[..., start : start + tile_size, :]
        m = m_new
    return acc / total[..., None]


def test_a_minus_inf_max_on_a_fully_masked_tile_gives_nan():
    found = _expect(run_online(no_guard), ONLINE_ATTENTION, "nan_empty_tile")
    assert "first 5 keys masked" in found.message


def unscaled(q, k, v, mask=None, tile_size=64):
    m = torch.full(q.shape[:-1], -INF, dtype=q.dtype)
    total = torch.zeros_like(m)
    acc = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)
    for start in range(0, k.shape[-2], tile_size):
        s = q @ k[..., start : start + tile_size, :].transpose(-2, -1)  # no 1/sqrt(d)
        if mask is not None:
            s = s.masked_fill(~mask[..., start : start + tile_size], -INF)
        m_new = torch.maximum(m, s.amax(-1))
        safe = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(s - safe[..., None])
        fix = torch.exp(m - safe)
        total = total * fix + p.sum(-1)
        acc = acc * fix[..., None] + p @ v[..., start : start + tile_size, :]
        m = m_new
    return acc / total[..., None]


def test_forgetting_the_scale():
    _expect(run_online(unscaled), ONLINE_ATTENTION, "no_scale")


def no_running_max(q, k, v, mask=None, tile_size=64):
    # exp of the raw scores, summed tile by tile: right until a score is large
    total = torch.zeros(q.shape[:-1], dtype=q.dtype)
    acc = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)
    for start in range(0, k.shape[-2], tile_size):
        s = q @ k[..., start : start + tile_size, :].transpose(-2, -1) / math.sqrt(q.shape[-1])
        e = torch.exp(s)
        if mask is not None:
            e = e * mask[..., start : start + tile_size]
        total = total + e.sum(-1)
        acc = acc + e @ v[..., start : start + tile_size, :]
    return acc / total[..., None]


def test_no_running_max_overflows_on_large_scores():
    found = _expect(run_online(no_running_max), ONLINE_ATTENTION, "no_max")
    assert "large scores" in found.message


def max_from_zero(q, k, v, mask=None, tile_size=64):
    # starts the running max at 0, so no guard is needed for empty tiles
    m = torch.zeros(q.shape[:-1], dtype=q.dtype)
    total = torch.zeros_like(m)
    acc = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)
    for start in range(0, k.shape[-2], tile_size):
        s = q @ k[..., start : start + tile_size, :].transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            s = s.masked_fill(~mask[..., start : start + tile_size], -INF)
        m_new = torch.maximum(m, s.amax(-1))
        p = torch.exp(s - m_new[..., None])
        fix = torch.exp(m - m_new)
        total = total * fix + p.sum(-1)
        acc = acc * fix[..., None] + p @ v[..., start : start + tile_size, :]
        m = m_new
    return acc / total[..., None]


def test_a_running_max_that_starts_at_zero_underflows_on_low_scores():
    found = _expect(run_online(max_from_zero), ONLINE_ATTENTION, "max_from_zero")
    assert "far below 0" in found.message


def mask_ignored(q, k, v, mask=None, tile_size=64):
    return good(q, k, v, None, tile_size)  # the mask argument is accepted and never used


def test_a_mask_that_is_never_applied():
    found = _expect(run_online(mask_ignored), ONLINE_ATTENTION, "mask_ignored")
    assert "causal mask" in found.message


def test_the_whole_matrix_is_caught_even_with_right_numbers():
    def whole(q, k, v, mask=None, tile_size=64):  # lesson 02b's attention, tiles never used
        s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            s = s.masked_fill(~mask, -INF)
        return torch.softmax(s, dim=-1) @ v

    def chunked(q, k, v, mask=None, tile_size=64):  # tiles for show, then all scores at once
        s = torch.cat(
            [q @ k[..., a:b, :].transpose(-2, -1) for a, b in _tiles(k.shape[-2], tile_size)],
            dim=-1,
        ) / math.sqrt(q.shape[-1])
        if mask is not None:
            s = s.masked_fill(~mask, -INF)
        return torch.softmax(s, dim=-1) @ v

    for fn in (whole, chunked):
        found = run_online(fn)
        assert not found.passed and found.bug == "whole matrix", found.message
        assert "(1, 2, 80, 128)" in found.message and "tile by tile" in found.steps[0]


def per_head(q, k, v, mask=None, tile_size=64):
    """Lesson 02b's whole softmax, one head at a time: tile_size is never used."""
    *lead, T_q, d = q.shape
    T_k = k.shape[-2]
    q_, k_, v_ = (t.reshape(-1, *t.shape[-2:]) for t in (q, k, v))  # (heads, T, width)
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k)).reshape(-1, T_q, T_k)
    rows = []
    for head in range(q_.shape[0]):
        s = q_[head] @ k_[head].T / math.sqrt(d)  # (T_q, T_k): one head's every score
        if mask is not None:
            s = s.masked_fill(~mask[head], -INF)
        rows.append(torch.softmax(s, dim=-1) @ v_[head])
    return torch.stack(rows).reshape(*lead, T_q, v.shape[-1])


def test_the_whole_matrix_one_head_at_a_time_is_caught():
    found = run_online(per_head)
    assert not found.passed and found.bug == "whole matrix", found.message
    assert "(80, 128)" in found.message and "tile by tile" in found.steps[0]


def test_calling_torchs_kernel_is_named():
    found = run_online(
        lambda q, k, v, mask=None, tile_size=64: F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask
        )
    )
    assert not found.passed and found.bug == "torch's kernel", found.message
    assert "teaches nothing" in found.steps[0]


@pytest.mark.parametrize("call", ["tiled_forward", "tiled_attention", "flash_attention"])
def test_calling_the_courses_tiled_code_is_named(call):
    # the lesson imports these for its own cells: a one-line wrapper passes every number
    from course_lib import tiled_attention

    course = getattr(tiled_attention, call)

    def wrapper(q, k, v, mask=None, tile_size=64):
        out = course(q, k, v, mask, tile_size=tile_size)
        return out[0] if isinstance(out, tuple) else out

    found = run_online(wrapper)
    assert not found.passed and found.bug == "the course's loop", found.message
    assert call in found.message and "teaches nothing" in found.steps[0]


# ------------------------------------------------ online_attention: what only the gradient shows


def nan_patched(q, k, v, mask=None, tile_size=64):
    # NaN from an empty tile replaced after the fact
    d = q.shape[-1]
    m = torch.full(q.shape[:-1], -INF, dtype=q.dtype)
    total = torch.zeros_like(m)
    acc = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)
    for start in range(0, k.shape[-2], tile_size):
        s = q @ k[..., start : start + tile_size, :].transpose(-2, -1) / math.sqrt(d)
        if mask is not None:
            s = s.masked_fill(~mask[..., start : start + tile_size], -INF)
        m_new = torch.maximum(m, s.amax(-1))
        p = torch.nan_to_num(torch.exp(s - m_new[..., None]), nan=0.0)
        fix = torch.nan_to_num(torch.exp(m - m_new), nan=0.0)
        total = total * fix + p.sum(-1)
        acc = acc * fix[..., None] + p @ v[..., start : start + tile_size, :]
        m = m_new
    return acc / total[..., None]


def test_nan_patched_after_the_fact_passes_forward_and_backward():
    # the NaN of an empty tile reaches the backward only at masked scores, whose gradient
    # masked_fill sets to 0: patching it afterwards is clumsy, not wrong
    assert run_online(nan_patched).passed


def under_no_grad(q, k, v, mask=None, tile_size=64):
    with torch.no_grad():  # "the memory claim is made under no_grad", taken too far
        return good(q, k, v, mask, tile_size)


def test_a_loop_under_no_grad_carries_no_gradient():
    _expect(run_online(under_no_grad), GRADIENTS, "no_graph")


def through_python_floats(q, k, v, mask=None, tile_size=64):
    # the output rebuilt from Python numbers: right values, no graph behind them
    return torch.tensor(good(q, k, v, mask, tile_size).tolist(), dtype=q.dtype)


def test_an_output_rebuilt_from_python_numbers_carries_no_gradient():
    _expect(run_online(through_python_floats), GRADIENTS, "no_graph")


def detached_sum(q, k, v, mask=None, tile_size=64):
    # the running sum treated as a constant ("it is only a normaliser")
    d = q.shape[-1]
    m = torch.full(q.shape[:-1], -INF, dtype=q.dtype)
    total = torch.zeros_like(m)
    acc = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)
    for start in range(0, k.shape[-2], tile_size):
        s = q @ k[..., start : start + tile_size, :].transpose(-2, -1) / math.sqrt(d)
        if mask is not None:
            s = s.masked_fill(~mask[..., start : start + tile_size], -INF)
        m_new = torch.maximum(m, s.amax(-1))
        safe = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(s - safe[..., None])
        fix = torch.exp(m - safe)
        total = (total * fix + p.sum(-1)).detach()
        acc = acc * fix[..., None] + p @ v[..., start : start + tile_size, :]
        m = m_new
    return acc / total[..., None]


def test_a_detached_running_sum_gives_wrong_gradients():
    _expect(run_online(detached_sum), GRADIENTS, "sum_detached")


def test_a_detached_running_max_is_fine():
    # the output does not depend on m (it cancels), so detaching it changes no gradient
    def detached_max(q, k, v, mask=None, tile_size=64):
        m = torch.full(q.shape[:-1], -INF, dtype=q.dtype)
        total = torch.zeros_like(m)
        acc = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)
        for start, stop in _tiles(k.shape[-2], tile_size):
            s = q @ k[..., start:stop, :].transpose(-2, -1) / math.sqrt(q.shape[-1])
            if mask is not None:
                s = s.masked_fill(~mask[..., start:stop], -INF)
            m_new = torch.maximum(m, s.amax(-1)).detach()
            safe = torch.where(torch.isinf(m_new), 0.0, m_new)
            p, fix = torch.exp(s - safe[..., None]), torch.exp(m - safe)
            total, acc = total * fix + p.sum(-1), acc * fix[..., None] + p @ v[..., start:stop, :]
            m = m_new
        return acc / total[..., None]

    assert run_online(detached_max).passed


def test_gradients_of_compares_with_torchs_autograd():
    q, k, v = (torch.randn(2, 5, 4, generator=torch.Generator().manual_seed(i)) for i in range(3))
    grad_out = torch.randn(2, 5, 4)
    ours = gradients_of(good)(q, k, v, grad_out, tile_size=2)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    theirs = torch.autograd.grad(F.scaled_dot_product_attention(q, k, v), (q, k, v), grad_out)
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, b)


def test_the_exercise_text_warns_off_torchs_kernel_and_names_the_courses_tiled_code():
    cells = lesson_cells(NOTEBOOK)
    text = " ".join("\n".join(c.source for c in cells if c.cell_type == "markdown").split())
    assert "would pass the check and teach nothing" in text
    # every function of course_lib.tiled_attention the check refuses is named (a fresh reader
    # found two of the four)
    for name in ("tile_steps", "tiled_attention", "tiled_forward", "flash_attention"):
        assert f"`{name}`" in text, name


def test_the_stand_in_for_an_unwritten_online_attention_is_the_courses_tile_loop():
    # lesson 17b measures a tile loop's memory: torch's kernel, the check's reference, is none
    from course_lib.tiled_attention import tiled_attention

    assert ONLINE_ATTENTION.stand_in is tiled_attention


def test_the_probe_limit_lies_between_every_tile_and_one_heads_matrix():
    from course_lib.exercises.lesson17a_online_softmax.inputs import PROBE, WHOLE

    B, H, T_q, T_k, d, tile = (PROBE[key] for key in ("B", "H", "T_q", "T_k", "d", "tile_size"))
    # scores of a tile; k and v; the maxima of every tile, if kept
    largest_tile = max(B * H * T_q * tile, B * H * T_k * d, B * H * T_q * (T_k // tile))
    assert WHOLE == T_q * T_k and WHOLE >= 4 * largest_tile
    # no axis of a tile loop's tensors, however reshaped, is as long as the key axis
    assert T_k not in {d, tile, T_q, H * T_q, B * H * T_q, T_q * tile, H * T_q * tile}
