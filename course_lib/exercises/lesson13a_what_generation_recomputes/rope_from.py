"""Lesson 13a's rope_from exercise: lesson 06's RoPE, starting at a given position."""

import torch

from course_lib import kv_cache
from course_lib.exercises.core import Bug, Case, Exercise
from course_lib.exercises.lesson06_sinusoidal_and_rope.rope_score import COURSE_ROPE
from course_lib.exercises.lesson07a_rope_in_a_model import rope_heads as lesson07
from course_lib.positional import apply_rope_half

BASE = 10000.0  # RoPE's base, as in lesson 06

# ---------------------------------------------------------------- rope_from


def _turned(x, positions):
    """x (..., T, d) with pair (2i, 2i+1) of row t turned by positions[t] * theta_i, as a
    complex product: an independent writing of RoPE (torch.polar, not the course's
    apply_rope). Angles in float64, the result in x's dtype."""
    d = x.shape[-1]
    theta = BASE ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,)
    angles = positions.to(torch.float64)[:, None] * theta  # (T, d/2)
    turn = torch.polar(torch.ones_like(angles), angles)  # (T, d/2) complex: e^(i angle)
    pairs = torch.view_as_complex(x.double().unflatten(-1, (d // 2, 2)).contiguous())
    return torch.view_as_real(pairs * turn).flatten(-2).to(x.dtype)  # (..., T, d)


def rope_from_reference(x, start):
    """The course's rope_from: exercise 1's answer (lesson 13a)."""
    T = x.shape[-2]
    return _turned(x, torch.arange(start, start + T))  # (..., T, d)


def _rope_from_cases() -> list[Case]:
    g = torch.Generator().manual_seed(13)

    def randn(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)

    return [
        Case((randn(2, 4, 1, 16), 9), label="one new token (T = 1) at position 9, x (B, H, 1, d)"),
        Case((randn(1, 2, 6, 8), 0), label="start 0: your lesson 07a rope_heads"),
        Case((randn(2, 3, 5, 8), 4), label="5 new tokens after 4 cached ones"),
        Case((randn(3, 6), 7), label="a 2-D x (T, d): one sequence, no heads"),
        Case(
            (randn(1, 1, 3, 16, dtype=torch.float64), 1000),
            label="a float64 x at positions 1000 to 1002: the result keeps x's dtype",
        ),
    ]


def _at(positions):
    """A wrong version that turns row t by positions(start, T)[t] instead."""

    def wrong(x, start):
        return _turned(x, positions(start, x.shape[-2]))

    return wrong


ROPE_FROM = Exercise(
    name="rope_from",
    lesson="13a_what_generation_recomputes",
    reference=rope_from_reference,
    cases=_rope_from_cases,
    idea="the section 'Keys and values, computed once': exercise 1's text and its worked "
    "example, and lesson 07a's rope_heads",
    bugs=(
        Bug(
            "start_ignored",
            _at(lambda start, T: torch.arange(T)),
            "your rows are turned as if the first one sat at position 0: right for start 0, "
            "wrong for every other start",
            "start is never used: row t sits at position start + t, and turns by "
            "(start + t) * theta_i, not t * theta_i.",
        ),
        Bug(
            "one_past_start",
            _at(lambda start, T: torch.arange(start + 1, start + T + 1)),
            "your turns are one position too far along, even for start 0",
            "the first row of x sits at position start itself, not start + 1: after S cached "
            "tokens at positions 0 .. S - 1, the next one is at position S.",
        ),
        Bug(
            "every_row_at_start",
            _at(lambda start, T: torch.full((T,), start)),
            "one new token comes out right, but every row of a longer x gets the same turn",
            "each row turns by start * theta_i: the row's own offset t is missing. Row t of x "
            "sits at position start + t.",
        ),
        Bug(
            "start_subtracted",
            _at(lambda start, T: torch.arange(T) - start),
            "your turns go backwards as start grows",
            "you subtract start from the positions; the rows sit at start + t, after the "
            "tokens already cached.",
        ),
        Bug(
            "rotate_half",
            lambda x, start: apply_rope_half(x, torch.arange(start, start + x.shape[-2])),
            "your turns are by the right angles, but of the wrong pairs of dimensions",
            "you paired dimension i with dimension i + d/2 (the 'rotate half' layout); the "
            "course's RoPE, and your rope_heads, pair neighbours (x[..., 2i], x[..., 2i+1]).",
        ),
    ),
    hints=(
        "rope_from is rope_heads with the positions start, start + 1, ..., start + T - 1 "
        "down the rows of the angle table instead of 0, 1, ..., T - 1.",
        "Build a (T, d/2) table of angles (start + t) * theta_i and turn pair i of row t by "
        "its entry, as your rope_heads of lesson 07a does.",
    ),
    # the course's RoPE at any positions, and rope_heads (the course's or the learner's own)
    # on x with start rows put in front: both pass and teach nothing, and the second turns
    # start rows more for every new token, the very recomputation a cache is there to save
    forbidden=(
        *COURSE_ROPE,
        (kv_cache, "rotate_from"),
        (lesson07, "rope_heads_reference"),
    ),
    forbidden_earlier=("rope_heads",),
    forbidden_hint="rope_from builds its own angle table. The course's RoPE "
    "(positional.apply_rope, a RotaryEmbedding, kv_cache.rotate_from) takes any positions, so "
    "calling it checks nothing; and rope_heads, yours or the course's, on x with rows put in "
    "front of it turns start rows more for every new token, the recomputation a cache is "
    "there to save. Build the (T, d/2) table of angles (start + t) * theta_i yourself.",
)
