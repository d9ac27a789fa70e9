"""Lesson 02a's mask exercise: the causal mask.

The lesson prints the causal mask of its 12-token line (course_lib.attention.causal_mask) as
the pattern to build, and works torch's `triu` with an offset diagonal on a 3 by 4 matrix of
numbers (not the mask's triangle, shape or diagonal); the exercise asks for
the bool mask of any T, and its check refuses a call to the course's causal_mask and, with a
case longer than 12, a slice of the lesson's mask.
"""

import torch

from course_lib import attention
from course_lib.exercises.core import Bug, Case, Exercise


def make_causal_mask_reference(T):
    return torch.ones(T, T, dtype=torch.bool).tril()  # (T, T): True on and below the diagonal


CAUSAL_MASK = Exercise(
    name="make_causal_mask",
    lesson="02a_attention",
    reference=make_causal_mask_reference,
    cases=lambda: [
        Case((5,)),
        Case((2,)),
        Case((20,), label="longer than the lesson's 12-token line"),
        Case((1,), label="one token, which may see itself"),
    ],
    idea="the mask printed in 'The causal mask' (row t is query t, column s is key s)",
    bugs=(
        Bug(
            "lesson_mask_cut",
            lambda T: make_causal_mask_reference(12)[:T, :T],
            "your mask is right up to T = 12 and stays 12 by 12 beyond",
            "it is cut from a 12 by 12 mask, such as the lesson's `mask`: a slice of a mask "
            "made earlier cannot be longer than that mask. Build the (T, T) pattern from T.",
        ),
        Bug(
            "lesson_size",
            lambda T: make_causal_mask_reference(12),
            "your mask is 12 by 12 whatever T is",
            "it has the size of the lesson's 12-token line: is your function returning the "
            "lesson's mask, or building one from a length other than its argument T?",
        ),
        Bug(
            "transposed",
            lambda T: make_causal_mask_reference(T).T.contiguous(),
            "your True values sit on and above the diagonal",
            "row t is query t and column s is key s: query t may see keys 0..t, the columns "
            "up to and including t, which puts True on and BELOW the diagonal.",
        ),
        Bug(
            "inverted",
            lambda T: ~make_causal_mask_reference(T),
            "your mask is True exactly where it should be False",
            "True means the query MAY attend: the past and the token itself, not the future.",
        ),
        Bug(
            "no_diagonal",
            lambda T: torch.ones(T, T, dtype=torch.bool).tril(-1),
            "your diagonal is False",
            "a token may attend to itself: the diagonal belongs to the allowed part.",
        ),
        Bug(
            "not_bool",
            lambda T: make_causal_mask_reference(T).float(),
            "right pattern, but not a bool tensor",
            "attention expects True and False (dtype torch.bool), not 1 and 0 in a number "
            "dtype: make the tensor bool, or build it from a comparison, which gives bool.",
        ),
    ),
    hints=(
        "Row t of the mask is query t; column s is key s. Query t may attend to key s when s <= t.",
    ),
    forbidden=((attention, "causal_mask"),),
    forbidden_hint="The course's causal_mask is the very mask this exercise asks you to "
    "build, so calling it proves nothing. Build the (T, T) pattern from torch operations: "
    "the exercise's text names tril and triu, which keep a triangle of a matrix.",
)
