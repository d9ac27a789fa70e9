"""Lesson 07a's to_rotate_half exercise: a query or key projection's rows, reordered for
rotate-half RoPE.

CONTRACT: to_rotate_half(weight, num_heads) -> weight's shape and dtype. weight (H * d, ...)
holds H heads of d rows each (an nn.Linear's weight (H * d, D), or its bias (H * d,)),
trained with RoPE's interleaved layout, pair i = rows (2i, 2i+1) of each head; the result
holds the same rows reordered within each head so that rotate-half RoPE (pair i = rows
(i, i + d/2)) on its outputs gives the same scores: row i of a head is its row 2i, row
d/2 + i its row 2i + 1. The reference reorders the way Hugging Face's conversion of Meta's
Llama weights does (a view as (H, d/2, 2, ...) with the last two head axes swapped), which
shares no code with course_lib.positional.to_rotate_half.

Every wrong version below is a mistake a learner makes, written the way it comes out; a test
(tests/test_exercises_lesson07a_rope_in_a_model.py) writes each again as a learner would
and checks its hint.
"""

import torch

from course_lib import position_demos, positional
from course_lib.exercises.core import Bug, Case, Exercise


def to_rotate_half_reference(weight, num_heads):
    rows, rest = weight.shape[0], weight.shape[1:]
    d = rows // num_heads
    pairs = weight.reshape(num_heads, d // 2, 2, *rest)  # (H, d/2, 2, ...): pair i of head h
    return pairs.transpose(1, 2).reshape(weight.shape)  # (H, 2, d/2, ...) -> (H * d, ...)


def _cases() -> list[Case]:
    g = torch.Generator().manual_seed(7)

    def randn(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=g, dtype=dtype)

    return [
        Case((torch.arange(8.0)[:, None].repeat(1, 3), 1), label="one head of d = 8, rows 0..7"),
        Case((randn(16, 5), 2), label="two heads of d = 8, a (16, 5) weight"),
        Case((randn(64, 64), 4), label="four heads of d = 16, as in the course's models"),
        Case((randn(64), 4), label="a bias (64,): four heads of d = 16"),
        Case((randn(12, 6), 3), label="three heads of d = 4"),
        Case((randn(32, 16, dtype=torch.float64), 2), label="a float64 weight keeps its dtype"),
    ]


def _head_rows(weight, num_heads, order):
    """weight's rows reordered by order(d) inside every head."""
    d = weight.shape[0] // num_heads
    inside = order(d)  # (d,)
    return weight[(torch.arange(num_heads)[:, None] * d + inside).flatten()]


def _evens_then_odds(d):
    return torch.cat((torch.arange(0, d, 2), torch.arange(1, d, 2)))  # (d,)


def _inverse(d):
    """The reordering the other way round: row 2i takes row i, row 2i+1 takes row d/2 + i."""
    return torch.stack((torch.arange(d // 2), torch.arange(d // 2, d)), dim=-1).flatten()


def _columns(weight, num_heads):
    """The head-by-head order of the rows, applied to the columns instead."""
    d = weight.shape[0] // num_heads
    order = (torch.arange(num_heads)[:, None] * d + _evens_then_odds(d)).flatten()  # (H * d,)
    return weight[:, order]


def _odds_then_evens(d):
    return torch.cat((torch.arange(1, d, 2), torch.arange(0, d, 2)))  # (d,)


TO_ROTATE_HALF = Exercise(
    name="to_rotate_half",
    lesson="07a_rope_in_a_model",
    reference=to_rotate_half_reference,
    cases=_cases,
    idea="the section 'Moving a model from one layout to the other': the worked example of one "
    "vector of width 4, and the table of which dimensions form pair i in each layout in the "
    "section 'Two layouts, one rotation'",
    bugs=(
        Bug(
            "whole_width",
            lambda w, h: _head_rows(w, 1, _evens_then_odds),
            "your rows are right for one head but not for several: your pairs cross from one "
            "head into the next",
            "you reordered all H * d rows as if they were one head (every even row of the "
            "weight, then every odd one). Each head is turned on its own: reorder the d rows "
            "of head 0, then those of head 1, and so on, each head keeping its own block.",
        ),
        Bug(
            "inverse",
            lambda w, h: _head_rows(w, h, _inverse),
            "your rows are right when d = 4 but not for wider heads: you reordered the other "
            "way round, from the rotate-half layout back to the interleaved one",
            "your result's row 2i holds the weight's row i, which is the reordering that takes "
            "a rotate-half model back to the interleaved layout. For d = 4 the two are the "
            "same; for wider heads the result's row i must be the weight's row 2i, and its "
            "row d/2 + i the weight's row 2i + 1.",
        ),
        Bug(
            "odds_first",
            lambda w, h: _head_rows(w, h, _odds_then_evens),
            "your pairs come out with their two members swapped, so every pair turns the "
            "wrong way round",
            "in the rotate-half layout, pair i is (row i, row i + d/2), and RoPE turns the first "
            "member towards the second: the even rows (each pair's first member) must come "
            "first, the odd rows after them.",
        ),
        Bug(
            "columns",
            _columns,
            "you reordered the weight's columns: its rows are the outputs",
            "an nn.Linear's weight is (outputs, inputs), and a query's dimension j is made by "
            "row j. The pairs RoPE turns are output dimensions, so it is the rows (the first "
            "axis) that move; the columns, one per input feature, stay where they are.",
        ),
    ),
    hints=(
        "Work out where dimension 2i and dimension 2i + 1 of one head must go so that the "
        "rotate-half layout pairs them, on the table of width 8 in the section 'Two layouts, one "
        "rotation' (at width 4 the right order and its reverse are the same, so the worked "
        "example cannot tell them apart); then do the same inside every head, the rows of a head "
        "staying in that head's block.",
        "The first axis is the only one that moves: a weight's columns, and a bias's single "
        "axis, keep their order along the other axes.",
    ),
    # the course's reordering (positional's, and Hugging Face's permute that lesson 07a shows
    # once the check passes), and the order inside one head that is the exercise's answer
    # (public, and the private function the course's reordering calls)
    forbidden=(
        (positional, "to_rotate_half"),
        (positional, "half_layout_order"),
        (positional, "_evens_then_odds"),
        (position_demos, "hf_permute"),
    ),
    forbidden_hint="The check compares yours with the reordering of Hugging Face's script, "
    "which the course's positional.to_rotate_half and position_demos.hf_permute make too, and "
    "positional.half_layout_order is the order inside one head: calling any of them checks "
    "nothing. Work out where row 2i and "
    "row 2i + 1 of a head must go, on the table of width 8 in the section 'Two layouts, one "
    "rotation', then do it in every head.",
)
