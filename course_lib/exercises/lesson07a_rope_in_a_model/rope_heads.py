"""Lesson 07a's rope_heads exercise: RoPE on every head's vectors."""

import torch

from course_lib import position_demos, positional, rope_scaling
from course_lib.exercises.core import Bug, Case, Exercise
from course_lib.exercises.lesson06_sinusoidal_and_rope.rope_score import COURSE_ROPE
from course_lib.exercises.lesson06_sinusoidal_and_rope.sinusoidal_encoding import BASE
from course_lib.exercises.lesson13a_what_generation_recomputes import rope_from
from course_lib.position_demos import rotate_pair
from course_lib.positional import apply_rope, apply_rope_half

# ---------------------------------------------------------------- rope_heads


def rope_heads_reference(x):
    return apply_rope(x, torch.arange(x.shape[-2]))  # (..., T, d)


def _rope_heads_cases() -> list[Case]:
    g = torch.Generator().manual_seed(2)

    def randn(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=g, dtype=dtype)

    return [
        Case((randn(2, 3, 4, 8),), label="x (B, H, T, d) as in the model, T = d/2"),
        Case((randn(1, 2, 9, 16),), label="x (B, H, T, d), 9 positions"),
        Case((randn(2, 6, 4),), label="a 3-D x (H, T, d)"),
        Case((randn(5, 6),), label="a 2-D x (T, d): one sequence, no heads"),
        Case((randn(3, 1, 2, 3, 4),), label="a 5-D x: any number of leading dimensions"),
        Case(
            (randn(2, 2, 7, 8, dtype=torch.float64),),
            label="a float64 x: the result keeps x's dtype",
        ),
    ]


def _rotate_by(x, angles):
    """x (..., T, d) with pair i of position t turned by angles[..., t, i] (interleaved)."""
    pairs = x.unflatten(-1, (-1, 2))  # (..., T, d/2, 2)
    return rotate_pair(pairs, angles).flatten(-2)  # (..., T, d)


def _thetas(x, exponent=lambda two_i, d: -two_i / d):
    d = x.shape[-1]
    two_i = torch.arange(0, d, 2, dtype=torch.float64)  # (d/2,)
    return BASE ** exponent(two_i, d)  # (d/2,)


def _by_head(x):
    """Each head h turned by h * theta_i at every position (2-D x: no head axis, no turn)."""
    heads = x.shape[-3] if x.dim() >= 3 else 1
    angles = torch.arange(heads, dtype=torch.float64)[:, None, None] * _thetas(x)  # (H, 1, d/2)
    return _rotate_by(x, angles.to(x.dtype))


def _transposed(x):
    """The angle table the wrong way round: position t, pair i turned by i * theta_t."""
    T, d = x.shape[-2:]
    rows = BASE ** (-torch.arange(T, dtype=torch.float64) * 2 / d)  # (T,): theta_t
    angles = rows[:, None] * torch.arange(d // 2, dtype=torch.float64)  # (T, d/2)
    return _rotate_by(x, angles.to(x.dtype))


def _with(positions=None, exponent=None):
    def wrong(x):
        T = x.shape[-2]
        p = torch.arange(T, dtype=torch.float64) if positions is None else positions(T)  # (T,)
        theta = _thetas(x) if exponent is None else _thetas(x, exponent)  # (d/2,)
        return _rotate_by(x, (p[:, None] * theta).to(x.dtype))  # (T, d/2) angles

    return wrong


def _four_axes(x):
    """B, H, T, d = x.shape: right for (B, H, T, d), a ValueError for any other number of axes."""
    B, H, T, d = x.shape
    return rope_heads_reference(x)


ROPE_HEADS = Exercise(
    name="rope_heads",
    lesson="07a_rope_in_a_model",
    reference=rope_heads_reference,
    cases=_rope_heads_cases,
    idea="the section 'RoPE inside multi-head attention': exercise 1's text and its worked "
    "example (T = 3, d = 2); your rope_score of lesson 06 turns one vector the same way",
    bugs=(
        Bug(
            "from_one",
            _with(positions=lambda T: torch.arange(1, T + 1, dtype=torch.float64)),
            "your first position is turned too: the vectors at p = 0 should come back unchanged",
            "your positions start at 1; the first token sits at position 0, and turning by 0 "
            "leaves it as it is.",
        ),
        Bug(
            "rotate_half",
            lambda x: apply_rope_half(x, torch.arange(x.shape[-2])),
            "your numbers are right at position 0 but not after",
            "you paired dimension i with dimension i + d/2 (the 'rotate half' layout); this "
            "exercise pairs neighbours, (x[..., 2i], x[..., 2i+1]), as lesson 06 did.",
        ),
        Bug(
            "by_head",
            _by_head,
            "your turn grows from head to head, not from position to position",
            "the angles follow the head index (the axis before T) instead of the position p, "
            "the second-to-last axis: every position of a head got the same turn.",
        ),
        Bug(
            "transposed",
            _transposed,
            "your position 0 is turned while your pair 0 never turns: positions and pairs "
            "trade roles in your angles",
            "your angle table is (d/2, T), not (T, d/2): pair i of position p got i * theta_p "
            "instead of p * theta_i. It only fitted the shapes because T = d/2 here; put the "
            "positions down the rows and the speeds along the columns.",
        ),
        Bug(
            "i_over_d",
            _with(exponent=lambda two_i, d: -two_i / 2 / d),
            "your later pairs turn too fast",
            "pair i turns by 10000**(-2i/d) per position, with i the pair's index "
            "(0, 1, ..., d/2 - 1); yours uses 10000**(-i/d).",
        ),
        Bug(
            "clockwise",
            _with(positions=lambda T: -torch.arange(T, dtype=torch.float64)),
            "your pairs turn clockwise: by minus the angle",
            "a sign is flipped in your rotation (or your angles are negative): RoPE turns pair i "
            "of position p counter-clockwise, by +p * theta_i.",
        ),
        Bug(
            "one_speed",
            _with(exponent=lambda two_i, d: 0 * two_i),
            "every pair of yours turns at one speed",
            "each pair turns at its own speed: pair i by theta_i = 10000**(-2i/d) per position.",
        ),
        Bug(
            "four_axes",
            _four_axes,
            "your function takes exactly four axes; x may have any number of leading ones",
            "unpacking x.shape into four names (B, H, T, d) fails for a (T, d) sequence or a "
            "5-D x. Only the last two axes matter: T is the second-to-last, d the last, and "
            "whatever comes before them is carried along by broadcasting.",
        ),
    ),
    hints=(
        "Position p is the index along the second-to-last axis, whatever comes before it. "
        "Build a (T, d/2) table of angles p * theta_i, then turn pair i of position p by its "
        "entry; broadcasting carries the table across the leading axes.",
        "Split x's last axis into d/2 groups of 2, as the section's example splits a last axis "
        "of 6 into groups: x becomes (..., T, d/2, 2) whatever axes lead, and each pair sits on "
        "a last axis of its own, where your rotate_pair expects it. Turn them, then join the "
        "last two axes back into one of width d.",
    ),
    # the course's RoPE, as lesson 06's rope_score refuses it, and every other course function
    # that hands over RoPE's angles or their cosines and sines: lesson 06's sinusoidal tables
    # (columns 2i and 2i+1 of row t are the sine and cosine of t * theta_i, exactly RoPE's),
    # lesson 16's angle table and lesson 13a's RoPE from a start. The learner's rotate_pair is
    # the piece this exercise builds on, so it stays allowed
    forbidden=(
        *COURSE_ROPE,
        (positional, "sinusoidal_encoding"),
        (position_demos, "sinusoidal_at"),
        (rope_scaling, "angles_of"),
        (rope_from, "rope_from_reference"),
        (rope_from, "_turned"),
    ),
    forbidden_hint="The check compares yours with the course's RoPE, so running it "
    "(positional.apply_rope, apply_rope_half or a RotaryEmbedding), or taking its angles or "
    "their cosines and sines from a course table (rope_angles, lesson 06's sinusoidal "
    "encoding), checks nothing. Build the (T, d/2) table of angles yourself and let your "
    "rotate_pair turn the pairs.",
)
