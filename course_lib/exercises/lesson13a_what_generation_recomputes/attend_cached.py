"""Lesson 13a's attend_cached exercise: one attention layer for new tokens, given the keys and
values of the tokens before them."""

import math

import torch
import torch.nn.functional as F
from torch import nn

from course_lib.exercises.core import Bug, Case, Exercise
from course_lib.exercises.lesson13a_what_generation_recomputes.rope_from import rope_from_reference

# ---------------------------------------------------------------- attend_cached


def _heads(t, num_heads):
    return t.unflatten(-1, (num_heads, -1)).transpose(1, 2)  # (B, T, D) -> (B, H, T, d)


def _merged(y):
    return y.transpose(1, 2).flatten(-2)  # (B, H, T, d) -> (B, T, D)


def shifted_causal(S: int, T: int) -> torch.Tensor:
    """(T, S + T) bool: new token i, at position S + i, may see keys 0 .. S + i (lesson 13a)."""
    return torch.arange(S + T)[None, :] <= torch.arange(S, S + T)[:, None]


def attend_cached_reference(x, qkv, out, num_heads, past_k, past_v, rope=None):
    """The course's attend_cached: exercise 2's answer (lesson 13a)."""
    D, S, T = x.shape[-1], past_k.shape[-2], x.shape[-2]
    q, k, v = (_heads(t, num_heads) for t in qkv(x).split(D, dim=-1))  # each (B, H, T, d)
    if rope is not None:
        q, k = rope(q, S), rope(k, S)
    k, v = torch.cat([past_k, k], dim=-2), torch.cat([past_v, v], dim=-2)  # (B, H, S + T, d)
    y = F.scaled_dot_product_attention(q, k, v, attn_mask=shifted_causal(S, T))  # (B, H, T, d)
    return out(_merged(y)), k, v


def _layer(D, g, dtype):
    with torch.random.fork_rng(devices=[]):  # building the layers leaves the seed alone
        qkv, out = nn.Linear(D, 3 * D, dtype=dtype), nn.Linear(D, D, dtype=dtype)
    with torch.no_grad():
        for p in (*qkv.parameters(), *out.parameters()):
            p.copy_(torch.randn(p.shape, generator=g, dtype=dtype) / math.sqrt(D))
    return qkv, out


def _attend_cached_cases() -> list[Case]:
    g = torch.Generator().manual_seed(31)

    def case(B, S, T, D, H, label, rope=rope_from_reference, dtype=torch.float32):
        qkv, out = _layer(D, g, dtype)
        x = torch.randn(B, S + T, D, generator=g, dtype=dtype)  # (B, S + T, D)
        empty = torch.zeros(B, H, 0, D // H, dtype=dtype)
        with torch.no_grad():
            _, past_k, past_v = attend_cached_reference(x[:, :S], qkv, out, H, empty, empty, rope)
        return Case((x[:, S:], qkv, out, H, past_k, past_v), {"rope": rope}, label=label)

    return [
        case(1, 6, 1, 16, 2, "one new token after 6 cached ones"),
        case(2, 0, 5, 16, 4, "a prompt of 5 tokens, nothing cached yet (S = 0)"),
        case(2, 4, 3, 24, 3, "3 new tokens after 4 cached ones"),
        case(1, 5, 1, 8, 1, "one head (d = D), one new token after 5"),
        case(2, 3, 2, 12, 2, "no rope: a model without positions", rope=None),
        case(1, 3, 2, 16, 4, "float64 x and layers: the results stay float64", dtype=torch.float64),
    ]


def _written(*, offset=lambda S: S, mask="shifted", keep="all", order="past first"):
    """attend_cached written out, with the switches a wrong version needs."""

    def attend(x, qkv, out, num_heads, past_k, past_v, rope=None):
        D, S, T = x.shape[-1], past_k.shape[-2], x.shape[-2]
        q, k, v = (_heads(t, num_heads) for t in qkv(x).split(D, dim=-1))  # each (B, H, T, d)
        if rope is not None:
            q, k = rope(q, offset(S)), rope(k, offset(S))
        new_k, new_v = k, v
        if order == "past first":
            k, v = torch.cat([past_k, k], dim=-2), torch.cat([past_v, v], dim=-2)
        elif order == "new first":
            k, v = torch.cat([k, past_k], dim=-2), torch.cat([v, past_v], dim=-2)
        # order "new only": the past is dropped
        width = k.shape[-2]
        allowed = {
            "shifted": shifted_causal(width - T, T),
            "none": None,
            "top left": torch.ones(T, width, dtype=torch.bool).tril(),  # is_causal=True's
        }[mask]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)  # (B, H, T, d)
        if keep == "twice":
            k, v = torch.cat([k, new_k], dim=-2), torch.cat([v, new_v], dim=-2)
        return out(_merged(y)), k, v

    return attend


ATTEND_CACHED = Exercise(
    name="attend_cached",
    lesson="13a_what_generation_recomputes",
    reference=attend_cached_reference,
    cases=_attend_cached_cases,
    idea="the section 'One layer with a cache': exercise 2's text, and the worked example "
    "above it that runs the first layer without a cache",
    bugs=(
        Bug(
            "no_offset",
            _written(offset=lambda S: 0),
            "your output is right for a prompt (nothing cached) and wrong once keys are cached",
            "the new queries and keys are turned as if they sat at positions 0, 1, ...: they "
            "sit at S, S + 1, ..., after the S cached tokens. Pass S (past_k's length along "
            "the time axis) to rope as the start.",
        ),
        Bug(
            "one_past",
            _written(offset=lambda S: S + 1),
            "your new queries and keys are turned one position too far along: the output is "
            "off once keys are cached, and the returned keys always are",
            "the new tokens start at position S, the number of cached ones (they sit at "
            "0 .. S - 1), not S + 1. With nothing cached the output cannot show it (RoPE's "
            "scores depend only on distances, and every query and key moved alike); the "
            "returned keys do.",
        ),
        Bug(
            "past_dropped",
            _written(order="new only"),
            "your output is right when nothing is cached, and your returned keys hold only the "
            "new tokens",
            "the new keys and values replace the cache instead of joining it: concatenate "
            "them after past_k and past_v along the time axis (dim -2), and attend over all "
            "of them.",
        ),
        Bug(
            "appended_twice",
            _written(keep="twice"),
            "your output is right, but your returned keys and values hold the new tokens twice",
            "the new keys and values are joined to the cache once for the attention, and "
            "then joined again to what is returned: return the keys you attended over.",
        ),
        Bug(
            "new_first",
            _written(order="new first"),
            "your returned keys are in the wrong order: the new tokens come before the cached ones",
            "concatenate the cache first, then the new tokens: [past_k, k] along the time "
            "axis, so that position p stays at index p (the mask and the next step rely on "
            "it).",
        ),
        Bug(
            "no_mask",
            _written(mask="none"),
            "your output is right for one new token, wrong when several come at once",
            "new token i must not see the new tokens after it: with T > 1 new tokens, the "
            "prompt pass needs a causal mask. One new token sees every key, so it needs none.",
        ),
        Bug(
            "mask_not_shifted",
            _written(mask="top left"),
            "your output is right for a prompt; once keys are cached, your new tokens see too "
            "few of them",
            "your mask lets new token i see keys 0 .. i only, as a (T, T) causal mask does (and "
            "F.scaled_dot_product_attention's is_causal=True, which aligns the mask to the "
            "top left). Token i sits at position S + i: it may see keys 0 .. S + i.",
        ),
    ),
    hints=(
        "Three steps beyond lesson 04a's multihead: turn the new queries and keys with "
        "rope(t, S), where S is the number of cached tokens; put the new keys and values "
        "after the cached ones along the time axis; and mask so that new token i sees keys "
        "0 .. S + i.",
        "Try it on one layer of the trained model: the first S tokens' keys and values from "
        "attend_cached with an empty cache, then the rest, against the layer run on the "
        "whole sequence with a causal mask.",
    ),
)
