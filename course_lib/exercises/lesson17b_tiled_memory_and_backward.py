"""Lesson 17b's exercise: the backward of attention, key tile by key tile, from the
saved log-sum-exp.

CONTRACT (fixed: the lesson and its check rely on it):
- tiled_backward(q, k, v, out, lse, grad_out, mask=None, tile_size=64) -> (dq, dk, dv), each
  shaped and typed like q, k, v: out the attention's output, lse (..., T_q) the log-sum-exp of
  each row's scaled, masked scores, grad_out the gradient of a loss with respect to out; the
  gradients of that loss, computed key tile by key tile, never holding a (T_q, T_k) matrix.

tiled_backward gets what a recomputing backward keeps (q, k, v, the output, each row's
log-sum-exp) and the output's gradient, and returns dq, dk, dv. It is checked against the
gradients autograd takes through torch's F.scaled_dot_product_attention, and with the same
probe as lesson 17a's online_attention (its inputs module): it must never hold a (T_q, T_k)
matrix either, nor call torch's kernel or the course's tiled code, nor switch autograd on to
take the gradients for it.
"""

import math

import torch

from course_lib.attention import causal_mask
from course_lib.exercises.core import PASSED, Bug, Case, Exercise, Verdict, run
from course_lib.exercises.lesson17a_online_softmax.inputs import (
    PROBE,
    left_padding,
    qkv,
    randn,
    random_mask,
    refused,
    scores_of,
    sdpa_gradients,
    watch,
)


def tiled_backward_reference(q, k, v, out, lse, grad_out, mask=None, tile_size=64):
    """torch's gradients of attention, the check's reference for tiled_backward (lesson 17b)."""
    return sdpa_gradients(q, k, v, grad_out, mask)  # (dq, dk, dv)


def saved(q, k, v, mask=None):
    """(out, lse) as a recomputing forward saves them, computed whole (the checker's side;
    lesson 17b)."""
    scores = scores_of(q, k, mask)  # (..., T_q, T_k)
    return torch.softmax(scores, dim=-1) @ v, torch.logsumexp(scores, dim=-1)


def _case(q, k, v, g, mask=None, tile_size=4, label=""):
    out, lse = saved(q, k, v, mask)
    grad_out = randn(g, *out.shape, dtype=q.dtype)
    return Case((q, k, v, out, lse, grad_out), {"mask": mask, "tile_size": tile_size}, label)


def _cases() -> list[Case]:
    g = torch.Generator().manual_seed(27)
    return [
        _case(*qkv(g, (2, 3, 10, 8)), g, tile_size=5, label="tile_size 5 divides T_k = 10"),
        _case(
            *qkv(g, (2, 3, 10, 8)),
            g,
            tile_size=4,
            label="tile_size 4 does not divide T_k = 10: the last tile holds 2 keys",
        ),
        _case(
            *qkv(g, (2, 3, 10, 8)),
            g,
            mask=causal_mask(10),
            tile_size=3,
            label="a causal mask, tile_size 3",
        ),
        _case(
            *qkv(g, (2, 3, 10, 8)),
            g,
            mask=left_padding(2, 10, 5),
            tile_size=4,
            label="sentence 1's first 5 keys masked: its rows see no key in tile 0",
        ),
        _case(
            *qkv(g, (2, 3, 4, 8), T_k=9, d_v=5),
            g,
            tile_size=4,
            label="4 queries, 9 keys, values of width 5",
        ),
        _case(*qkv(g, (10, 8)), g, tile_size=3, label="one sequence, no batch dimensions"),
        _case(
            *qkv(g, (2, 3, 10, 8), dtype=torch.float64),
            g,
            mask=random_mask(g, (2, 1), 10, 10),
            tile_size=3,
            label="float64, a random mask per sentence: the gradients stay float64",
        ),
    ]


# ---------------------------------------------------------------- the mistakes


def _backward(q, k, v, out, lse, grad_out, mask=None, tile_size=64, *, delta="row",
              weights="lse", scale_grads=True, scale_scores=True, use_mask=True,
              whole_tiles_only=False):  # fmt: skip
    """The tiled backward with one thing done the way a learner might get it wrong."""
    T_k = k.shape[-2]
    factor = 1 / math.sqrt(q.shape[-1])
    row_delta = (grad_out * out).sum(dim=-1, keepdim=True)  # (..., T_q, 1)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    last = (T_k // tile_size) * tile_size if whole_tiles_only else T_k
    for a in range(0, last, tile_size):
        b = min(a + tile_size, T_k)
        s = q @ k[..., a:b, :].transpose(-2, -1) * (factor if scale_scores else 1.0)
        if mask is not None and use_mask:
            s = s.masked_fill(~mask[..., a:b], float("-inf"))  # (..., T_q, t)
        if weights == "tile softmax":
            p = torch.softmax(s, dim=-1).nan_to_num(0.0)  # rows empty in this tile: 0
        else:
            p = torch.exp(s - lse[..., None])  # (..., T_q, t)
        dp = grad_out @ v[..., a:b, :].transpose(-2, -1)  # (..., T_q, t)
        if delta == "none":
            ds = p * dp
        elif delta == "tile":
            ds = p * (dp - (p * dp).sum(dim=-1, keepdim=True))
        else:
            ds = p * (dp - row_delta)
        f = factor if scale_grads else 1.0
        dv[..., a:b, :] = p.transpose(-2, -1) @ grad_out  # (..., t, d_v)
        dq = dq + ds @ k[..., a:b, :] * f  # (..., T_q, d)
        dk[..., a:b, :] = ds.transpose(-2, -1) @ q * f  # (..., t, d)
    return dq, dk, dv


def _wrong(**change):
    def wrong(q, k, v, out, lse, grad_out, mask=None, tile_size=64):
        return _backward(q, k, v, out, lse, grad_out, mask, tile_size, **change)

    return wrong


IDEA = (
    "'A backward that recomputes the tiles' (the five products of the backward, and why "
    "exp(scores - lse) gives a tile's weights without its running maximum)"
)

TILED_BACKWARD = Exercise(
    name="tiled_backward",
    lesson="17b_tiled_memory_and_backward",
    reference=tiled_backward_reference,
    cases=_cases,
    idea=IDEA,
    bugs=(
        Bug(
            "no_delta",
            _wrong(delta="none"),
            "your dv is right, your dq and dk are not",
            "dS = P * dP leaves out the softmax's own coupling: each row's weights sum to 1, "
            "so the gradient of a score is P * (dP - delta), with delta = rowsum(dO * O) for "
            "the whole row (the same number for every tile of that row).",
        ),
        Bug(
            "delta_of_one_tile",
            _wrong(delta="tile"),
            "your dv is right and your dq and dk are close, but not right",
            "delta is summed over one tile's keys: rowsum(P * dP) over the tile. It is a sum "
            "over the whole row, and rowsum(dO * O) gives it before the loop starts, without "
            "any tile at all.",
        ),
        Bug(
            "softmax_per_tile",
            _wrong(weights="tile softmax"),
            "your gradients come from weights that sum to 1 within each tile",
            "a tile's weights are not a softmax over that tile: they are the forward's, each "
            "row normalised over all its keys. exp(scores - lse) gives exactly those, since "
            "lse is the log of the whole row's sum.",
        ),
        Bug(
            "no_scale",
            _wrong(scale_grads=False),
            "your dv is right, your dq and dk are sqrt(d) times too large",
            "the scores are (q k^T) / sqrt(d), so the chain rule brings the same factor into "
            "dq = dS k / sqrt(d) and dk = dS^T q / sqrt(d).",
        ),
        Bug(
            "scores_unscaled",
            _wrong(scale_scores=False),
            "your recomputed weights are not the forward's: the scores miss their scale",
            "recompute each tile's scores exactly as the forward made them, divided by "
            "sqrt(d) (and masked), before exp(scores - lse).",
        ),
        Bug(
            "mask_ignored",
            _wrong(use_mask=False),
            "your gradients are right without a mask and wrong with one",
            "the recomputed scores are not masked, so masked keys get weights: set each tile's "
            "scores to -inf where mask[..., start:stop] is False, as the forward did.",
        ),
        Bug(
            "last_tile_dropped",
            _wrong(whole_tiles_only=True),
            "your gradients are right when tile_size divides T_k and wrong when it does not",
            "the keys after the last full tile are never visited, so their dk and dv stay 0 "
            "and dq misses their share. The last tile is shorter: end each at min(start + "
            "tile_size, T_k).",
        ),
    ),
    hints=(
        "Return three tensors, (dq, dk, dv), shaped like q, k and v. Within one tile of keys "
        "everything is a product of small blocks: dv and dk of that tile need only the tile's "
        "weights; dq is a sum over every tile.",
        "A tile's weights are exp(its scaled, masked scores - lse): no running maximum and no "
        "sum over the tile is needed, because lse already holds the whole row's normaliser.",
    ),
    atol=1e-4,
    rtol=1e-4,
)


def run_backward(fn) -> Verdict:
    """Check tiled_backward on every case, then that it never holds a (T_q, T_k) matrix
    (lesson 17b)."""
    verdict = run(TILED_BACKWARD, fn)
    if not verdict.passed:
        return verdict

    def prepare(q, k, v):
        out, lse = saved(q, k, v)
        return out, lse, torch.ones_like(out)

    seen = watch(
        lambda q, k, v, out, lse, grad_out, tile: fn(
            q, k, v, out, lse, grad_out, mask=None, tile_size=tile
        ),
        prepare,
    )
    if seen.fused:
        return refused(
            "tiled_backward: your function calls torch's F.scaled_dot_product_attention, the "
            "reference the check compares with",
            "Taking its gradients passes every number and teaches nothing: write the five "
            "products of the backward, tile by tile, with torch's plain operations.",
            IDEA,
            "torch's kernel",
        )
    if seen.course is not None:
        return refused(
            f"tiled_backward: your function calls the course's own {seen.course}, "
            "which already does what the exercise asks",
            "Letting the course's tiled code take the gradients passes every number and "
            "teaches nothing: write the five products of the backward, tile by tile, with "
            "torch's plain operations.",
            IDEA,
            "the course's loop",
        )
    if seen.autograd:
        return refused(
            "tiled_backward: your function switches autograd back on and lets it take the "
            "gradients",
            "Autograd through a tiled forward keeps every tile for its backward, which is "
            "what this exercise does without: take no gradient with autograd; write the "
            "five products of the backward, tile by tile, with torch's plain operations.",
            IDEA,
            "autograd",
        )
    if seen.whole is not None:
        return refused(
            f"tiled_backward: your gradients are right, but your function made a tensor of "
            f"shape {seen.whole}, as large as all of one head's weights at once "
            f"({PROBE['T_q']} queries, {PROBE['T_k']} keys, tile_size {PROBE['tile_size']})",
            "Your backward rebuilds the whole weight matrix (of all heads, or of one "
            "head at a time), which is what autograd "
            "through lesson 02b's attention keeps. Rebuild one tile of weights at a time "
            "from lse, and use it at once for that tile's share of dq, dk and dv.",
            IDEA,
            "whole matrix",
        )
    if seen.all_keys is not None:
        return refused(
            f"tiled_backward: your gradients are right, but your function rebuilds weights "
            f"over all {PROBE['T_k']} keys at once ({seen.all_keys}, tile_size "
            f"{PROBE['tile_size']})",
            "Your backward takes exp(scores - lse) of every key at once, one query row "
            "(or a few) at a time: little memory, but not the tile loop the exercise asks "
            "for. Rebuild one tile of weights, for all the queries together, and use it at "
            "once for that tile's share of dq, dk and dv.",
            IDEA,
            "all keys at once",
        )
    return Verdict(
        True,
        f"tiled_backward: passed all {len(TILED_BACKWARD.case_list())} cases, without ever "
        "holding the whole weight matrix. Well done!",
        (),
        PASSED,
    )


EXERCISES = (TILED_BACKWARD,)
