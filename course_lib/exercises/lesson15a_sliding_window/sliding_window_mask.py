"""Lesson 15a's sliding_window_mask exercise: the banded causal mask, with sink columns."""

import torch

from course_lib import sliding_window
from course_lib.exercises.core import Bug, Case, Exercise


def sliding_window_mask_reference(T, window, sinks=0):
    """Written another way than the course's window_mask: the causal triangle less the
    triangle `window` diagonals below, then the sink columns of the causal triangle (lesson 15a)."""
    causal = torch.ones(T, T, dtype=torch.bool).tril()  # (T, T): j <= i
    too_old = torch.ones(T, T, dtype=torch.bool).tril(-window)  # (T, T): i - j >= window
    mask = causal & ~too_old
    mask[:, :sinks] |= causal[:, :sinks]  # a sink column, from its own row on
    return mask  # (T, T)


def _cases() -> list[Case]:
    return [
        Case((8, 3), label="T = 8, a window of 3: each query reads itself and 2 keys before"),
        Case((6, 1), label="a window of 1: each query reads itself only"),
        Case((5, 5), label="a window of T: the plain causal mask"),
        Case((4, 9), label="a window longer than T: the plain causal mask"),
        Case((9, 3), {"sinks": 1}, label="a window of 3 and one sink (key 0)"),
        Case((10, 2), {"sinks": 3}, label="a window of 2 and three sinks (keys 0, 1, 2)"),
        Case((1, 4), {"sinks": 2}, label="T = 1: more sinks than positions"),
    ]


def _mask(*, width=lambda w: w, causal=True, sinks_on=True, sinks_causal=True, flip=False,
          kind="bool"):  # fmt: skip
    """The mask with one thing changed the way a learner might change it."""

    def mask(T, window, sinks=0):
        i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]  # (T, 1), (1, T)
        near = (i - j).abs() < width(window) if not causal else (i - j) < width(window)
        allowed = near & (j <= i) if causal else near
        if sinks_on:
            allowed = allowed | ((j < sinks) & (j <= i) if sinks_causal else j < sinks)
        if flip:
            allowed = allowed.T
        if kind == "float":
            return allowed.float()
        if kind == "additive":
            return torch.zeros(T, T).masked_fill(~allowed, float("-inf"))
        return allowed

    return mask


SLIDING_WINDOW_MASK = Exercise(
    name="sliding_window_mask",
    lesson="15a_sliding_window",
    reference=sliding_window_mask_reference,
    cases=_cases,
    idea="the section 'Each query sees the last W keys' and exercise 1's text",
    bugs=(
        Bug(
            "one_too_wide",
            _mask(width=lambda w: w + 1),
            "each of your queries reads one key too many: window + 1 keys",
            "a window of W holds the query itself and the W - 1 keys before it: key j is in "
            "when i - j < W, that is i - j <= W - 1. With i - j <= W the query reads W + 1.",
        ),
        Bug(
            "one_too_narrow",
            _mask(width=lambda w: w - 1),
            "each of your queries reads one key too few: window - 1 keys",
            "the query itself is one of the W keys it reads (i - j = 0): key j is in when "
            "0 <= i - j < W. With i - j < W - 1 the window holds W - 1 keys, and a window of "
            "1 holds none.",
        ),
        Bug(
            "not_causal",
            _mask(causal=False),
            "your queries read keys after themselves: the band reaches both ways",
            "the distance was taken both ways (abs(i - j) < W), so query i also reads keys "
            "i + 1 .. i + W - 1, tokens not yet written. Keep j <= i as well.",
        ),
        Bug(
            "sinks_ignored",
            _mask(sinks_on=False),
            "your mask is right without sinks and never lets a query read a sink",
            "sinks = s keeps keys 0 .. s - 1 readable by every later query, however far "
            "back: the columns j < sinks are True from the diagonal down, added to the band.",
        ),
        Bug(
            "sinks_before_written",
            _mask(sinks_causal=False),
            "your early queries read sinks that come after them",
            "a sink column j < sinks is readable only from query j on: query 0 cannot read "
            "key 1 before token 1 is written. The sink columns need j <= i too.",
        ),
        Bug(
            "transposed",
            _mask(flip=True),
            "your mask is upside down: rows are keys and columns are queries",
            "row i is query i and column j is key j, so the True entries lie on and below "
            "the diagonal, like lesson 02a's causal mask. Yours lie above it: index it [query, "
            "key].",
        ),
        Bug(
            "float_mask",
            _mask(kind="float"),
            "your numbers are right, but the mask is float 0s and 1s, not bool",
            "return a bool tensor, True where a query may read a key, as lesson 02a's causal "
            "mask: comparisons of integer tensors (<, <=) give bool tensors already, and & "
            "and | combine them.",
        ),
        Bug(
            "additive_mask",
            _mask(kind="additive"),
            "you return an additive mask (0 and -inf), not a bool mask",
            "the contract asks for True where a query may read a key; 0 / -inf is what a "
            "mask becomes when added to the scores. Return the comparison itself.",
        ),
    ),
    hints=(
        "Print your mask for T = 8, window 3, sinks 1 as 0s and 1s: row 7 should read "
        "1 0 0 0 0 1 1 1, key 0 and keys 5, 6, 7.",
        "Two index grids, i = torch.arange(T)[:, None] for queries and j = torch.arange(T)"
        "[None, :] for keys, give every (query, key) pair at once: write each condition as a "
        "comparison of i and j.",
    ),
    forbidden=((sliding_window, "window_mask"),),
    forbidden_hint="course_lib.sliding_window.window_mask is the course's own sliding-window "
    "mask, the very mask this exercise asks you to build, so handing it over checks nothing. "
    "Build the (T, T) mask from two index grids, as the worked prefix_mask does for another "
    "mask.",
)
