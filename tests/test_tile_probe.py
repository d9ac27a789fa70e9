"""Lessons 17a and 17b's probe against a softmax taken over every key a few query rows at a
time: such a function holds less than a tile at once, so only what it exponentiates tells
it from a tile loop. Each wrong version below is written as a learner would write it; the
right tile loops next to them (the notebook's and two written other ways) must still pass.
"""

import math

import pytest
import torch

from course_lib.exercises.lesson17a_online_softmax.online_attention import run_online
from course_lib.exercises.lesson17b_tiled_memory_and_backward import run_backward
from helpers import notebook_functions

INF = float("inf")


def _rows_of(mask, a, b):
    """Rows a to b of a mask whose query axis may be 1 (broadcast)."""
    return mask if mask.shape[-2] == 1 else mask[..., a:b, :]


def _scores(q, k, mask, a, b):
    s = q[..., a:b, :] @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., rows, T_k)
    return s if mask is None else s.masked_fill(~_rows_of(mask, a, b), -INF)


def row_by_row(q, k, v, mask=None, tile_size=64):
    """Each query row's whole softmax: a (1, T_k) row at a time, tile_size never used."""
    rows = [torch.softmax(_scores(q, k, mask, i, i + 1), dim=-1) @ v for i in range(q.shape[-2])]
    return torch.cat(rows, dim=-2)


def rows_by_hand(q, k, v, mask=None, tile_size=64):
    """tile_size query rows at a time, the softmax written out with exp and sum."""
    out = []
    for a in range(0, q.shape[-2], tile_size):
        s = _scores(q, k, mask, a, a + tile_size)
        e = torch.exp(s - s.amax(dim=-1, keepdim=True))
        out.append(e @ v / e.sum(dim=-1, keepdim=True))
    return torch.cat(out, dim=-2)


def tiles_softmaxed_then_merged(q, k, v, mask=None, tile_size=64):
    """A right tile loop that takes torch.softmax of each tile, then merges the tiles by their
    log-sum-exp: every exponential covers one tile of keys."""
    T_k, scale = k.shape[-2], 1 / math.sqrt(q.shape[-1])
    out = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)
    lse = torch.full(q.shape[:-1], -INF, dtype=q.dtype)
    for a in range(0, T_k, tile_size):
        s = q @ k[..., a : a + tile_size, :].transpose(-2, -1) * scale
        if mask is not None:
            s = s.masked_fill(~mask[..., a : a + tile_size], -INF)
        tile_lse = torch.logsumexp(s, dim=-1)  # (..., T_q): -inf where the tile is all masked
        new = torch.logaddexp(lse, tile_lse)
        seen = torch.isfinite(new)
        old_w = torch.where(seen, torch.exp(lse - new), torch.zeros_like(new))
        tile_w = torch.where(seen, torch.exp(tile_lse - new), torch.zeros_like(new))
        p = torch.nan_to_num(torch.softmax(s, dim=-1))  # an all-masked tile's row is 0
        out = out * old_w[..., None] + (p @ v[..., a : a + tile_size, :]) * tile_w[..., None]
        lse = new
    return out


@pytest.mark.parametrize("wrong", [row_by_row, rows_by_hand], ids=lambda f: f.__name__)
def test_a_softmax_over_every_key_a_few_rows_at_a_time_is_named(wrong):
    found = run_online(wrong)
    assert not found.passed and found.bug == "all keys at once", found.message
    assert "all 128 keys" in found.message and "(1, 2, " in found.message
    assert "tile by tile" in found.steps[0]


@pytest.mark.parametrize(
    "right",
    [notebook_functions("online_attention")["online_attention"], tiles_softmaxed_then_merged],
    ids=["the lesson's", "softmax of each tile, merged by log-sum-exp"],
)
def test_a_tile_loop_that_exponentiates_one_tile_at_a_time_passes(right):
    found = run_online(right)
    assert found.passed, found.message


def backward_row_by_row(q, k, v, out, lse, grad_out, mask=None, tile_size=64):
    """The recomputing backward, one query row at a time over every key."""
    scale = 1 / math.sqrt(q.shape[-1])
    delta = (grad_out * out).sum(dim=-1, keepdim=True)  # (..., T_q, 1)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    for i in range(q.shape[-2]):
        p = torch.exp(_scores(q, k, mask, i, i + 1) - lse[..., i : i + 1, None])  # (..., 1, T_k)
        g = grad_out[..., i : i + 1, :]
        dv += p.transpose(-2, -1) @ g
        ds = p * (g @ v.transpose(-2, -1) - delta[..., i : i + 1, :])
        dq[..., i : i + 1, :] = ds @ k * scale
        dk += ds.transpose(-2, -1) @ q[..., i : i + 1, :] * scale
    return dq, dk, dv


def test_a_backward_over_every_key_a_row_at_a_time_is_named():
    found = run_backward(backward_row_by_row)
    assert not found.passed and found.bug == "all keys at once", found.message
    assert "all 128 keys" in found.message and "one tile of weights" in found.steps[0]


def test_the_lessons_backward_still_passes():
    found = run_backward(notebook_functions("tiled_backward")["tiled_backward"])
    assert found.passed, found.message


def per_head_rows(q, k, v, mask=None, tile_size=64):
    """Each head on its own, 2-D, one query row's whole softmax at a time: the exponentials
    have only a key axis, (T_k,)."""
    *lead, T_q, d = q.shape
    q_, k_, v_ = (t.reshape(-1, *t.shape[-2:]) for t in (q, k, v))
    full = None if mask is None else torch.broadcast_to(mask, (*lead, T_q, k.shape[-2]))
    full = None if full is None else full.reshape(-1, T_q, k.shape[-2])
    out = torch.empty(q_.shape[0], T_q, v.shape[-1], dtype=q.dtype)
    for n in range(q_.shape[0]):
        for i in range(T_q):
            s = k_[n] @ q_[n, i] / math.sqrt(d)  # (T_k,)
            if full is not None:
                s = s.masked_fill(~full[n, i], -INF)
            out[n, i] = torch.softmax(s, -1) @ v_[n]
    return out.reshape(*lead, T_q, v.shape[-1])


def _rows_exponentiated(power: bool):
    def rows(q, k, v, mask=None, tile_size=64):
        out = []
        for i in range(q.shape[-2]):
            s = _scores(q, k, mask, i, i + 1)
            shifted = s - s.amax(dim=-1, keepdim=True)
            e = math.e**shifted if power else torch.exp(input=shifted)
            out.append(e @ v / e.sum(dim=-1, keepdim=True))
        return torch.cat(out, dim=-2)

    return rows


rows_by_power = _rows_exponentiated(power=True)  # a row at a time as math.e ** s
rows_by_keyword = _rows_exponentiated(power=False)  # a row at a time as torch.exp(input=s)


@pytest.mark.parametrize(
    "wrong", [per_head_rows, rows_by_power, rows_by_keyword], ids=["per head", "power", "keyword"]
)
def test_a_row_softmax_however_it_is_shaped_or_spelled_is_named(wrong):
    found = run_online(wrong)
    assert not found.passed and found.bug == "all keys at once", found.message


def flattened_tiles(q, k, v, mask=None, tile_size=64):
    """A right tile loop whose running maximum, sum and output keep every (batch, head,
    query) row on one flat axis: (B * H * T_q,), a size the probe must not take for keys."""
    *lead, T_q, d = q.shape
    T_k = k.shape[-2]
    q3, k3, v3 = (t.reshape(-1, *t.shape[-2:]) for t in (q, k, v))  # (N, T, width)
    full = None if mask is None else torch.broadcast_to(mask, (*lead, T_q, T_k))
    full = None if full is None else full.reshape(-1, T_q, T_k)
    rows = q3.shape[0] * T_q
    m = torch.full((rows,), -INF, dtype=q.dtype)
    total = torch.zeros_like(m)
    acc = torch.zeros(rows, v.shape[-1], dtype=q.dtype)
    for a in range(0, T_k, tile_size):
        s = q3 @ k3[:, a : a + tile_size].transpose(1, 2) / math.sqrt(d)  # (N, T_q, t)
        if full is not None:
            s = s.masked_fill(~full[..., a : a + tile_size], -INF)
        s = s.reshape(rows, -1)  # (rows, t)
        new = torch.maximum(m, s.amax(-1))
        shift = torch.where(torch.isinf(new), 0.0, new)
        c = torch.exp(m - shift)
        p = torch.exp(s - shift[:, None])
        total = total * c + p.sum(-1)
        pv = p.reshape(q3.shape[0], T_q, -1) @ v3[:, a : a + tile_size]  # (N, T_q, d_v)
        acc = acc * c[:, None] + pv.reshape(rows, -1)
        m = new
    return (acc / total[:, None]).reshape(*lead, T_q, v.shape[-1])


def test_a_tile_loop_on_flattened_rows_passes():
    found = run_online(flattened_tiles)
    assert found.passed, found.message
