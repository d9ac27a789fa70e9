"""Lesson 02b's attention exercise: every query at once, batched, with an optional mask.

Lesson 02a works the four steps for one query of one sentence, one dot product per key in a
Python loop, and `masked_fill` with minus infinity on other scores; lesson 02b lists the four
steps again and works `transpose(-2, -1)` on other tensors; the exercise asks for every query
at once, any leading batch dimensions, the mask, and d_v != d_k. Its check refuses a call to
the course's attention or torch's fused one. The cases are ordered so that an axis counted
from the front (dim=1, transpose(1, 2), shape[2]) gives wrong numbers, with a hint of its own,
before a case where it would only raise.
"""

import math
import warnings

import torch
import torch.nn.functional as F

from course_lib import attention
from course_lib.attention import causal_mask
from course_lib.exercises.core import Bug, Case, Exercise


def attention_reference(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5  # (..., T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)  # (..., T_q, T_k)
    return weights @ v, weights  # (..., T_q, d_v), (..., T_q, T_k)


def _randn(g, *shape, dtype=torch.float32):
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


def _qkv(g, q_shape, k_shape, d_v, dtype=torch.float32):
    """q of q_shape, k of k_shape, v like k with width d_v."""
    return (
        _randn(g, *q_shape, dtype=dtype),
        _randn(g, *k_shape, dtype=dtype),
        _randn(g, *k_shape[:-1], d_v, dtype=dtype),
    )


def _attention_cases() -> list[Case]:
    g = torch.Generator().manual_seed(1)
    padding = torch.ones(2, 1, 1, 6, dtype=torch.bool)  # (B, 1, 1, T_k)
    padding[1, ..., 4:] = False  # the second sentence is 4 tokens long, then padding
    own = torch.rand(2, 5, 5, generator=g) < 0.5  # (B, T_q, T_k): a mask per sentence
    own |= torch.eye(5, dtype=torch.bool)  # every query may attend somewhere
    large = _qkv(g, (2, 5, 8), (2, 5, 8), 8)
    return [
        Case(_qkv(g, (2, 5, 8), (2, 5, 8), 8), label="a batch of 2 sentences"),
        # T = d = H: a transpose of axes 1 and 2 still lines up, so it gives numbers
        Case(_qkv(g, (2, 4, 4, 4), (2, 4, 4, 4), 4), label="4-D: two batch axes"),
        Case(_qkv(g, (2, 3, 6, 8), (2, 3, 6, 8), 8), label="4-D, with T != d"),
        Case(_qkv(g, (6, 8), (6, 8), 8), label="one sentence, no batch dimensions"),
        Case(_qkv(g, (2, 3, 8), (2, 7, 8), 5), label="fewer queries than keys, d_v != d_k"),
        Case(
            _qkv(g, (2, 3, 4, 8), (3, 6, 8), 8),
            label="k and v with fewer batch dimensions than q (shared by both sentences)",
        ),
        Case(
            _qkv(g, (2, 5, 8), (2, 5, 8), 8),
            {"mask": causal_mask(5)},
            label="one causal mask for the whole batch",
        ),
        Case(_qkv(g, (6, 8), (6, 8), 8), {"mask": causal_mask(6)}, label="one sentence, masked"),
        Case(
            _qkv(g, (2, 3, 4, 8), (2, 3, 6, 8), 5),
            {"mask": padding},
            label="a padding mask per sentence (the second has 4 real tokens)",
        ),
        Case(
            _qkv(g, (2, 5, 8), (2, 5, 8), 8),
            {"mask": own},
            label="a different mask for each sentence",
        ),
        Case(
            (large[0] * 12, large[1] * 12, large[2]),
            label="large scores (q and k 12 times larger)",
        ),
        Case(
            _qkv(g, (2, 5, 8), (2, 5, 8), 8, dtype=torch.float64),
            {"mask": causal_mask(5)},
            label="float64 q, k, v: the results stay float64",
        ),
    ]


def _attend(q, k, v, mask=None, *, scale=None, after=False, axis=-1, fill=-math.inf,
            keys=None, softmax=None):  # fmt: skip
    """Attention with one step done the way a learner might get it wrong."""
    factor = 1 / math.sqrt(q.shape[-1]) if scale is None else scale(q, k, v)
    keys_t = k.transpose(-2, -1) if keys is None else keys(k)  # (..., d_k, T_k)
    scores = q @ keys_t  # (..., T_q, T_k)
    if not after:
        scores = scores * factor
    if mask is not None:
        scores = scores.masked_fill(~mask, fill)
    weights = torch.softmax(scores, dim=axis) if softmax is None else softmax(scores)
    if after:
        weights = weights * factor
    return weights @ v, weights


def _inverted_mask(q, k, v, mask=None):
    """Fills the scores where the mask is True: the same as the right mask, flipped."""
    return attention_reference(q, k, v, None if mask is None else ~mask)


def _mask_after_softmax(q, k, v, mask=None):
    """Zeroes the blocked weights after an unmasked softmax."""
    if mask is None:
        return attention_reference(q, k, v)
    weights = attention_reference(q, k, v)[1] * mask  # (..., T_q, T_k)
    return weights @ v, weights


def _or_reference(wrong):
    """A bug that only has a meaning where its shapes line up; elsewhere the learner's code
    raises (the check reports that), and the bug must not match: the reference stands in."""

    def safe(*args, **kwargs):
        try:
            return wrong(*args, **kwargs)
        except (RuntimeError, IndexError):
            return attention_reference(*args, **kwargs)

    return safe


def _transpose_1_2(k):
    return k.transpose(1, 2)  # hard-coded: the last two axes of a 3-D k only


def _every_axis_reversed(k):
    """k.T, as a learner writes it: on more than two axes it reverses all of them."""
    with warnings.catch_warnings():  # torch warns that .T on 3-D tensors is deprecated
        warnings.simplefilter("ignore", UserWarning)
        return k.T


def _unstable_softmax(scores):
    e = scores.exp()
    return e / e.sum(dim=-1, keepdim=True)


def _swapped(q, k, v, mask=None):
    out, weights = attention_reference(q, k, v, mask)
    return weights, out


ATTENTION = Exercise(
    name="attention",
    lesson="02b_attention_in_batches",
    reference=attention_reference,
    cases=_attention_cases,
    idea="the four steps listed in 'Attention for every query at once' (lesson 02a works them "
    "for the verb, and masked_fill in its section on the causal mask)",
    bugs=(
        Bug(
            "swapped_results",
            _swapped,
            "your function returns the weights first and the output second",
            "the contract returns (output, weights), in that order.",
        ),
        Bug(
            "softmax_over_queries",
            lambda q, k, v, mask=None: _attend(q, k, v, mask, axis=-2),
            "your weights sum to 1 down each column (over the queries), not along each row",
            "the softmax ran over the queries axis, the second to last. Each query's weights "
            "are a distribution over the keys, the last axis. An axis counted from the front "
            "(1 or 2) is the keys axis for one number of batch dimensions only: count from "
            "the end.",
        ),
        Bug(
            "transpose_1_2",
            _or_reference(lambda q, k, v, mask=None: _attend(q, k, v, mask, keys=_transpose_1_2)),
            "right on 3-D inputs, wrong on 4-D ones",
            "you turn k around by swapping axes 1 and 2. Those are the last two axes of a 3-D "
            "k only: on a 4-D k they are the second batch axis and the positions, and on a "
            "2-D k axis 2 does not exist. The two axes to swap are the last two, whatever "
            "stands in front.",
        ),
        Bug(
            "dot_T_on_a_batch",
            lambda q, k, v, mask=None: _attend(q, k, v, mask, keys=_every_axis_reversed),
            "`.T` reversed every axis of a batched k",
            "k.T turns k around completely: a (B, T_k, d_k) k becomes (d_k, T_k, B), and a 4-D "
            "one is reversed the same way, so the batch axes meet the wrong axes of q. "
            "On one (T_k, d_k) sentence it happens to be right. Only the last two axes should "
            "swap, whatever stands in front of them.",
        ),
        Bug(
            "no_scale",
            lambda q, k, v, mask=None: _attend(q, k, v, mask, scale=lambda *a: 1.0),
            "your weights are more peaked than the course's: the scores are not scaled",
            "the scores q·k go into the softmax as they are; they are divided by the square "
            "root of d_k first.",
        ),
        Bug(
            "scale_by_d_k",
            lambda q, k, v, mask=None: _attend(
                q, k, v, mask, scale=lambda q, k, v: 1 / q.shape[-1]
            ),
            "your weights are flatter than the course's: the scores are shrunk too much",
            "you divide the scores by d_k itself; the scale is the square root of d_k.",
        ),
        Bug(
            "scale_by_d_v",
            lambda q, k, v, mask=None: _attend(
                q, k, v, mask, scale=lambda q, k, v: 1 / math.sqrt(v.shape[-1])
            ),
            "right when d_v = d_k, wrong when the values are narrower or wider than the keys",
            "you divide by the square root of d_v, the width of v. The scores are dot products "
            "of queries with keys, so the scale is the square root of their width d_k, the "
            "last axis of q (or k); v never enters the scores.",
        ),
        Bug(
            "scale_after_softmax",
            lambda q, k, v, mask=None: _attend(q, k, v, mask, after=True),
            "your weights do not sum to 1: each row sums to 1/sqrt(d_k)",
            "you divide after the softmax, so the weights shrink instead of the scores. The "
            "scale belongs to the scores, before the softmax.",
        ),
        Bug(
            "scale_by_length",
            lambda q, k, v, mask=None: _attend(
                q, k, v, mask, scale=lambda q, k, v: 1 / math.sqrt(q.shape[-2])
            ),
            "your scale follows the number of queries T, not the width d_k",
            "the scale is 1/sqrt(d_k), d_k being the last axis of q. A width read from an axis "
            "counted from the front (shape[1], shape[2]) is the length T on some ranks.",
        ),
        Bug(
            "scale_fixed_at_2",
            lambda q, k, v, mask=None: _attend(q, k, v, mask, scale=lambda *a: 1 / math.sqrt(2)),
            "your scale is 1/sqrt(2) whatever the width of q: it does not follow q",
            "does your function read lesson 02a's d_k = 2 (a name from outside the function)? "
            "It must take d_k from q itself.",
        ),
        Bug(
            "mask_ignored",
            lambda q, k, v, mask=None: attention_reference(q, k, v),
            "with a mask, your weights are the unmasked ones: blocked keys still get weight",
            "the mask never reaches the scores. masked_fill and its friends return a new "
            "tensor and leave the old one alone: a line that calls one without keeping its "
            "result changes nothing.",
        ),
        Bug(
            "inverted_mask",
            _inverted_mask,
            "with a mask, your weights sit on the keys the mask blocks, and rows where the "
            "mask allows every key come out as NaN",
            "your mask blocks the allowed keys and lets the blocked ones through: True in the "
            "mask means the query MAY attend there, so the scores to fill are where it is False.",
        ),
        Bug(
            "fill_zero",
            lambda q, k, v, mask=None: _attend(q, k, v, mask, fill=0.0),
            "with a mask, blocked keys still get weight: their weights are not 0",
            "you set the blocked scores to 0, but e^0 = 1: a score of 0 still takes its share "
            "of the softmax. A blocked score must become minus infinity, so its e^score is 0.",
        ),
        Bug(
            "mask_after_softmax",
            _mask_after_softmax,
            "with a mask, the blocked weights are 0 but the rows no longer sum to 1",
            "you zero the blocked weights after the softmax, so the allowed ones keep their "
            "old shares. Block the scores before the softmax and it shares the whole 1 among "
            "the allowed keys.",
        ),
        Bug(
            "unstable_softmax",
            lambda q, k, v, mask=None: _attend(q, k, v, mask, softmax=_unstable_softmax),
            "large scores come out as NaN",
            "your own softmax takes exp of the raw scores: exp overflows to inf above about "
            "88 in float32, and inf / inf is NaN. Subtract each row's largest score first "
            "(lesson 00), or use torch's softmax, which does.",
        ),
    ),
    hints=(
        "Do lesson 02a's four steps for every query at once, then ask of each step which axis "
        "it works on once batch dimensions stand in front. Counted from the end, the keys are "
        "always the last axis of the scores and the width d_k the last axis of q.",
        "The mask may have fewer dimensions than the scores (one (T_q, T_k) mask for the whole "
        "batch): use operations that broadcast it rather than indexing with it. True means the "
        "query may attend; a blocked score becomes minus infinity before the softmax.",
    ),
    forbidden=(
        (attention, "scaled_dot_product_attention"),
        (attention, "attend"),
        (F, "scaled_dot_product_attention"),
    ),
    forbidden_hint="The course's scaled_dot_product_attention (and attend, which it calls) and "
    "torch's F.scaled_dot_product_attention compute this very function, so calling one "
    "proves nothing. Write lesson 02a's four steps yourself, with matrix "
    "products over every query at once.",
)
