"""Lesson 17b's exercise: learner-style mistakes get their hint.

Every wrong function here is written the way a learner would write it (a loop over tiles with
one line changed, a guard left out, a boundary counted wrong), not taken from the bug lists in
course_lib/exercises/lesson17b_tiled_memory_and_backward.py.
"""

import math
from pathlib import Path

import pytest
import torch
from test_exercises_lesson17a_online_softmax import _tiles, good  # a learner's online_attention

from course_lib.checks import check_tiled_backward
from course_lib.exercises.lesson17b_tiled_memory_and_backward import (
    TILED_BACKWARD,
    run_backward,
)
from helpers import lesson_cells
from helpers import verdict_failed_with_hint as _expect

NOTEBOOK = (
    Path(__file__).resolve().parent.parent / "notebooks" / "17b_tiled_memory_and_backward.ipynb"
)
INF = float("inf")


# ---------------------------------------------------------------- the exercise


# ---------------------------------------------------------------- tiled_backward


def backward_good(q, k, v, out, lse, grad_out, mask=None, tile_size=64):
    c = 1 / math.sqrt(q.shape[-1])
    delta = (grad_out * out).sum(-1)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    for a, b in _tiles(k.shape[-2], tile_size):
        s = c * q @ k[..., a:b, :].transpose(-2, -1)
        if mask is not None:
            s = s.masked_fill(~mask[..., a:b], -INF)
        p = torch.exp(s - lse.unsqueeze(-1))
        dv[..., a:b, :] = p.transpose(-2, -1) @ grad_out
        ds = p * (grad_out @ v[..., a:b, :].transpose(-2, -1) - delta.unsqueeze(-1))
        dq = dq + c * ds @ k[..., a:b, :]
        dk[..., a:b, :] = c * ds.transpose(-2, -1) @ q
    return dq, dk, dv


def _backward(**change):
    """backward_good with one learner's mistake in it (each test below says which)."""

    def fn(q, k, v, out, lse, grad_out, mask=None, tile_size=64):
        c = 1 / math.sqrt(q.shape[-1])
        delta = (grad_out * out).sum(-1, keepdim=True)
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        stops = range(0, k.shape[-2], tile_size)
        if change.get("whole_tiles_only"):
            stops = range(0, k.shape[-2] - tile_size + 1, tile_size)
        for a in stops:
            b = a + tile_size
            s = q @ k[..., a:b, :].transpose(-2, -1)
            if not change.get("unscaled_scores"):
                s = s * c
            if mask is not None and not change.get("no_mask"):
                s = s.masked_fill(~mask[..., a:b], -INF)
            if change.get("softmax_per_tile"):
                p = torch.softmax(s, dim=-1).nan_to_num(0.0)
            else:
                p = torch.exp(s - lse[..., None])
            dp = grad_out @ v[..., a:b, :].transpose(-2, -1)
            if change.get("no_delta"):
                ds = p * dp
            elif change.get("delta_of_the_tile"):
                ds = p * (dp - (p * dp).sum(-1, keepdim=True))
            else:
                ds = p * (dp - delta)
            f = 1.0 if change.get("no_scale_in_gradients") else c
            dv[..., a:b, :] = p.transpose(-2, -1) @ grad_out
            dq = dq + ds @ k[..., a:b, :] * f
            dk[..., a:b, :] = ds.transpose(-2, -1) @ q * f
        return dq, dk, dv

    return fn


def test_the_learners_right_backward_passes():
    assert run_backward(backward_good).passed
    assert run_backward(_backward()).passed


@pytest.mark.parametrize(
    "change,bug",
    [
        ("no_delta", "no_delta"),
        ("softmax_per_tile", "softmax_per_tile"),
        ("no_scale_in_gradients", "no_scale"),
        ("unscaled_scores", "scores_unscaled"),
        ("no_mask", "mask_ignored"),
        ("whole_tiles_only", "last_tile_dropped"),
        ("delta_of_the_tile", "delta_of_one_tile"),
    ],
)
def test_each_backward_mistake_gets_its_hint(change, bug):
    _expect(run_backward(_backward(**{change: True})), TILED_BACKWARD, bug)


def test_a_backward_that_rebuilds_the_whole_weight_matrix_is_caught():
    def whole(q, k, v, out, lse, grad_out, mask=None, tile_size=64):
        return backward_good(q, k, v, out, lse, grad_out, mask, tile_size=k.shape[-2])

    found = run_backward(whole)
    assert not found.passed and found.bug == "whole matrix", found.message
    assert "(1, 2, 80, 128)" in found.message


def test_a_backward_that_rebuilds_each_heads_weights_is_caught():
    def per_head(q, k, v, out, lse, grad_out, mask=None, tile_size=64):
        *lead, T_q, d = q.shape
        T_k = k.shape[-2]
        flat = [t.reshape(-1, *t.shape[-2:]) for t in (q, k, v, out, grad_out)]
        lse_ = lse.reshape(-1, T_q)
        if mask is not None:
            mask = torch.broadcast_to(mask, (*lead, T_q, T_k)).reshape(-1, T_q, T_k)
        grads = []
        for head in range(flat[0].shape[0]):
            q_, k_, v_, o_, do_ = (t[head] for t in flat)
            s = q_ @ k_.T / math.sqrt(d)  # (T_q, T_k): one head's every score
            if mask is not None:
                s = s.masked_fill(~mask[head], -INF)
            p = torch.exp(s - lse_[head][:, None])
            ds = p * (do_ @ v_.T - (do_ * o_).sum(-1, keepdim=True))
            grads.append((ds @ k_ / math.sqrt(d), ds.T @ q_ / math.sqrt(d), p.T @ do_))
        dq, dk, dv = (torch.stack(g) for g in zip(*grads, strict=True))  # (heads, T, width)
        return dq.reshape(q.shape), dk.reshape(k.shape), dv.reshape(v.shape)

    found = run_backward(per_head)
    assert not found.passed and found.bug == "whole matrix", found.message
    assert "(80, 128)" in found.message and "one tile of weights" in found.steps[0]


def test_a_backward_through_the_courses_flash_attention_is_named():
    from course_lib.tiled_attention import flash_attention

    def through_flash(q, k, v, out, lse, grad_out, mask=None, tile_size=64):
        with torch.enable_grad():
            q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
            found = flash_attention(q, k, v, mask, tile_size=tile_size)
            return torch.autograd.grad(found, (q, k, v), grad_out)

    found = run_backward(through_flash)
    assert not found.passed and found.bug == "the course's loop", found.message
    assert "flash_attention" in found.message


def test_a_backward_that_autograd_takes_through_the_forward_is_named():
    # exercise 1's loop differentiated by autograd: right gradients, no backward written
    def through_autograd(q, k, v, out, lse, grad_out, mask=None, tile_size=64):
        with torch.enable_grad():
            q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
            return torch.autograd.grad(good(q, k, v, mask, tile_size), (q, k, v), grad_out)

    def through_vjp(q, k, v, out, lse, grad_out, mask=None, tile_size=64):
        _, vjp = torch.func.vjp(lambda a, b, c: good(a, b, c, mask, tile_size), q, k, v)
        return vjp(grad_out)

    for fn in (through_autograd, through_vjp):
        found = run_backward(fn)
        assert not found.passed and found.bug == "autograd", (fn.__name__, found.message)
        assert "five products" in found.steps[0]


def test_the_exercise_text_warns_off_autograd():
    cells = lesson_cells(NOTEBOOK)
    text = " ".join("\n".join(c.source for c in cells if c.cell_type == "markdown").split())
    assert "would pass and teach nothing" in text
