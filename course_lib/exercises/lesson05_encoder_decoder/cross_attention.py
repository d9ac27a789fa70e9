"""Lesson 05_encoder_decoder's cross_attention exercise, checked against torch's multi-head
attention given distinct query and key/value inputs."""

import math

import torch
import torch.nn.functional as F
from torch import nn

from course_lib import multihead as course_multihead
from course_lib.exercises.core import Bug, Case, Exercise
from course_lib.exercises.lesson04a_multihead_layer import (
    merge_heads_reference,
    split_heads_reference,
)
from course_lib.seq2seq import CrossAttention, cross_attention_reference


def _layers(D: int, H: int, g: torch.Generator, dtype=torch.float32):
    """q_proj, kv_proj, out holding a torch.nn.MultiheadAttention's weights: q_proj its first
    D rows of in_proj, kv_proj the 2D rows after them ([k | v]), out its out_proj."""
    with torch.random.fork_rng(devices=[]):  # building the layers leaves the seed alone
        torch_layer = nn.MultiheadAttention(D, H, batch_first=True, dtype=dtype)
        q_proj = nn.Linear(D, D, dtype=dtype)
        kv_proj = nn.Linear(D, 2 * D, dtype=dtype)
        out = nn.Linear(D, D, dtype=dtype)
    with torch.no_grad():
        for p in torch_layer.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=dtype) / math.sqrt(D))
        q_proj.weight.copy_(torch_layer.in_proj_weight[:D])
        q_proj.bias.copy_(torch_layer.in_proj_bias[:D])
        kv_proj.weight.copy_(torch_layer.in_proj_weight[D:])
        kv_proj.bias.copy_(torch_layer.in_proj_bias[D:])
    out.load_state_dict(torch_layer.out_proj.state_dict())
    return q_proj, kv_proj, out


def _cases() -> list[Case]:
    g = torch.Generator().manual_seed(26)

    def case(B, T_q, T_k, D, H, label, mask=None, dtype=torch.float32):
        q_proj, kv_proj, out = _layers(D, H, g, dtype)
        x = torch.randn(B, T_q, D, generator=g, dtype=torch.float64).to(dtype)
        memory = torch.randn(B, T_k, D, generator=g, dtype=torch.float64).to(dtype)
        return Case((x, memory, q_proj, kv_proj, out, H), {"mask": mask}, label=label)

    padding = (torch.arange(7) < torch.tensor([[7], [5]]))[:, None, None, :]  # (B, 1, 1, T_k)
    diagonal = torch.ones(6, 4, dtype=torch.bool).tril()  # (T_q, T_k): row i sees keys 0..i
    return [
        # no mask in the first cases: a mistake that swaps the two sequences then gives
        # numbers (of the other shape), which name it, rather than a shape error
        case(2, 5, 7, 12, 3, "5 queries, 7 keys and values, three heads"),
        case(2, 9, 8, 16, 2, "the lesson's shapes: 9 queries, 8 keys and values"),
        case(1, 1, 6, 8, 2, "a single query (T_q = 1) over 6 keys"),
        case(
            2,
            3,
            7,
            16,
            4,
            "a padding mask (B, 1, 1, T_k): the second memory has 5 real positions",
            mask=padding,
        ),
        case(2, 6, 4, 8, 1, "one head (d = D), a (T_q, T_k) mask", mask=diagonal),
        case(
            2,
            4,
            6,
            12,
            2,
            "float64 x, memory and layers: the result stays float64",
            dtype=torch.float64,
        ),
    ]


def _heads(x, memory, q_proj, kv_proj, num_heads, *, kv_from=None, kv_order=(0, 1)):
    """q (B, H, T_q, d) from x; k, v (B, H, T_k, d) from memory (or kv_from)."""
    D = x.shape[-1]
    source = memory if kv_from is None else kv_from
    q = split_heads_reference(q_proj(x), num_heads)
    kv = kv_proj(source).split(D, dim=-1)
    k, v = (split_heads_reference(kv[i], num_heads) for i in kv_order)
    return q, k, v


def _attend(q, k, v, mask=None, *, width=None, axis=-1):
    width = q.shape[-1] if width is None else width
    scores = q @ k.transpose(-2, -1) / math.sqrt(width)  # (B, H, T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=axis)
    return weights @ v, weights  # (B, H, T_q, d)


def _wrong(*, kv_from_x=False, kv_order=(0, 1), mask_op=None, width=None, axis=-1, project=True):
    """cross_attention with one step done the way a learner might get it wrong."""

    def wrong(x, memory, q_proj, kv_proj, out, num_heads, mask=None):
        q, k, v = _heads(
            x,
            memory,
            q_proj,
            kv_proj,
            num_heads,
            kv_from=x if kv_from_x else None,
            kv_order=kv_order,
        )
        used = mask if mask_op is None else mask_op(mask, q.shape[-2], k.shape[-2])
        w = None if width is None else width(x, memory, q)
        y, _ = _attend(q, k, v, used, width=w, axis=axis)
        merged = merge_heads_reference(y)  # (B, T_q, D)
        return out(merged) if project else merged

    return wrong


def _with_causal(mask, T_q, T_k):
    causal = torch.ones(T_q, T_k, dtype=torch.bool).tril()  # (T_q, T_k)
    return causal if mask is None else mask & causal


def _queries_from_memory(x, memory, q_proj, kv_proj, out, num_heads, mask=None):
    """The roles swapped: queries from memory, keys and values from x: (B, T_k, D)."""
    q, k, v = _heads(memory, x, q_proj, kv_proj, num_heads)
    y, _ = _attend(q, k, v, mask)
    return out(merge_heads_reference(y))


def _kv_split_into_heads_first(x, memory, q_proj, kv_proj, out, num_heads, mask=None):
    q = split_heads_reference(q_proj(x), num_heads)  # (B, H, T_q, d)
    k, v = split_heads_reference(kv_proj(memory), num_heads).chunk(2, dim=-1)  # 2d per head
    y, _ = _attend(q, k, v, mask)
    return out(merge_heads_reference(y))


def _returns_pair(x, memory, q_proj, kv_proj, out, num_heads, mask=None):
    y, weights = _attend(*_heads(x, memory, q_proj, kv_proj, num_heads), mask)
    return out(merge_heads_reference(y)), weights


CROSS_ATTENTION = Exercise(
    name="cross_attention",
    lesson="05_encoder_decoder",
    reference=cross_attention_reference,
    cases=_cases,
    idea="the section 'Cross-attention: queries from one sequence, keys and values from "
    "another', and its table of which tensor comes from where",
    bugs=(
        Bug(
            "returns_pair",
            _returns_pair,
            "you returned a pair (output, weights); cross_attention returns one tensor, "
            "(B, T_q, D)",
            "your attention returns (output, weights): keep its output, merge the heads, "
            "project with out, and return only that.",
        ),
        Bug(
            "keys_from_decoder",
            _wrong(kv_from_x=True),
            "your output is what self-attention over x gives: the keys and values come from "
            "x, not from memory",
            "kv_proj is applied to x. In cross-attention only the queries come from x (the "
            "decoder's side); the keys and the values both come from memory, the encoder's "
            "output, which has its own length T_k.",
        ),
        Bug(
            "queries_from_memory",
            _queries_from_memory,
            "your output has one row per memory position: the queries come from memory and "
            "the keys and values from x",
            "the two sequences play swapped roles. The queries (q_proj) come from x, so the "
            "output has x's length T_q; keys and values (kv_proj) come from memory.",
        ),
        Bug(
            "kv_swapped",
            _wrong(kv_order=(1, 0)),
            "your keys and values are swapped: the first half of kv_proj's output is used as "
            "the values",
            "kv_proj(memory) is laid out [k | v]: its first D features are the keys, the last "
            "D the values.",
        ),
        Bug(
            "kv_split_into_heads_first",
            _kv_split_into_heads_first,
            "right with one head, wrong with several: each head's keys and values come from "
            "the wrong features",
            "kv_proj(memory) is 2D wide, laid out [k | v]. You split it into heads before "
            "taking k and v apart, so each head's k and v are two halves of one 2d-wide "
            "block. Take k and v apart first (each D wide), then split each into heads.",
        ),
        Bug(
            "causal_mask",
            _wrong(mask_op=_with_causal),
            "query i of your output ignores memory positions after i: your cross-attention "
            "is causal",
            "you added a causal (lower-triangular) mask. Causal masks stop a position seeing "
            "its own sequence's future; cross-attention looks at another sequence, the "
            "encoder's output, which is all known before the decoder starts: every query may "
            "see every memory position the mask argument allows.",
        ),
        Bug(
            "mask_ignored",
            _wrong(mask_op=lambda mask, T_q, T_k: None),
            "with a mask, your queries still look at memory positions the mask blocks",
            "the mask never reaches the attention: pass it on to your attention, which "
            "broadcasts a (T_q, T_k) or (B, 1, 1, T_k) mask over every head.",
        ),
        Bug(
            "mask_inverted",
            _wrong(mask_op=lambda mask, T_q, T_k: None if mask is None else ~mask),
            "with a mask, your queries look only at the memory positions the mask blocks",
            "in this course's masks True means 'may attend'; yours treats True as 'blocked' "
            "(torch.nn.MultiheadAttention's attn_mask convention).",
        ),
        Bug(
            "softmax_over_queries",
            _wrong(axis=-2),
            "your weights sum to 1 over the queries (down each column), not over the memory "
            "positions",
            "each query's weights are a distribution over the keys, the last axis of the "
            "scores (B, H, T_q, T_k). With T_q != T_k the two axes are easy to tell apart: "
            "the softmax runs along the one of length T_k.",
        ),
        Bug(
            "scale_by_d_model",
            _wrong(width=lambda x, memory, q: x.shape[-1]),
            "right with one head, wrong with several: as if each head's scores were divided "
            "by too large a number",
            "each head's scores are divided by sqrt(d), its own width d = D / H, not by "
            "sqrt(D): a head's dot products sum d products.",
        ),
        Bug(
            "scale_by_memory_length",
            _wrong(width=lambda x, memory, q: memory.shape[1]),
            "your scale follows the number of memory positions T_k, not the head width d",
            "the scale is 1/sqrt(d), d the width of each head's queries and keys (their last "
            "axis). T_k, the length of memory, is how many scores each row has, not how many "
            "products each score sums.",
        ),
        Bug(
            "scale_by_query_length",
            _wrong(width=lambda x, memory, q: x.shape[1]),
            "your scale follows the number of queries T_q, not the head width d",
            "the scale is 1/sqrt(d), d the last axis of each head's queries: a width read "
            "from an axis counted from the front (shape[1]) is a length.",
        ),
        Bug(
            "no_out",
            _wrong(project=False),
            "the right shape, and the numbers are what the merged heads hold before the "
            "output projection",
            "the last step is missing: out mixes the merged heads, and cross_attention "
            "returns what it gives.",
        ),
    ),
    hints=(
        "In order: queries q_proj(x); keys and values from kv_proj(memory), cut into k and v; "
        "split each of q, k, v into heads; your attention with the mask; merge the heads; out.",
        "Your cross_attention runs your attention, split_heads and merge_heads (the "
        "earlier_work line above the exercise says whose): if one of their checks did not "
        "pass, fix that first.",
    ),
    # what computes this exercise's answer, or the cut of kv_proj's output into k and v
    # heads, in torch or the course (the reference itself is caught by the core). Your
    # split_heads and merge_heads, or the course's through earlier_work, are the pieces
    # cross_attention is meant to call.
    forbidden=(
        (F, "scaled_dot_product_attention"),
        (F, "multi_head_attention_forward"),
        (nn.MultiheadAttention, "forward"),
        (CrossAttention, "forward"),
        (CrossAttention, "heads"),
        (course_multihead, "stacked_heads"),
    ),
    forbidden_hint="cross_attention is yours to build from your attention, split_heads and "
    "merge_heads. torch's multi-head layer and fused attention, and the course's "
    "CrossAttention and its head-cutting function, compute what this exercise asks for (the "
    "check compares with them), so calling one checks nothing.",
)
