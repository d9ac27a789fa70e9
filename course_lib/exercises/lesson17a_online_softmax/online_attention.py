"""Lesson 17a's exercise: attention over key tiles with a running maximum and sum.

The learner's online_attention is checked three ways, each against torch, never against the
course's own tiled code: its output against F.scaled_dot_product_attention on every case
(ONLINE_ATTENTION), the gradients autograd takes through it against those through torch's
kernel (GRADIENTS), and a probe that it never holds the whole (T_q, T_k) score matrix and
calls neither torch's kernel nor the course's own tiled code.
"""

import math

import torch
import torch.nn.functional as F

from course_lib.attention import causal_mask
from course_lib.exercises.core import PASSED, Bug, Case, Exercise, Verdict, run
from course_lib.exercises.lesson17a_online_softmax.inputs import (
    PROBE,
    left_padding,
    qkv,
    randn,
    random_mask,
    refused,
    sdpa_gradients,
    watch,
)
from course_lib.tiled_attention import tiled_attention


def online_attention_reference(q, k, v, mask=None, tile_size=64):
    """torch's attention, the check's reference for online_attention (lesson 17a)."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (..., T_q, d_v)


def gradients_reference(q, k, v, grad_out, mask=None, tile_size=64):
    """torch's gradients of attention, the check's reference (lesson 17a)."""
    return sdpa_gradients(q, k, v, grad_out, mask)


def gradients_of(fn):
    """fn's (dq, dk, dv) of sum(fn(q, k, v, ...) * grad_out), taken by autograd; zeros where
    fn's output carries no gradient (made under no_grad, or outside torch; lesson 17a)."""

    def grads(q, k, v, grad_out, mask=None, tile_size=64):
        q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
        out = fn(q, k, v, mask=mask, tile_size=tile_size)
        if not isinstance(out, torch.Tensor) or not out.requires_grad:
            return tuple(torch.zeros_like(t) for t in (q, k, v))
        found = torch.autograd.grad(out, (q, k, v), grad_out, allow_unused=True)
        pairs = zip(found, (q, k, v), strict=True)
        return tuple(torch.zeros_like(t) if g is None else g for g, t in pairs)

    return grads


def _cases() -> list[Case]:
    g = torch.Generator().manual_seed(17)
    big_q, big_k, big_v = qkv(g, (2, 3, 10, 8))
    # every key leans along the same direction and the queries point the other way: every
    # score of every row lies far below 0 (about -150 to -250)
    lean = torch.ones(8)
    low_k = randn(g, 2, 3, 10, 8) + 3 * lean
    low_q = -20 * lean.expand(2, 3, 10, 8) + randn(g, 2, 3, 10, 8)
    return [
        Case(qkv(g, (2, 3, 10, 8)), {"tile_size": 5}, label="tile_size 5 divides T_k = 10"),
        Case(
            qkv(g, (2, 3, 10, 8)),
            {"tile_size": 4},
            label="tile_size 4 does not divide T_k = 10: the last tile holds 2 keys",
        ),
        Case(qkv(g, (2, 3, 10, 8)), {"tile_size": 1}, label="one key per tile"),
        Case(qkv(g, (2, 10, 8)), {"tile_size": 16}, label="tile_size 16 > T_k: a single tile"),
        Case(qkv(g, (10, 8)), {"tile_size": 3}, label="one sequence, no batch dimensions"),
        Case(
            qkv(g, (2, 3, 10, 8)),
            {"mask": causal_mask(10), "tile_size": 3},
            label="a causal mask: the early queries see no key in the later tiles",
        ),
        Case(
            qkv(g, (2, 3, 10, 8)),
            {"mask": left_padding(2, 10, 5), "tile_size": 4},
            label="sentence 1's first 5 keys masked: its rows see no key in tile 0",
        ),
        Case(
            qkv(g, (2, 3, 10, 8)),
            {"mask": random_mask(g, (2, 1), 10, 10), "tile_size": 3},
            label="a different random mask per sentence, some rows empty in the first tiles",
        ),
        Case(
            qkv(g, (2, 3, 4, 8), T_k=9, d_v=5),
            {"tile_size": 4},
            label="4 queries, 9 keys, values of width 5",
        ),
        Case(
            (big_q * 12, big_k * 12, big_v),
            {"tile_size": 4},
            label="large scores (q and k 12 times larger): exp of a score overflows",
        ),
        Case(
            (low_q, low_k, randn(g, 2, 3, 10, 8)),
            {"tile_size": 4},
            label="every score far below 0 (about -200): exp of a score underflows to 0",
        ),
        Case(
            qkv(g, (2, 3, 10, 8), dtype=torch.float64),
            {"mask": causal_mask(10), "tile_size": 4},
            label="float64 q, k, v: the output stays float64",
        ),
    ]


def _gradient_cases() -> list[Case]:
    g = torch.Generator().manual_seed(18)

    def case(mask, tile_size, label, dtype=torch.float32):
        q, k, v = qkv(g, (2, 3, 10, 8), dtype=dtype)
        grad_out = randn(g, 2, 3, 10, 8, dtype=dtype)
        return Case((q, k, v, grad_out), {"mask": mask, "tile_size": tile_size}, label=label)

    return [
        case(None, 4, "the gradients (dq, dk, dv) of sum(output * grad_out), tile_size 4"),
        case(
            left_padding(2, 10, 5),
            4,
            "the gradients, sentence 1's first 5 keys masked (no key in its tile 0)",
        ),
        case(causal_mask(10), 3, "the gradients under a causal mask, tile_size 3"),
        case(random_mask(g, (2, 1), 10, 10), 3, "the gradients in float64", torch.float64),
    ]


# ---------------------------------------------------------------- the mistakes

INF = float("inf")


def _online(q, k, v, mask=None, tile_size=64, *, correct=("sum", "acc"), factor="right",
            divide_each_tile=False, whole_tiles_only=False, guard=True, scale=True,
            running_max=True, start=-INF, use_mask=True, detach_sum=False):  # fmt: skip
    """Online-softmax attention with one thing done the way a learner might get it wrong."""
    T_k = k.shape[-2]
    factor_ = 1 / math.sqrt(q.shape[-1]) if scale else 1.0
    m = torch.full(q.shape[:-1], start, dtype=q.dtype)  # (..., T_q)
    total = torch.zeros(q.shape[:-1], dtype=q.dtype)  # (..., T_q)
    acc = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)  # (..., T_q, d_v)
    last = (T_k // tile_size) * tile_size if whole_tiles_only else T_k
    for a in range(0, max(last, 1 if whole_tiles_only else 0), tile_size):
        b = min(a + tile_size, T_k)
        s = q @ k[..., a:b, :].transpose(-2, -1) * factor_  # (..., T_q, t)
        if mask is not None and use_mask:
            s = s.masked_fill(~mask[..., a:b], -INF)
        if not running_max:
            p = torch.exp(s)  # (..., T_q, t)
            total, acc = total + p.sum(-1), acc + p @ v[..., a:b, :]
            continue
        m_new = torch.maximum(m, s.amax(-1))  # (..., T_q)
        shift = torch.where(torch.isinf(m_new), 0.0, m_new) if guard else m_new
        p = torch.exp(s - shift[..., None])  # (..., T_q, t)
        if factor == "inverted":
            fix = torch.where(torch.isinf(m), 1.0, torch.exp(shift - m))
        elif factor == "one":
            fix = torch.ones_like(m)
        else:
            fix = torch.exp(m - shift)  # (..., T_q)
        total = (total * fix if "sum" in correct else total) + p.sum(-1)
        if detach_sum:
            total = total.detach()
        acc = (acc * fix[..., None] if "acc" in correct else acc) + p @ v[..., a:b, :]
        if divide_each_tile:
            acc = acc / total.clamp(min=1e-30)[..., None]
        m = m_new
    return acc if divide_each_tile else acc / total[..., None]


def _wrong(**change):
    def wrong(q, k, v, mask=None, tile_size=64):
        return _online(q, k, v, mask, tile_size, **change)

    return wrong


def _only_the_gradient(forward):
    """A mistake whose output is right: only the gradients autograd takes through it differ."""
    grads = gradients_of(forward)
    grads.forward = forward  # the tests check that the forward check passes it
    return grads


def _no_graph(q, k, v, mask=None, tile_size=64):
    with torch.no_grad():
        return _online(q, k, v, mask, tile_size)


IDEA = (
    "'Softmax one tile at a time' (the running maximum m, the running sum l, the output "
    "accumulator and the factor exp(m_old - m_new) that corrects them) and the exercise's "
    "contract"
)

ONLINE_ATTENTION = Exercise(
    name="online_attention",
    lesson="17a_online_softmax",
    reference=online_attention_reference,
    cases=_cases,
    idea=IDEA,
    # lesson 17b measures the memory of a tile loop: torch's kernel, the reference, is none
    stand_in=tiled_attention,
    bugs=(
        Bug(
            "sum_not_rescaled",
            _wrong(correct=("acc",)),
            "your output is off wherever a later tile raised a row's maximum",
            "when a tile brings a larger maximum, every term already in the running sum was "
            "taken against the old maximum: the running sum, like the accumulator, must be "
            "multiplied by exp(m_old - m_new) before the tile's own terms are added.",
        ),
        Bug(
            "acc_not_rescaled",
            _wrong(correct=("sum",)),
            "your output is off wherever a later tile raised a row's maximum",
            "the output accumulator keeps the earlier tiles' terms at the old maximum: like the "
            "running sum, it must be multiplied by exp(m_old - m_new) when the maximum rises.",
        ),
        Bug(
            "never_corrected",
            _wrong(factor="one"),
            "your earlier tiles are never corrected: the factor you multiply by is always 1",
            "the factor exp(m_old - m_new) is computed after the running maximum was already "
            "updated, so m_old is m_new and the factor is 1. Keep the old maximum until the "
            "factor is taken, then update it.",
        ),
        Bug(
            "factor_inverted",
            _wrong(factor="inverted"),
            "your earlier tiles are corrected the wrong way: they grow when a new maximum comes",
            "the factor is upside down: exp(m_new - m_old) is above 1. Terms taken against the "
            "old, smaller maximum are too large by exp(m_new - m_old), so they are multiplied "
            "by exp(m_old - m_new).",
        ),
        Bug(
            "divided_each_tile",
            _wrong(divide_each_tile=True),
            "your output is right with a single tile and wrong with several",
            "you divide by the running sum after every tile, so the accumulator that the next "
            "tile corrects and adds to is already an average while the new terms are not. "
            "Keep the unnormalised sum of exp(score - m) v and divide by l once, after the "
            "last tile.",
        ),
        Bug(
            "last_tile_dropped",
            _wrong(whole_tiles_only=True),
            "your output is right when tile_size divides T_k and wrong when it does not",
            "the keys after the last full tile are never read: the loop counts whole tiles "
            "only. The last tile is shorter, keys start .. T_k - 1: start the tiles at 0, "
            "tile_size, 2 tile_size, ... while start < T_k, and end each at min(start + "
            "tile_size, T_k).",
        ),
        Bug(
            "nan_empty_tile",
            _wrong(guard=False),
            "your output is NaN in the rows that see no key in a whole tile",
            "a row whose tile is all masked has scores of -inf, so its maximum so far is still "
            "-inf, and -inf - (-inf) is NaN: in exp(score - m) and in the factor exp(m_old - "
            "m_new). Subtract 0 instead of m while m is -inf (torch.where): the terms are then "
            "exp(-inf) = 0, as they should be.",
        ),
        Bug(
            "no_scale",
            _wrong(scale=False),
            "your output is softmax(q k^T) v: the scores are not scaled",
            "the scores are divided by sqrt(d), the width of q and k, before anything else, as "
            "in lesson 03a; each tile's scores need it.",
        ),
        Bug(
            "max_from_zero",
            _wrong(start=0.0),
            "your output is NaN where every score of a row is far below 0",
            "your running maximum starts at 0 rather than at -inf, so it never drops to a "
            "row's real maximum: when every score is far below 0, exp(score - 0) underflows "
            "to 0 for every key and the output is 0 / 0. Start it at -inf, and guard the rows "
            "that have met no key yet.",
        ),
        Bug(
            "no_max",
            _wrong(running_max=False),
            "your output is NaN where the scores are large: exp of a score overflowed",
            "you take exp of the raw scores. exp(89) is already inf in float32; the running "
            "maximum is there so that every exponent is score - m <= 0, as lesson 00's softmax "
            "subtracts the row's maximum.",
        ),
        Bug(
            "mask_ignored",
            _wrong(use_mask=False),
            "your output is right without a mask and wrong with one",
            "the mask is never applied. Each tile's scores take the mask's columns of that "
            "tile (mask[..., start:stop], which broadcasts over the leading dims like the whole "
            "mask) and are set to -inf where it is False.",
        ),
    ),
    hints=(
        "Print, for one row, the running max, the running sum and the output after each tile, "
        "and compare them with the softmax of the keys seen so far: the first tile where they "
        "part is where your update goes wrong.",
        "After each tile, l is the sum of exp(score - m) over every key seen so far and the "
        "accumulator the same sum with each term times its value vector, both for the m of "
        "now; the output is accumulator / l, taken once, after the last tile.",
    ),
)

GRADIENTS = Exercise(
    name="online_attention",
    lesson="17a_online_softmax",
    reference=gradients_reference,
    cases=_gradient_cases,
    idea=IDEA,
    bugs=(
        Bug(
            "no_graph",
            _only_the_gradient(_no_graph),
            "your output is right but carries no gradient at all: every gradient comes out 0",
            "autograd recorded nothing on the way to your output: it was computed under "
            "torch.no_grad(), or rebuilt from Python numbers (.item(), .tolist(), "
            "torch.tensor(...)). Compute it with torch operations on q, k and v, with "
            "gradients on; the lesson measures memory under no_grad from outside your function.",
        ),
        Bug(
            "sum_detached",
            _only_the_gradient(_wrong(detach_sum=True)),
            "your output is right but its gradients are not: the running sum passes none back",
            "the running sum is detached (.detach(), or kept as a number), so autograd treats "
            "the normaliser l as a constant. The output is acc / l, and l depends on q and k "
            "like acc does: keep it in the graph.",
        ),
    ),
    hints=(
        "Your output is right, so what is wrong is what autograd records on the way to it: "
        "a tensor detached or rebuilt outside torch, or a step that autograd cannot take "
        "through (the error message names it).",
    ),
    atol=1e-4,
    rtol=1e-4,
)

WHOLE_MATRIX_CAUSE = (
    "Your function computes the scores of every query against every key at once (q @ k "
    "transposed over all of k, then the softmax), for all heads or for one head at a time, "
    "which is the lesson 02b attention the exercise replaces. Take the keys tile by tile: "
    "each tile's scores are (..., T_q, tile_size), and the running maximum, sum and output "
    "carry what the earlier tiles gave."
)

ALL_KEYS_CAUSE = (
    "Your function exponentiates scores of every key at once: one query row (or a few) at a "
    "time, its softmax over all the keys. That holds little memory, but it is not the online "
    "softmax: a row's scores are still all computed before its maximum is known. Take the keys "
    "tile by tile, for all the queries together: exp(scores - m) of one tile, with the "
    "running maximum, sum and output correcting what the earlier tiles gave."
)


FUSED_CAUSE = (
    "Calling torch's kernel passes every number and teaches nothing: the exercise is the "
    "loop it runs inside. Write the tiles, the running maximum, sum and accumulator with "
    "torch's plain operations (matrix products, exp, max, sum)."
)


COURSE_CAUSE = (
    "Calling the course's tiled code passes every number and teaches nothing: the lessons "
    "import tile_steps, tiled_attention, tiled_forward and flash_attention to show, to measure "
    "and to stand in, not for you to call. Write the loop over the tiles yourself, with "
    "torch's plain operations."
)


def run_online(fn) -> Verdict:
    """Check online_attention: its output on every case, then the gradients through it, then
    that it never holds a (T_q, T_k) matrix (lesson 17a)."""
    verdict = run(ONLINE_ATTENTION, fn)
    if not verdict.passed:
        return verdict
    verdict = run(GRADIENTS, gradients_of(fn))
    if not verdict.passed:
        return verdict
    seen = watch(lambda q, k, v, tile: fn(q, k, v, tile_size=tile))
    if seen.fused:
        return refused(
            "online_attention: your function calls torch's F.scaled_dot_product_attention, "
            "the reference the check compares with",
            FUSED_CAUSE,
            IDEA,
            "torch's kernel",
        )
    if seen.course is not None:
        return refused(
            f"online_attention: your function calls the course's own {seen.course}, "
            "which already does what the exercise asks",
            COURSE_CAUSE,
            IDEA,
            "the course's loop",
        )
    if seen.whole is not None:
        return refused(
            f"online_attention: your numbers are right, but your function made a tensor of "
            f"shape {seen.whole}, as large as all of one head's scores at once "
            f"({PROBE['T_q']} queries, {PROBE['T_k']} keys, tile_size {PROBE['tile_size']})",
            WHOLE_MATRIX_CAUSE,
            IDEA,
            "whole matrix",
        )
    if seen.all_keys is not None:
        return refused(
            f"online_attention: your numbers are right, but your function takes the softmax "
            f"over all {PROBE['T_k']} keys at once ({seen.all_keys}, tile_size "
            f"{PROBE['tile_size']})",
            ALL_KEYS_CAUSE,
            IDEA,
            "all keys at once",
        )
    cases, grads = len(ONLINE_ATTENTION.case_list()), len(GRADIENTS.case_list())
    return Verdict(
        True,
        f"online_attention: passed all {cases} cases and the gradients on {grads}, "
        "without ever holding the whole score matrix. Well done!",
        (),
        PASSED,
    )
