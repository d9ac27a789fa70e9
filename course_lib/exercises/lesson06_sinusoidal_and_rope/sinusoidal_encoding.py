"""Lesson 06's sinusoidal_encoding exercise."""

import torch

from course_lib import position_demos, positional
from course_lib.exercises.core import Bug, Case, Exercise
from course_lib.positional import sinusoidal_encoding

BASE = 10000.0

# ---------------------------------------------------------------- sinusoidal_encoding


def sinusoidal_reference(seq_len, d_model):
    return sinusoidal_encoding(seq_len, d_model)  # (T, D)


def _sinusoidal_cases() -> list[Case]:
    return [
        Case((3, 4), label="3 positions, D = 4"),
        Case((12, 8), label="12 positions, D = 8"),
        Case((7, 16), label="7 positions, D = 16"),
        Case((50, 32), label="50 positions, D = 32"),
        Case((1, 2), label="one position, one pair"),
    ]


def _angles(seq_len, d_model, exponent=None, first=0):
    """(T, D/2) angles p / 10000**(2i/D), with the exponent and first position changeable."""
    p = torch.arange(first, first + seq_len, dtype=torch.float32)[:, None]  # (T, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)  # (D/2,)
    power = two_i / d_model if exponent is None else exponent(two_i, d_model)  # (D/2,)
    return p / BASE**power  # (T, 1) / (D/2,) -> (T, D/2)


def _interleave(even, odd):
    return torch.stack((even, odd), dim=-1).flatten(-2)  # (T, D/2, 2) -> (T, D)


def _row_of_positions(seq_len, d_model):
    """(T,) positions divided by (D/2,) speeds: broadcasts only when T = D/2."""
    p = torch.arange(seq_len, dtype=torch.float32)  # (T,): a row, not a column
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)  # (D/2,)
    angles = p / BASE ** (two_i / d_model)  # raises unless T = D/2
    return _interleave(angles.sin(), angles.cos())


SINUSOIDAL_ENCODING = Exercise(
    name="sinusoidal_encoding",
    lesson="06_sinusoidal_and_rope",
    reference=sinusoidal_reference,
    cases=_sinusoidal_cases,
    idea="the section 'Sinusoidal encoding': the formula for PE[p, 2i] and PE[p, 2i+1], and "
    "the heatmap of the table for 64 positions and D = 32 below it",
    bugs=(
        Bug(
            "swapped",
            lambda T, D: _interleave(_angles(T, D).cos(), _angles(T, D).sin()),
            "your even columns hold cosines and your odd columns sines",
            "sin and cos are swapped: the sine of pair i's angle goes in column 2i, its cosine "
            "in column 2i+1.",
        ),
        Bug(
            "i_over_d",
            lambda T, D: _interleave(
                *(f(_angles(T, D, lambda two_i, d: two_i / 2 / d)) for f in (torch.sin, torch.cos))
            ),
            "your later columns slow down too gently: the last pair turns far faster than "
            "10000**(-(D-2)/D) per position",
            "the exponent is 2i/D with i the pair's index (0, 1, ..., D/2 - 1); yours is i/D, "
            "so the speeds only fall to about 1/100 instead of about 1/10000.",
        ),
        Bug(
            "column_exponent",
            lambda T, D: _interleave(
                _angles(T, D).sin(), _angles(T, D, lambda two_i, d: (two_i + 1) / d).cos()
            ),
            "your even columns are right, your odd ones are not",
            "columns 2i and 2i+1 are one pair and share one angle; your cosine column used an "
            "exponent of its own, (2i+1)/D, as if each column were its own pair.",
        ),
        Bug(
            "halves",
            lambda T, D: torch.cat((_angles(T, D).sin(), _angles(T, D).cos()), dim=-1),
            "your first half of the columns holds only sines, the second half only cosines",
            "you put the sines side by side and the cosines after them; the course interleaves "
            "them, pair i in columns 2i (sine) and 2i+1 (cosine).",
        ),
        Bug(
            "multiply",
            lambda T, D: _interleave(
                *(f(_angles(T, D, lambda two_i, d: -two_i / d)) for f in (torch.sin, torch.cos))
            ),
            "your later columns turn faster than the first ones instead of slower",
            "the angle is the position divided by 10000**(2i/D); yours multiplies by it.",
        ),
        Bug(
            "from_one",
            lambda T, D: _interleave(*(f(_angles(T, D, first=1)) for f in (torch.sin, torch.cos))),
            "your first row is not [0, 1, 0, 1, ...]",
            "your positions start at 1; the first token sits at position 0, where every sine is "
            "0 and every cosine is 1.",
        ),
        Bug(
            "row_of_positions",
            _row_of_positions,
            "your positions and your pairs did not meet in a (T, D/2) table of angles",
            "a (T,) row of positions divided by a (D/2,) row of speeds lines the two up entry "
            "by entry, which only fits when T = D/2 (and is then wrong). Make the positions a "
            "column of shape (T, 1), so that every position meets every pair's speed.",
        ),
    ),
    hints=(
        "Row p, columns 2i and 2i+1: the sine and the cosine of p / 10000**(2i/D), with i "
        "counting pairs from 0. A (T, 1) column of positions divided by a (D/2,) row of "
        "10000**(2i/D) gives every angle at once.",
    ),
    # the course's functions that compute the table, or its angles p / 10000**(2i/D): the
    # public ones by name, and _angle_table, which every other route to the angles runs
    # (RoPE's apply_rope and apply_rope_half, a RotaryEmbedding's cos and sin tables)
    forbidden=(
        (positional, "sinusoidal_encoding"),
        (position_demos, "sinusoidal_at"),
        (positional, "rope_angles"),
        (positional, "apply_rope"),
        (positional, "apply_rope_half"),
        (positional.RotaryEmbedding, "__init__"),  # it builds its cos and sin tables
        (positional, "_angle_table"),
    ),
    forbidden_hint="The check compares your table with the course's "
    "positional.sinusoidal_encoding, so handing it that function, or another course function "
    "that computes the table or its angles (position_demos.sinusoidal_at, "
    "positional.rope_angles, RoPE's apply_rope or a RotaryEmbedding's sin and cos tables), "
    "checks nothing. Build the angles yourself, every position against every pair's speed, "
    "then their sines and cosines.",
)
