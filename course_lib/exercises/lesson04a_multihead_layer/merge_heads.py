"""Lesson 04a_multihead_layer's merge_heads exercise: (B, H, T, d) -> (B, T, D)."""

import torch

from course_lib.exercises.core import Bug, Case, Exercise
from course_lib.exercises.lesson13a_what_generation_recomputes import attend_cached
from course_lib.exercises.lesson15a_sliding_window import attend_rolling


def merge_heads_reference(y):
    B, H, T, d = y.shape
    return y.transpose(1, 2).reshape(B, T, H * d)  # (B, T, H, d) -> (B, T, D)


def _merge_cases() -> list[Case]:
    g = torch.Generator().manual_seed(4)
    return [
        Case((torch.randn(2, 3, 5, 4, generator=g),), label="three heads of width 4"),
        Case((torch.randn(1, 4, 7, 2, generator=g),), label="four heads of width 2"),
        Case((torch.randn(3, 2, 3, 8, generator=g),), label="two heads of width 8"),
        Case((torch.randn(2, 1, 4, 6, generator=g),), label="one head"),
        Case(
            (torch.randn(2, 5, 3, 2, generator=g, dtype=torch.float64),),
            label="a float64 y: the result keeps y's dtype",
        ),
    ]


def _merge_no_swap(y):
    B, H, T, d = y.shape
    return y.reshape(B, T, H * d)  # the right shape, read in memory order


def _merge_swap_only(y):
    return y.transpose(1, 2)  # (B, T, H, d)


def _merge_interleaved(y):
    B, H, T, d = y.shape
    return y.permute(0, 2, 3, 1).reshape(B, T, H * d)  # (B, T, d, H) -> (B, T, D)


def _merge_sum(y):
    return y.sum(dim=1)  # (B, T, d)


def _merge_along_tokens(y):
    return torch.cat(y.unbind(dim=1), dim=1)  # (B, H * T, d)


def _merge_mean(y):
    return y.mean(dim=1)  # (B, T, d)


def _merge_flatten_tokens(y):
    return y.transpose(1, 2).flatten(1)  # (B, T * H * d): the tokens joined as well


MERGE_HEADS = Exercise(
    name="merge_heads",
    lesson="04a_multihead_layer",
    reference=merge_heads_reference,
    cases=_merge_cases,
    idea="the section 'From one wide attention to H narrow ones': the numbered tensor cut into "
    "heads (merging puts every number back where it came from), and what transpose and "
    "reshape do",
    bugs=(
        Bug(
            "swap_only",
            _merge_swap_only,
            "your result has shape (B, T, H, d): the axes are back in order, but the heads "
            "are not joined yet",
            "after the swap, each token still holds H separate pieces of width d; join the "
            "last two axes into one of width H * d.",
        ),
        Bug(
            "no_swap",
            _merge_no_swap,
            "right shape, but token t's row holds numbers of other tokens",
            "you read (B, H, T, d) straight into (B, T, H * d) without bringing the token "
            "axis in front of the head axis first: a reshape reads in memory order, where "
            "all of head 0's tokens come before head 1's.",
        ),
        Bug(
            "interleaved",
            _merge_interleaved,
            "right shape, but the heads are interleaved feature by feature",
            "head h's d numbers must sit side by side, as the block h*d .. (h+1)*d - 1 of the "
            "token's row; yours alternate between heads, which is what joining the axes in "
            "the order (d, H) instead of (H, d) gives.",
        ),
        Bug(
            "sum",
            _merge_sum,
            "your result is d wide, not D: you added the heads together",
            "merging puts the heads side by side, so the width goes back to D = H * d; "
            "nothing is added.",
        ),
        Bug(
            "mean",
            _merge_mean,
            "your result is d wide, not D: you averaged the heads",
            "merging puts the heads side by side, so the width goes back to D = H * d; "
            "nothing is averaged.",
        ),
        Bug(
            "flatten_tokens",
            _merge_flatten_tokens,
            "your result has 2 axes, (B, T * D): the tokens were joined along with the heads",
            "only each token's heads are joined: the result keeps its token axis, (B, T, D). "
            "Join the last two axes only.",
        ),
        Bug(
            "along_tokens",
            _merge_along_tokens,
            "your result has H * T rows: the heads were joined one after another along the tokens",
            "the heads of one token go side by side along the feature axis: the result keeps "
            "T tokens, each H * d wide.",
        ),
    ),
    hints=(
        "merge_heads undoes split_heads: merge_heads(split_heads(x, H)) must be x again, so "
        "token t's row is head 0's d numbers, then head 1's, and so on.",
        "Nothing is computed, numbers only move: one swap of two axes, then one join of two "
        "axes into one.",
    ),
    # the references of later lessons' exercises merge their heads with a function of their
    # own (the reference, reached through earlier_work, is caught by the core)
    forbidden=(
        (attend_cached, "_merged"),
        (attend_rolling, "_merged"),
    ),
    forbidden_hint="The course's later lessons' exercises merge their heads with a function of "
    "their own that does what merge_heads asks, so calling it checks nothing. Write the merge "
    "yourself: the section 'From one wide attention to H narrow ones' has the tools.",
)
