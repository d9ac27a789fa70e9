"""Lesson 04a_multihead_layer's split_heads exercise: (B, T, D) -> (B, H, T, d)."""

import torch

from course_lib import gqa
from course_lib import multihead as course_multihead
from course_lib.exercises import lesson13c_grouped_query_attention as grouped_multihead
from course_lib.exercises.core import Bug, Case, Exercise
from course_lib.exercises.lesson13a_what_generation_recomputes import attend_cached
from course_lib.exercises.lesson15a_sliding_window import attend_rolling


def split_heads_reference(x, num_heads):
    B, T, D = x.shape
    return x.view(B, T, num_heads, D // num_heads).transpose(1, 2)  # (B, H, T, d)


# ---------------------------------------------------------------- split_heads, merge_heads


def _split_cases() -> list[Case]:
    g = torch.Generator().manual_seed(3)
    # T, H and d differ in most cases, so axes that trade places change the shape
    return [
        Case((torch.randn(3, 3, 16, generator=g), 2), label="two heads of width 8"),
        Case((torch.randn(2, 5, 12, generator=g), 3), label="three heads of width 4"),
        Case((torch.randn(1, 7, 16, generator=g), 4), label="four heads of width 4"),
        Case((torch.randn(2, 4, 6, generator=g), 1), label="one head: d = D"),
        Case(
            (torch.randn(2, 3, 10, generator=g, dtype=torch.float64), 5),
            label="a float64 x: the result keeps x's dtype",
        ),
    ]


def _split_view_straight(x, num_heads):
    B, T, D = x.shape
    return x.reshape(B, num_heads, T, D // num_heads)  # the right shape, read in memory order


def _split_no_swap(x, num_heads):
    B, T, D = x.shape
    return x.reshape(B, T, num_heads, D // num_heads)  # (B, T, H, d)


def _split_interleaved(x, num_heads):
    B, T, D = x.shape
    return x.reshape(B, T, D // num_heads, num_heads).permute(0, 3, 1, 2)  # (B, H, T, d)


def _split_swap_first(x, num_heads):
    B, T, D = x.shape
    return x.transpose(1, 2).reshape(B, num_heads, T, D // num_heads)  # rows run along tokens


def _split_pieces_of_width_h(x, num_heads):
    return torch.stack(x.split(num_heads, dim=-1), dim=1)  # (B, D / H, T, H)


def _split_tokens_last(x, num_heads):
    B, T, D = x.shape
    return x.view(B, T, num_heads, D // num_heads).permute(0, 2, 3, 1)  # (B, H, d, T)


def _split_true_division_view(x, num_heads):
    B, T, D = x.shape
    return x.view(B, T, num_heads, D / num_heads).transpose(1, 2)  # D / H is a float


def _split_true_division_reshape(x, num_heads):
    B, T, D = x.shape
    return x.reshape(B, T, num_heads, D / num_heads).transpose(1, 2)  # D / H is a float


_TRUE_DIVISION = (
    "a shape must be whole numbers, and D / H is a float (16 / 2 is 8.0)",
    "Python's / always gives a float; a size for view or reshape must be an int. Divide "
    "with // (or let -1 stand for the size that is left).",
)


SPLIT_HEADS = Exercise(
    name="split_heads",
    lesson="04a_multihead_layer",
    reference=split_heads_reference,
    cases=_split_cases,
    idea="the section 'From one wide attention to H narrow ones': the numbered tensor cut into "
    "heads, what viewing it straight into (B, H, T, d) did, and what transpose does",
    bugs=(
        Bug(
            "no_swap",
            _split_no_swap,
            "your result has shape (B, T, H, d): the heads are cut out, but the head axis "
            "still comes after the token axis",
            "the contract wants (B, H, T, d), so that each head holds a whole (T, d) sequence "
            "for attention: the head and token axes must trade places after the cut.",
        ),
        Bug(
            "view_straight",
            _split_view_straight,
            "right shape, but a head's rows are not its tokens: row 0 of head 1 holds "
            "features of a later token, not of token 0",
            "you read (B, T, D) straight into the shape (B, H, T, d). A view reads the numbers "
            "in memory order, token after token, so that cuts the whole sequence into H runs "
            "instead of cutting each token. Cut each token's D features into (H, d) first, "
            "leaving the token axis alone, then move the head axis in front of it.",
        ),
        Bug(
            "swap_first",
            _split_swap_first,
            "right shape, but a row of d numbers mixes tokens",
            "you swapped axes before cutting: after (B, T, D) becomes (B, D, T), d numbers in "
            "a row run along the tokens of one feature, not along the features of one token. "
            "Cut D into (H, d) while the features are still the last axis, then swap.",
        ),
        Bug(
            "interleaved",
            _split_interleaved,
            "right shape, but each head holds every H-th feature (head 0 gets features 0, H, "
            "2H, ...) instead of a block of d neighbours",
            "you cut D into (d, H) instead of (H, d): the axis that comes first in a cut is "
            "the one that changes slowest in memory, and the contract wants head h to own "
            "the d consecutive features h*d .. (h+1)*d - 1.",
        ),
        Bug(
            "pieces_of_width_h",
            _split_pieces_of_width_h,
            "you made D / H heads of width H: the head and width sizes are swapped",
            "num_heads is the number of pieces, not their width: there are H heads, each "
            "d = D / H features wide.",
        ),
        Bug(
            "tokens_last",
            _split_tokens_last,
            "your result has shape (B, H, d, T): each head's tokens run along the last axis",
            "the contract wants (B, H, T, d), a (T, d) sequence per head, one row per token, "
            "as attention takes it: after the cut only the head and token axes trade places, "
            "and the d features stay last.",
        ),
        Bug("true_division_view", _split_true_division_view, *_TRUE_DIVISION),
        Bug("true_division_reshape", _split_true_division_reshape, *_TRUE_DIVISION),
    ),
    hints=(
        "Head h gets features h*d to (h+1)*d - 1 of every token, in order; the result has "
        "shape (B, H, T, d) and its [b, h, t] row is those d features of token t.",
        "Nothing is computed, numbers only move: one cut of the last axis into two, then one "
        "swap of two axes.",
    ),
    # the course's layers, and the references of later lessons' exercises, cut their heads
    # with functions of their own that do what split_heads asks (the reference, reached
    # through earlier_work, is caught by the core)
    forbidden=(
        (course_multihead, "stacked_heads"),
        (course_multihead.MultiHeadAttention, "qkv_heads"),
        (gqa, "split_qkv"),
        (attend_cached, "_heads"),
        (grouped_multihead, "_split"),
        (attend_rolling, "_heads"),
    ),
    forbidden_hint="The course's attention layers and its later lessons' exercises cut their "
    "heads with a function of their own that does what split_heads asks, so calling it checks "
    "nothing. Write the cut yourself: the section 'From one wide attention to H narrow ones' "
    "has the tools.",
)
