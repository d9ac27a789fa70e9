"""Attention over key tiles with a running maximum and sum: FlashAttention's idea on a CPU
(lessons 17a and 17b).

softmax(s) v for one query row can be built tile by tile. After the keys of tiles 1..j the
row keeps m (the largest score so far), l (the sum of exp(score - m)) and acc (the sum of
exp(score - m) v). A new tile with a larger maximum m' makes every earlier term too big by
exp(m' - m), so l and acc are multiplied by exp(m - m') before the tile's own terms are
added. At the end acc / l is the softmax-weighted average, exactly; no (T_q, T_k) matrix
exists at any time, only (T_q, tile) blocks of scores. The backward does the same from
the saved log-sum-exp m + log l, recomputing each tile instead of storing it.
"""

from collections import deque
from dataclasses import dataclass

import torch

from course_lib._validation import broadcast_shape, positive_int
from course_lib.attention import check_mask, check_qkv, scale_factor

TILE_SIZE = 64  # keys per tile unless told: the scores block is (T_q, 64)


@dataclass(frozen=True)
class TileStep:
    """The running state after one key tile, as tile_steps yields it (lesson 17a)."""

    index: int  # which tile, from 0
    start: int  # its keys are start .. stop - 1
    stop: int
    scores: torch.Tensor  # (..., T_q, stop - start) this tile's scaled scores, -inf if masked
    running_max: torch.Tensor  # (..., T_q) m: the largest score seen so far in each row
    rescale: torch.Tensor  # (..., T_q) exp(m_before - m): the correction of earlier terms
    running_sum: torch.Tensor  # (..., T_q) l: sum of exp(score - m) over the keys seen
    output: torch.Tensor  # (..., T_q, d_v) acc / l: attention over the keys seen so far


def _check(q, k, v, mask, causal, tile_size, scale) -> float:
    """Validate the arguments of the tiled functions and return the scores' factor."""
    scores_shape = check_qkv(q, k, v)
    positive_int("tile_size", tile_size)
    if not isinstance(causal, bool):
        raise TypeError(f"causal: expected True or False, got {type(causal).__name__} {causal!r}")
    if causal and mask is not None:
        raise ValueError(
            "mask: expected None when causal=True (causal builds its own mask), got a tensor"
        )
    if mask is not None:
        check_mask(mask, scores_shape)
    return scale_factor(scale, q.shape[-1])


def _tile_mask(mask, causal: bool, T_q: int, start: int, stop: int, device):
    """Which of the tile's keys each query may see: (..., T_q, stop - start) bool, or None."""
    if causal:  # query i sees keys 0..i, as is_causal=True in F.scaled_dot_product_attention
        rows = torch.arange(T_q, device=device)[:, None]  # (T_q, 1)
        return rows >= torch.arange(start, stop, device=device)[None, :]  # (T_q, t)
    if mask is None:
        return None
    return mask[..., start:stop]  # (..., T_q or 1, t)


def _tile_scores(q, k, mask, causal, start, stop, factor):
    """Scaled scores of all queries against keys start..stop-1, -inf where masked."""
    scores = (
        q @ k[..., start:stop, :].transpose(-2, -1)
    ) * factor  # (..., T_q, d) @ (..., d, t) -> (..., T_q, t)
    allowed = _tile_mask(mask, causal, q.shape[-2], start, stop, q.device)
    return scores if allowed is None else scores.masked_fill(~allowed, float("-inf"))


def _tile_ranges(T_q: int, T_k: int, tile_size: int, causal: bool):
    """(start, stop) of each key tile; with causal, tiles that every query is before are
    skipped, as FlashAttention skips blocks above the diagonal."""
    last = min(T_k, T_q) if causal else T_k
    return [(s, min(s + tile_size, T_k)) for s in range(0, last, tile_size)]


def _online_softmax(q, k, v, mask, causal: bool, tile_size: int, factor: float):
    """Yield (index, start, stop, scores, m, rescale, l, acc) after each key tile."""
    batch = broadcast_shape(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    rows = (*batch, q.shape[-2])  # (..., T_q)
    m = q.new_full(rows, float("-inf"))  # (..., T_q) the running maximum
    total = q.new_zeros(rows)  # (..., T_q) l, the running sum of exp(score - m)
    acc = q.new_zeros((*rows, v.shape[-1]))  # (..., T_q, d_v)
    tiles = _tile_ranges(q.shape[-2], k.shape[-2], tile_size, causal)
    for index, (start, stop) in enumerate(tiles):
        scores = _tile_scores(q, k, mask, causal, start, stop, factor)  # (..., T_q, t)
        m_new = torch.maximum(m, scores.amax(dim=-1))  # (..., T_q)
        # a row that has met no allowed key yet keeps m = -inf; shifting it by 0 instead
        # keeps exp(-inf - (-inf)) = NaN out, and its terms stay exp(-inf) = 0
        shift = m_new.masked_fill(m_new == float("-inf"), 0.0)  # (..., T_q)
        p = torch.exp(scores - shift[..., None])  # (..., T_q, t)
        rescale = torch.exp(m - shift)  # (..., T_q), 0 where the row had met no key
        total = total * rescale + p.sum(dim=-1)  # (..., T_q)
        acc = acc * rescale[..., None] + p @ v[..., start:stop, :]  # (..., T_q, d_v)
        m = m_new
        yield index, start, stop, scores, m, rescale, total, acc


def _forward(q, k, v, mask, causal, tile_size, factor):
    # run every tile, keeping only the last state (a list would keep every tile's scores)
    states = deque(_online_softmax(q, k, v, mask, causal, tile_size, factor), maxlen=1)
    *_, m, _, total, acc = states.pop()
    return acc / total[..., None], m + torch.log(total)  # (..., T_q, d_v), (..., T_q)


def tiled_forward(q, k, v, mask=None, *, causal=False, tile_size=TILE_SIZE, scale=True):
    """softmax(q k^T * factor) v over key tiles of tile_size, returning (output, lse).

    q (..., T_q, d), k (..., T_k, d), v (..., T_k, d_v); mask bool, True where a query may
    attend, or causal=True (query i sees keys 0..i). lse (..., T_q) is the log-sum-exp of
    each row's scores, m + log l, all a backward needs to rebuild the weights. Autograd
    through this function keeps every tile; flash_attention's backward keeps none (lesson 17b).
    """
    factor = _check(q, k, v, mask, causal, tile_size, scale)
    return _forward(q, k, v, mask, causal, tile_size, factor)


def tiled_attention(q, k, v, mask=None, *, causal=False, tile_size=TILE_SIZE, scale=True):
    """The output of tiled_forward alone: (..., T_q, d_v) (lesson 17b)."""
    return tiled_forward(q, k, v, mask, causal=causal, tile_size=tile_size, scale=scale)[0]


@torch.no_grad()
def tile_steps(q, k, v, mask=None, *, causal=False, tile_size=TILE_SIZE, scale=True):
    """Yield a TileStep after each key tile: the running max, the correction, the running
    sum and the output so far, for the explorer that steps through the tiles (lesson 17a)."""
    factor = _check(q, k, v, mask, causal, tile_size, scale)
    for index, start, stop, scores, m, rescale, total, acc in _online_softmax(
        q, k, v, mask, causal, tile_size, factor
    ):
        # a row that has met no allowed key yet has no output (0 / 0): shown as 0
        output = acc / total.clamp(min=torch.finfo(total.dtype).tiny)[..., None]
        yield TileStep(index, start, stop, scores, m, rescale, total, output)


class TiledAttention(torch.autograd.Function):
    """Tiled attention whose forward saves only q, k, v, the output and the log-sum-exp (and
    the mask, if one is given), and whose backward recomputes each tile's weights from them
    (FlashAttention-2's backward; lesson 17b).

    With P = softmax(S) and dO the gradient of the output: dV = P^T dO, dP = dO V^T,
    dS = P * (dP - rowsum(dO * O)), dQ = dS K * factor, dK = dS^T Q * factor. Each is a sum
    over key tiles (dQ) or lives inside one tile (dK, dV), so P is needed one tile at a time,
    and exp(S - lse) gives it without the running maximum.
    """

    @staticmethod
    def forward(ctx, q, k, v, mask, causal: bool, tile_size: int, factor: float):
        out, lse = _forward(q, k, v, mask, causal, tile_size, factor)
        ctx.save_for_backward(q, k, v, out, lse, *(() if mask is None else (mask,)))
        ctx.causal, ctx.tile_size, ctx.factor = causal, tile_size, factor
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        q, k, v, out, lse, *masks = ctx.saved_tensors
        mask = masks[0] if masks else None
        causal, factor = ctx.causal, ctx.factor
        batch = broadcast_shape(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        delta = (grad_out * out).sum(dim=-1)  # (..., T_q) rowsum(dO * O)
        dq = q.new_zeros((*batch, *q.shape[-2:]))  # (..., T_q, d)
        dk = k.new_zeros((*batch, *k.shape[-2:]))  # (..., T_k, d)
        dv = v.new_zeros((*batch, *v.shape[-2:]))  # (..., T_k, d_v)
        for start, stop in _tile_ranges(q.shape[-2], k.shape[-2], ctx.tile_size, causal):
            scores = _tile_scores(q, k, mask, causal, start, stop, factor)  # (..., T_q, t)
            p = torch.exp(scores - lse[..., None])  # (..., T_q, t) the forward's weights
            dv[..., start:stop, :] = p.transpose(-2, -1) @ grad_out  # (..., t, d_v)
            dp = grad_out @ v[..., start:stop, :].transpose(-2, -1)  # (..., T_q, t)
            ds = p * (dp - delta[..., None])  # (..., T_q, t)
            dq = dq + (ds @ k[..., start:stop, :]) * factor  # (..., T_q, d)
            dk[..., start:stop, :] = (ds.transpose(-2, -1) @ q) * factor  # (..., t, d)
        # sum over the batch dimensions that q, k or v broadcast along
        return (
            dq.sum_to_size(q.shape), dk.sum_to_size(k.shape), dv.sum_to_size(v.shape),
            None, None, None, None,
        )  # fmt: skip


def flash_attention(q, k, v, mask=None, *, causal=False, tile_size=TILE_SIZE, scale=True):
    """tiled_attention's output through TiledAttention, so the backward stores no tile
    either: memory O(T * tile) in both directions instead of O(T^2) (lesson 17b)."""
    factor = _check(q, k, v, mask, causal, tile_size, scale)
    return TiledAttention.apply(q, k, v, mask, causal, tile_size, factor)
