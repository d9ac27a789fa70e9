"""Lesson 13c's exercise, grouped_multihead: multi-head attention with fewer key/value heads,
checked against torch's grouped-query attention (scaled_dot_product_attention's
enable_gqa=True)."""

import math

import torch
import torch.nn.functional as F
from torch import nn

from course_lib import gqa
from course_lib.exercises.core import Bug, Case, Exercise

# ---------------------------------------------------------------- grouped_multihead


def _split(x, qkv, num_heads, num_kv_heads):
    """q (B, H, T, d) and k, v (B, H_kv, T, d) from qkv(x) laid out [q | k | v]."""
    D = x.shape[-1]
    d = D // num_heads
    q, k, v = qkv(x).split([D, num_kv_heads * d, num_kv_heads * d], dim=-1)
    return tuple(t.unflatten(-1, (-1, d)).transpose(1, 2) for t in (q, k, v))


def grouped_multihead_reference(x, qkv, out, num_heads, num_kv_heads, mask=None, rope=None):
    """The course's grouped_multihead, through torch's enable_gqa=True (lesson 13c)."""
    q, k, v = _split(x, qkv, num_heads, num_kv_heads)  # (B, H, T, d), (B, H_kv, T, d) twice
    if rope is not None:
        q, k = rope(q), rope(k)
    y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)  # (B, H, T, d)
    return out(y.transpose(1, 2).flatten(-2))  # (B, T, D)


def _layer(D, H, H_kv, g, dtype):
    d = D // H
    with torch.random.fork_rng(devices=[]):  # building the layers leaves the seed alone
        qkv = nn.Linear(D, D + 2 * H_kv * d, dtype=dtype)
        out = nn.Linear(D, D, dtype=dtype)
    with torch.no_grad():
        for p in (*qkv.parameters(), *out.parameters()):
            p.copy_(torch.randn(p.shape, generator=g, dtype=dtype) / math.sqrt(D))
    return qkv, out


def _grouped_cases() -> list[Case]:
    from course_lib.attention import causal_mask
    from course_lib.positional import RotaryEmbedding

    g = torch.Generator().manual_seed(17)

    def case(B, T, D, H, H_kv, label, mask=None, rope=None, dtype=torch.float32):
        qkv, out = _layer(D, H, H_kv, g, dtype)
        x = torch.randn(B, T, D, generator=g, dtype=dtype)
        return Case((x, qkv, out, H, H_kv), {"mask": mask, "rope": rope}, label=label)

    return [
        case(2, 5, 16, 4, 2, "4 query heads in 2 groups, a causal mask", mask=causal_mask(5)),
        case(1, 6, 32, 8, 2, "8 query heads in 2 groups of 4"),
        case(2, 4, 12, 3, 1, "multi-query: 3 query heads, 1 key/value head", mask=causal_mask(4)),
        case(1, 5, 16, 2, 2, "as many key/value heads as query heads: lesson 04a's multihead"),
        case(
            2,
            6,
            24,
            6,
            3,
            "6 query heads in 3 groups, rope and a causal mask",
            mask=causal_mask(6),
            rope=RotaryEmbedding(4),
        ),
        case(
            1,
            4,
            16,
            4,
            2,
            "float64 x and layers: the result stays float64",
            mask=causal_mask(4),
            dtype=torch.float64,
        ),
    ]


def _written(*, share="interleave", layout="qkv", masked=True, project=True, rope_v=False):
    """grouped_multihead with the heads repeated by hand, and the switches a bug needs."""

    def grouped(x, qkv, out, num_heads, num_kv_heads, mask=None, rope=None):
        q, k, v = _split(x, qkv, num_heads, num_kv_heads)
        if layout == "qvk":
            k, v = v, k
        if rope is not None:
            q, k = rope(q), rope(k)
            v = rope(v) if rope_v else v
        group = num_heads // num_kv_heads
        if share == "interleave":  # query head h reads key/value head h // group
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        elif share == "tile":  # query head h reads key/value head h % num_kv_heads
            k, v = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)
        else:  # "first": every query head reads key/value head 0
            k, v = (t[:, :1].expand(-1, num_heads, -1, -1) for t in (k, v))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask if masked else None)
        merged = y.transpose(1, 2).flatten(-2)  # (B, T, D)
        return out(merged) if project else merged

    return grouped


GROUPED_MULTIHEAD = Exercise(
    name="grouped_multihead",
    lesson="13c_grouped_query_attention",
    reference=grouped_multihead_reference,
    cases=_grouped_cases,
    idea="the section 'Fewer key and value heads': the exercise's text and its picture of "
    "which query heads share a key/value head",
    bugs=(
        Bug(
            "tiled",
            _written(share="tile"),
            "your query heads read the wrong key/value heads: right with one group or one "
            "key/value head, wrong in between",
            "with the key/value heads repeated as a whole (k.repeat, or torch.cat of copies), "
            "query head h reads key/value head h % num_kv_heads. The groups are consecutive: "
            "query heads 0 .. G - 1 share key/value head 0, so each head is repeated G times "
            "in place (repeat_interleave along the head axis).",
        ),
        Bug(
            "k_and_v_swapped",
            _written(layout="qvk"),
            "your numbers differ, though your shapes are right",
            "qkv's output is laid out [q | k | v]: the keys come right after the queries, "
            "then the values, each num_kv_heads * d wide.",
        ),
        Bug(
            "one_key_head",
            _written(share="first"),
            "your output is right with one key/value head and wrong with more",
            "every query head reads key/value head 0: the other key/value heads are never "
            "used. Query head h reads key/value head h // G, G = num_heads // num_kv_heads.",
        ),
        Bug(
            "mask_ignored",
            _written(masked=False),
            "your output is right without a mask, wrong with one",
            "hand the mask to the attention: True where a query may attend.",
        ),
        Bug(
            "no_out",
            _written(project=False),
            "your output looks like the heads side by side, never projected",
            "multi-head attention ends with out applied to the merged heads, as your "
            "multihead of lesson 04a does.",
        ),
        Bug(
            "rope_on_v",
            _written(rope_v=True),
            "your output is right without rope, wrong with it",
            "rope turns the queries and the keys only: positions enter the scores, never "
            "the values.",
        ),
    ),
    hints=(
        "Split qkv's output into widths D, num_kv_heads * d and num_kv_heads * d (not three "
        "equal parts); split each into its heads; then give each of the num_heads query "
        "heads the key/value head of its group, and attend as in lesson 04a.",
        "Print the shapes at each step for 4 query heads and 2 key/value heads: q should be "
        "(B, 4, T, d), k and v (B, 2, T, d) before you share them out.",
    ),
    # the course's grouped attention: its split into heads and its sharing, the module that
    # uses both, and the tied weights that let multi-head attention stand in for it
    forbidden=(
        (gqa, "split_qkv"),
        (gqa, "grouped_attend"),
        (gqa, "as_multihead"),
        (gqa.GroupedQueryAttention, "forward"),
    ),
    # torch's own sharing: scaled_dot_product_attention itself is allowed, this flag is not
    forbidden_keywords=((F, "scaled_dot_product_attention", "enable_gqa"),),
    forbidden_hint="course_lib.gqa is the course's grouped-query attention: split_qkv cuts "
    "qkv's output into query and key/value heads, grouped_attend shares the key/value heads "
    "out, and as_multihead copies their weights for multihead; scaled_dot_product_attention's "
    "enable_gqa=True shares them out inside torch. An answer built on them checks nothing of "
    "yours: split the heads and give each query head its key/value head yourself.",
)


EXERCISES = (GROUPED_MULTIHEAD,)
