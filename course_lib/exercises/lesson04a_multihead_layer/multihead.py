"""Lesson 04a_multihead_layer's multihead exercise, checked against torch's multi-head attention."""

import math

import torch
import torch.nn.functional as F
from torch import nn

from course_lib import gqa
from course_lib import multihead as course_multihead
from course_lib.exercises import lesson13c_grouped_query_attention as grouped_multihead
from course_lib.exercises.core import Bug, Case, Exercise
from course_lib.exercises.lesson04a_multihead_layer import merge_heads as merge_module
from course_lib.exercises.lesson04a_multihead_layer import split_heads as split_module
from course_lib.exercises.lesson04a_multihead_layer.merge_heads import (
    _merge_no_swap,
    merge_heads_reference,
)
from course_lib.exercises.lesson04a_multihead_layer.split_heads import (
    _split_view_straight,
    split_heads_reference,
)
from course_lib.exercises.lesson13a_what_generation_recomputes import attend_cached
from course_lib.exercises.lesson15a_sliding_window import attend_rolling


def torch_attn_mask(mask, B: int, num_heads: int, T: int):
    """Our mask (True = may attend, broadcastable to (B, H, T, T)) in the form torch's
    multi-head attention takes: True = blocked, (T, T) or (B * H, T, T)."""
    if mask is None:
        return None
    if mask.dim() == 2:
        return ~mask  # (T, T): the same for every sequence and head
    return ~mask.expand(B, num_heads, T, T).reshape(B * num_heads, T, T)  # (B * H, T, T)


def _torch_multihead(x, qkv: nn.Linear, out: nn.Linear, num_heads: int, mask=None):
    """torch.nn.MultiheadAttention's own forward (batch_first), with qkv's and out's weights."""
    B, T, D = x.shape
    seq_first = x.transpose(0, 1)  # (T, B, D): the layout torch's function works in
    y, _ = F.multi_head_attention_forward(
        seq_first, seq_first, seq_first, D, num_heads, qkv.weight, qkv.bias, None, None, False,
        0.0, out.weight, out.bias, training=False, need_weights=False,
        attn_mask=torch_attn_mask(mask, B, num_heads, T),
    )  # fmt: skip
    return y.transpose(0, 1)  # (B, T, D)


def _fused_multihead(x, qkv, out, num_heads, mask=None, rope=None):
    """The same layer with a rope (torch's has none): torch's fused attention in every head."""
    D = x.shape[-1]
    q, k, v = (split_heads_reference(t, num_heads) for t in qkv(x).split(D, dim=-1))
    if rope is not None:
        q, k = rope(q), rope(k)  # each (B, H, T, d)
    y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, H, T, d)
    return out(merge_heads_reference(y))  # (B, T, D)


def multihead_reference(x, qkv, out, num_heads, mask=None, rope=None):
    if rope is None and isinstance(qkv, nn.Linear) and isinstance(out, nn.Linear):
        return _torch_multihead(x, qkv, out, num_heads, mask)
    return _fused_multihead(x, qkv, out, num_heads, mask, rope)


# ---------------------------------------------------------------- multihead


def _layer(D: int, H: int, g: torch.Generator, dtype=torch.float32):
    """qkv and out holding a torch.nn.MultiheadAttention's weights: qkv a Linear(D, 3D) with
    its in_proj weights, out a Linear(D, D) with its out_proj weights (a plain Linear, so
    the hints name it as one)."""
    with torch.random.fork_rng(devices=[]):  # building the layers leaves the seed alone
        torch_layer = nn.MultiheadAttention(D, H, batch_first=True, dtype=dtype)
        qkv = nn.Linear(D, 3 * D, dtype=dtype)
        out = nn.Linear(D, D, dtype=dtype)
    with torch.no_grad():
        for p in torch_layer.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=dtype) / math.sqrt(D))
        qkv.weight.copy_(torch_layer.in_proj_weight)
        qkv.bias.copy_(torch_layer.in_proj_bias)
    out.load_state_dict(torch_layer.out_proj.state_dict())
    return qkv, out


def _multihead_cases() -> list[Case]:
    from course_lib.attention import causal_mask  # here: the lesson-00 checks never need it
    from course_lib.positional import RotaryEmbedding

    g = torch.Generator().manual_seed(5)

    def case(B, T, D, H, label, mask=None, rope=None, dtype=torch.float32):
        qkv, out = _layer(D, H, g, dtype)
        x = torch.randn(B, T, D, generator=g, dtype=dtype)
        return Case((x, qkv, out, H), {"mask": mask, "rope": rope}, label=label)

    padded = causal_mask(6) & (torch.arange(6) < torch.tensor([[6], [4]]))[:, None, None, :]
    # lesson 02b's padding mask (B, 1, T) with an axis for the heads: (B, 1, 1, T)
    padding = (torch.arange(5) < torch.tensor([[5], [3]]))[:, None, None, :]
    return [
        case(2, 5, 12, 3, "three heads, no mask, no rope"),
        case(1, 7, 16, 4, "a causal (T, T) mask", mask=causal_mask(7)),
        case(3, 4, 8, 1, "one head: d = D", mask=causal_mask(4)),
        case(
            2, 6, 16, 2, "a (B, 1, T, T) mask: the second sequence is 4 tokens long", mask=padded
        ),  # fmt: skip
        case(
            2,
            5,
            12,
            3,
            "a (B, 1, 1, T) padding mask: the second line is 3 tokens long",
            mask=padding,
        ),  # fmt: skip
        case(2, 5, 16, 4, "rope given", rope=RotaryEmbedding(4)),
        case(1, 6, 24, 3, "rope and a causal mask", mask=causal_mask(6), rope=RotaryEmbedding(8)),
        case(
            2,
            5,
            12,
            2,
            "float64 x and layers: the result stays float64",
            mask=causal_mask(5),
            dtype=torch.float64,
        ),  # fmt: skip
    ]


def _heads(x, qkv, num_heads, rope=None, *, rope_v=False, rope_k=True):
    """q, k, v of every head (B, H, T, d), the right way, with the rope switches a bug needs."""
    D = x.shape[-1]
    q, k, v = (split_heads_reference(t, num_heads) for t in qkv(x).split(D, dim=-1))
    if rope is not None:
        q = rope(q)
        k = rope(k) if rope_k else k
        v = rope(v) if rope_v else v
    return q, k, v


def _attend(q, k, v, mask=None, width=None):
    """Lesson 02b's attention, dividing the scores by sqrt(width) (default: q's own width)."""
    width = q.shape[-1] if width is None else width
    scores = q @ k.transpose(-2, -1) / math.sqrt(width)  # (B, H, T, T)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)  # (B, H, T, T)
    return weights @ v, weights  # (B, H, T, d), (B, H, T, T)


def _mh_returns_pair(x, qkv, out, num_heads, mask=None, rope=None):
    y, weights = _attend(*_heads(x, qkv, num_heads, rope), mask)
    return out(merge_heads_reference(y)), weights


def _mh_no_out(x, qkv, out, num_heads, mask=None, rope=None):
    y, _ = _attend(*_heads(x, qkv, num_heads, rope), mask)
    return merge_heads_reference(y)  # (B, T, D), never projected


def _mh_no_qkv_bias(x, qkv, out, num_heads, mask=None, rope=None):
    """The worked example's projection copied: qkv_projection(x, qkv.weight, D), no bias."""
    D = x.shape[-1]
    unbiased = x @ qkv.weight.T  # (B, T, 3D): qkv(x) less qkv.bias
    q, k, v = (split_heads_reference(t, num_heads) for t in unbiased.split(D, dim=-1))
    if rope is not None:
        q, k = rope(q), rope(k)
    y, _ = _attend(q, k, v, mask)
    return out(merge_heads_reference(y))


def _mh_mask_ignored(x, qkv, out, num_heads, mask=None, rope=None):
    y, _ = _attend(*_heads(x, qkv, num_heads, rope))
    return out(merge_heads_reference(y))


def _mh_mask_inverted(x, qkv, out, num_heads, mask=None, rope=None):
    y, _ = _attend(*_heads(x, qkv, num_heads, rope), None if mask is None else ~mask)
    return out(merge_heads_reference(y))


def _mh_scale_by_width_d_model(x, qkv, out, num_heads, mask=None, rope=None):
    y, _ = _attend(*_heads(x, qkv, num_heads, rope), mask, width=x.shape[-1])
    return out(merge_heads_reference(y))


def _mh_unscaled(x, qkv, out, num_heads, mask=None, rope=None):
    q, k, v = _heads(x, qkv, num_heads, rope)
    y, _ = _attend(q, k, v, mask, width=1)  # scores q.k, divided by nothing
    return out(merge_heads_reference(y))


def _mh_heads_before_qkv(x, qkv, out, num_heads, mask=None, rope=None):
    q, k, v = split_heads_reference(qkv(x), num_heads).chunk(3, dim=-1)  # each (B, H, T, d)
    if rope is not None:
        q, k = rope(q), rope(k)
    y, _ = _attend(q, k, v, mask)
    return out(merge_heads_reference(y))


def _mh_split_view_straight(x, qkv, out, num_heads, mask=None, rope=None):
    D = x.shape[-1]
    q, k, v = (_split_view_straight(t, num_heads) for t in qkv(x).split(D, dim=-1))
    if rope is not None:
        q, k = rope(q), rope(k)
    y, _ = _attend(q, k, v, mask)
    return out(merge_heads_reference(y))


def _mh_merge_no_swap(x, qkv, out, num_heads, mask=None, rope=None):
    y, _ = _attend(*_heads(x, qkv, num_heads, rope), mask)
    return out(_merge_no_swap(y))


def _mh_rope_ignored(x, qkv, out, num_heads, mask=None, rope=None):
    y, _ = _attend(*_heads(x, qkv, num_heads), mask)
    return out(merge_heads_reference(y))


def _mh_rope_on_v(x, qkv, out, num_heads, mask=None, rope=None):
    y, _ = _attend(*_heads(x, qkv, num_heads, rope, rope_v=True), mask)
    return out(merge_heads_reference(y))


def _mh_rope_on_q_only(x, qkv, out, num_heads, mask=None, rope=None):
    y, _ = _attend(*_heads(x, qkv, num_heads, rope, rope_k=False), mask)
    return out(merge_heads_reference(y))


MULTIHEAD = Exercise(
    name="multihead",
    lesson="04a_multihead_layer",
    reference=multihead_reference,
    cases=_multihead_cases,
    idea="the section 'The whole layer': what the layer holds and what each head does, and the "
    "worked example that rebuilds torch's one-head layer from your lesson 02a and 02b functions",
    bugs=(
        Bug(
            "returns_pair",
            _mh_returns_pair,
            "you returned a pair (output, weights); multihead returns one tensor, the "
            "layer's output (B, T, D)",
            "lesson 02b's attention returns (output, weights): keep its output, merge the "
            "heads, project, and return only that.",
        ),
        Bug(
            "no_out",
            _mh_no_out,
            "the right shape, and the numbers are what the merged heads hold before the "
            "output projection",
            "the last step is missing: `out` mixes the merged heads, and multihead returns "
            "what it gives.",
        ),
        Bug(
            "no_qkv_bias",
            _mh_no_qkv_bias,
            "the numbers are what the layer gives when q, k and v are made without qkv's bias",
            "qkv is an nn.Linear with a bias, and qkv(x) adds it. The worked example's "
            "qkv_projection(x, in_proj_weight, D) multiplies by the weight alone (torch's layer "
            "there was built with bias=False): call qkv(x) and cut what it gives into q, k, v.",
        ),
        Bug(
            "mask_ignored",
            _mh_mask_ignored,
            "with a mask, your queries still look at keys the mask blocks",
            "the mask never reaches the attention: pass it on to lesson 02b's attention, "
            "which broadcasts a (T, T) or (B, 1, T, T) mask over every head.",
        ),
        Bug(
            "mask_inverted",
            _mh_mask_inverted,
            "with a causal mask, the last token's output is NaN and the others look ahead",
            "in this course's masks True means 'may attend'; yours treats True as 'blocked' "
            "(the convention of torch.nn.MultiheadAttention's attn_mask), so the last query "
            "is left no key at all and its softmax is 0/0.",
        ),
        Bug(
            "heads_before_qkv",
            _mh_heads_before_qkv,
            "right with one head, wrong with several: each head's queries, keys and values "
            "come from the wrong features",
            "qkv(x) is laid out [q | k | v], each D wide. You split the 3D-wide tensor into "
            "heads before taking q, k and v apart, so head h's q, k and v are three pieces of "
            "one block. Take q, k and v apart first, then split each into heads.",
        ),
        Bug(
            "scale_by_d_model",
            _mh_scale_by_width_d_model,
            "right with one head, wrong with several: as if each head's scores were divided "
            "by too large a number",
            "each head's scores are divided by sqrt(d), the square root of its own width "
            "d = D / H, not by sqrt(D): a head's dot products sum d products (lesson 03a).",
        ),
        Bug(
            "unscaled",
            _mh_unscaled,
            "the numbers differ as if each head's scores were not divided by anything",
            "each head divides its scores by sqrt(d), d = D / H its own width (lesson 03a). "
            "Lesson 02b's attention does it for you when it is handed a head's d-wide q and k.",
        ),
        Bug(
            "split_view_straight",
            _mh_split_view_straight,
            "right with one head, wrong with several: the heads' rows are not their tokens",
            "q, k and v were read straight into the shape (B, H, T, d), which cuts the "
            "sequence instead of each token's features. Your split_heads check names the "
            "same mistake; fix it there.",
        ),
        Bug(
            "merge_no_swap",
            _mh_merge_no_swap,
            "right with one head, wrong with several: the merged rows hold numbers of other tokens",
            "the heads' outputs were read straight into (B, T, D) without bringing the token "
            "axis in front of the head axis first. Your merge_heads check names the same "
            "mistake.",
        ),
        Bug(
            "rope_ignored",
            _mh_rope_ignored,
            "with a rope given, your output is what the layer gives without it",
            "when rope is not None, apply it to the queries and to the keys, after splitting "
            "them into heads and before the scores.",
        ),
        Bug(
            "rope_on_v",
            _mh_rope_on_v,
            "with a rope given, your output differs: the values were rotated too",
            "rope goes on q and k only: it makes the score between two tokens depend on how "
            "far apart they are (lesson 06). The values are what gets averaged, and stay as "
            "qkv made them.",
        ),
        Bug(
            "rope_on_q_only",
            _mh_rope_on_q_only,
            "with a rope given, your output differs: only the queries were rotated",
            "rope goes on the keys as well as the queries: a score then depends on how far "
            "apart the two tokens are, not on where the query alone sits.",
        ),
    ),
    hints=(
        "In order: qkv(x), cut into q, k, v; split each into heads; rope on q and k if given; "
        "attention in every head at once, with the mask; merge the heads; out.",
        "Your multihead runs your split_heads, merge_heads and lesson 02b attention: if one of "
        "their checks did not pass, fix that first (the earlier_work line above the exercise "
        "says whose attention you use).",
    ),
    # what computes this exercise's answer, or a piece the learner writes, in torch or the
    # course: the check compares with them. Right answers that split, attend and merge their
    # own way (a loop over heads, torch.cat) pass; lesson 02b's attention, the learner's or the
    # course's through earlier_work, is the piece multihead is meant to call.
    forbidden=(
        (F, "scaled_dot_product_attention"),
        (F, "multi_head_attention_forward"),
        (nn.MultiheadAttention, "forward"),
        (course_multihead.MultiHeadAttention, "forward"),
        (course_multihead.MultiHeadAttention, "qkv_heads"),
        (course_multihead, "stacked_heads"),
        (gqa.GroupedQueryAttention, "forward"),
        (gqa, "split_qkv"),
        (split_module, "split_heads_reference"),
        (merge_module, "merge_heads_reference"),
        (attend_cached, "_heads"),
        (attend_cached, "_merged"),
        (grouped_multihead, "_split"),
        (attend_rolling, "_heads"),
        (attend_rolling, "_merged"),
    ),
    forbidden_hint="multihead is yours to assemble from your split_heads, merge_heads and "
    "lesson 02b attention. torch's multi-head layer and fused attention, and the course's own "
    "attention layers and head-cutting functions, compute what this exercise asks for (the "
    "check compares with them), so calling one checks nothing.",
)
