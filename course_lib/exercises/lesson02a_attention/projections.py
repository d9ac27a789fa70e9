"""Lesson 02a's projections exercise: q, k and v from one stored matrix.

The lesson's worked example makes q, k and v of its hand-built head with three separate
matrices, one product each, on one (T, D) sentence, d_k = 2 and d_v = 1. The exercise takes
the three stacked into one (2 d_k + d_v, D) matrix, as torch.nn.MultiheadAttention
(in_proj_weight) and nanoGPT (c_attn) store them, on inputs with any leading axes: one
product, then a cut at the right widths, d_v read from the matrix.
"""

import torch
import torch.nn.functional as F

from course_lib.exercises.core import Bug, Case, Exercise


def qkv_projection_reference(x, w_qkv, d_k):
    d_v = w_qkv.shape[0] - 2 * d_k
    y = F.linear(x, w_qkv)  # (..., T, 2 d_k + d_v)
    return tuple(y.split([d_k, d_k, d_v], dim=-1))  # (..., T, d_k) twice, (..., T, d_v)


def _case(g, x_shape, d_k, d_v, label, dtype=torch.float32):
    D = x_shape[-1]
    x = torch.randn(*x_shape, generator=g, dtype=torch.float64).to(dtype)
    w = torch.randn(2 * d_k + d_v, D, generator=g, dtype=torch.float64).to(dtype)
    return Case((x, w.requires_grad_(True), d_k), label=label)


def _cases() -> list[Case]:
    g = torch.Generator().manual_seed(2)
    return [
        _case(g, (5, 6), 4, 4, "one sentence (T, D), d_v = d_k"),
        _case(g, (2, 5, 6), 4, 1, "a batch (B, T, D), d_v = 1 narrower than d_k = 4"),
        _case(g, (2, 3, 5, 6), 2, 6, "two batch axes, d_v = 6 wider than d_k = 2"),
        _case(g, (2, 4, 12), 4, 4, "a square w_qkv (2 d_k + d_v = D = 12)"),
        _case(g, (3, 5, 6), 1, 2, "float64 inputs: the results stay float64", torch.float64),
    ]


def _thirds(x, w_qkv, d_k):
    return tuple((x @ w_qkv.T).chunk(3, dim=-1))


def _v_as_wide_as_k(x, w_qkv, d_k):
    y = x @ w_qkv.T  # (..., T, 2 d_k + d_v)
    return y[..., :d_k], y[..., d_k : 2 * d_k], y[..., 2 * d_k : 3 * d_k]


def _weight_as_given(x, w_qkv, d_k):
    d_v = w_qkv.shape[0] - 2 * d_k
    return tuple((x @ w_qkv).split([d_k, d_k, d_v], dim=-1))


def _split_axis_1(x, w_qkv, d_k):
    d_v = w_qkv.shape[0] - 2 * d_k
    return tuple((x @ w_qkv.T).split([d_k, d_k, d_v], dim=1))


def _order_k_q_v(x, w_qkv, d_k):
    q, k, v = qkv_projection_reference(x, w_qkv, d_k)
    return k, q, v


QKV_PROJECTION = Exercise(
    name="qkv_projection",
    lesson="02a_attention",
    reference=qkv_projection_reference,
    cases=_cases,
    idea="the head built by hand in 'Query, key and value' (one matrix for each of q, k, v, "
    "one row per output number) and the layout in this exercise's text",
    needs_grad=True,
    bugs=(
        Bug(
            "equal_thirds",
            _thirds,
            "your q, k and v are three equal parts of the projection: right only when the "
            "rows split evenly",
            "the rows of w_qkv are d_k for the queries, d_k for the keys and the rest for the "
            "values, d_v = (number of rows) - 2 d_k, which may differ from d_k. Cut at those "
            "widths, not into thirds.",
        ),
        Bug(
            "v_as_wide_as_k",
            _v_as_wide_as_k,
            "your v is cut d_k wide: right when d_v <= d_k, too narrow when d_v is wider",
            "v takes every column after the first 2 d_k, however many there are: d_v is "
            "(number of rows of w_qkv) - 2 d_k, not d_k.",
        ),
        Bug(
            "weight_as_given",
            _weight_as_given,
            "your product uses w_qkv as it is stored, not turned around",
            "w_qkv holds one row per output number, (2 d_k + d_v, D), as nn.Linear stores its "
            "weight and as lesson 01a's output layer took its matrix: each output is the dot "
            "product of x with one ROW, so x meets the matrix turned around.",
        ),
        Bug(
            "split_along_positions",
            _split_axis_1,
            "right on one (T, D) sentence, wrong once a batch axis stands in front",
            "the cut runs along axis 1, which is the last axis only when x has two. The "
            "widths d_k, d_k, d_v are along the last axis, whatever stands in front: count "
            "from the end.",
        ),
        Bug(
            "keys_first",
            _order_k_q_v,
            "your first two results are swapped: q holds the keys and k the queries",
            "the rows come in the order queries, keys, values, and the results in the same "
            "order (q, k, v).",
        ),
    ),
    hints=(
        "One product gives every output number of every token: (..., T, D) against the "
        "matrix turned around gives (..., T, 2 d_k + d_v). Then cut its last axis.",
        "d_v is not an argument: read it from the number of rows of w_qkv.",
    ),
)
