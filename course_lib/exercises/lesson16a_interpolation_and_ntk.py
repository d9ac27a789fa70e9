"""Lesson 16a's exercises: the angles of position interpolation and the frequencies of
NTK-aware scaling.

CONTRACTS (fixed: the lessons, lesson 16b's explorer and the checks rely on them):
- pi_angles(positions, d, factor, base=10000.0) -> (T, d/2) float64: positions (T,) integer
  or float, d even, factor s >= 1; angles[t, i] = (positions[t] / s) * base ** (-2i / d),
  RoPE's angle table at the interpolated positions (Chen et al. 2023).
- ntk_frequencies(d, factor, base=10000.0) -> (d/2,) float64: RoPE's frequencies with the
  base multiplied by s ** (d / (d - 2)) (NTK-aware scaling).

Each reference is written from its paper's formula, a different way from the course's
course_lib.rope_scaling: position interpolation as RoPE at the position p / s (Chen et al.
2023, f'(x, m) = f(x, m L / L')), each pair's angle an exponential of a logarithm; NTK-aware
frequencies as theta_i s ** (-2i / (d - 2)), which is (base s ** (d / (d - 2))) ** (-2i / d)
with the powers gathered.

Every wrong version below is a mistake a learner makes, written the way it comes out; a test
(tests/test_exercises_lesson16a_interpolation_and_ntk.py) writes each again as a learner would
and checks its hint.
"""

import math

import torch

from course_lib import positional
from course_lib import rope_scaling as rs
from course_lib.exercises.core import Bug, Case, Exercise

# the course's own routes to RoPE's frequencies and angle tables, scaled or not: each computes
# what these exercises (and lesson 16b's yarn_frequencies) ask for, or the whole of it with
# one argument changed (rope_angles at positions / s is pi_angles; frequencies with the new
# base is ntk_frequencies). _angle_table is what every other route to RoPE's angles runs
COURSE_FREQUENCIES = (
    (rs, "scaled_frequencies"),
    (rs, "frequencies"),
    (rs, "yarn_ramp"),
    (rs, "angles_of"),
    (rs, "scaled_model"),
    (positional, "rope_angles"),
    (positional, "_angle_table"),
)


def _log_theta(d, base):
    """(d/2,) float64: log theta_i = -(2i / d) log base."""
    return -(2 * torch.arange(d // 2, dtype=torch.float64) / d) * math.log(base)


def pi_angles_reference(positions, d, factor, base=10000.0):
    """The course's position interpolation angles, (T, d/2) float64 (lesson 16a)."""
    theta = torch.exp(_log_theta(d, base))  # (d/2,)
    return torch.einsum("t,i->ti", positions.to(torch.float64) / factor, theta)  # (T, d/2)


def ntk_frequencies_reference(d, factor, base=10000.0):
    """The course's NTK-aware frequencies, (d/2,) float64 (lesson 16a)."""
    i = torch.arange(d // 2, dtype=torch.float64)
    return torch.exp(_log_theta(d, base) - (2 * i / (d - 2)) * math.log(factor))  # (d/2,)


# ---------------------------------------------------------------- the cases


def _pi_cases() -> list[Case]:
    return [
        Case(
            (torch.arange(128), 16, 4.0), label="the lesson's model: d = 16, s = 4, positions 0-127"
        ),
        Case((torch.arange(10), 8, 2.0), label="integer positions 0-9, s = 2"),
        Case((torch.arange(5, 12), 16, 3.0), label="positions 5-11, s = 3: p / s is no integer"),
        Case((torch.arange(6), 16, 1.0), label="s = 1: RoPE as trained"),
        Case((torch.tensor([0.0, 1.5, 40.0]), 8, 2.5, 500.0), label="float positions, base 500"),
    ]


def _ntk_cases() -> list[Case]:
    return [
        Case((16, 4.0), label="the lesson's model: d = 16, s = 4"),
        Case((16, 2.0), label="d = 16, s = 2"),
        Case((128, 8.0), label="d = 128 (Llama's head width), s = 8"),
        Case((8, 1.0), label="s = 1: RoPE as trained"),
        Case((4, 3.0, 100.0), label="d = 4: two pairs, base 100"),
    ]


# ---------------------------------------------------------------- the mistakes


def _theta(d, base, width=None):
    return base ** (-torch.arange(0, d, 2, dtype=torch.float64) / (width or d))  # (d/2,)


def _pi(at=lambda p, s: p.double() / s, theta=lambda d, base, s: _theta(d, base)):
    def wrong(positions, d, factor, base=10000.0):
        return at(positions, factor)[:, None] * theta(d, base, factor)

    return wrong


def _ntk(new_base=lambda b, s, d: b * s ** (d / (d - 2)), width=None, after=None):
    def wrong(d, factor, base=10000.0):
        if after is not None:
            return after(_theta(d, base), factor, d)
        return _theta(d, new_base(base, factor, d), width(d) if width else None)

    return wrong


PI_ANGLES = Exercise(
    name="pi_angles",
    lesson="16a_interpolation_and_ntk",
    reference=pi_angles_reference,
    cases=_pi_cases,
    idea="the section 'Position interpolation': exercise 1's text, and lesson 07a's rope_heads",
    bugs=(
        Bug(
            "floor_division",
            _pi(at=lambda p, s: (p // s).double()),
            "your angles come in steps: positions 0 to s - 1 all get the angles of 0",
            "p // s divides integer positions and throws away the remainder, so s neighbours "
            "share one position. Position interpolation puts p at the fractional position "
            "p / s: make the positions floating point before dividing.",
        ),
        Bug(
            "multiplied",
            _pi(at=lambda p, s: p.double() * s),
            "your angles grow s times faster than RoPE's instead of s times slower",
            "the positions are multiplied by the factor. Interpolation squeezes a line of s L "
            "positions into the L the model was trained on: p becomes p / s.",
        ),
        Bug(
            "base_scaled",
            _pi(at=lambda p, s: p.double(), theta=lambda d, base, s: _theta(d, base * s)),
            "your fastest pair is unchanged and the slower ones slow down: that is a change "
            "of base, not interpolation",
            "you multiplied the base by the factor and left the positions as they were. "
            "Position interpolation leaves the frequencies alone and divides the position: "
            "every pair slows down by the same s, the fastest included.",
        ),
        Bug(
            "half_exponent",
            _pi(theta=lambda d, base, s: base ** (-torch.arange(d // 2, dtype=torch.float64) / d)),
            "your frequencies fall too slowly across the pairs: the slowest is base ** -0.5 "
            "instead of nearly base ** -1",
            "pair i's frequency is base ** (-2i / d), with i = 0 .. d/2 - 1: the exponent has "
            "2i, the index of the pair's first dimension. torch.arange(d // 2) / d is i / d.",
        ),
        Bug(
            "exponent_sign",
            _pi(theta=lambda d, base, s: base ** (torch.arange(0, d, 2, dtype=torch.float64) / d)),
            "your later pairs turn faster, by thousands of radians a position",
            "the exponent lost its minus sign: theta_i = base ** (-2i / d) is at most 1 and "
            "falls from pair to pair.",
        ),
    ),
    hints=(
        "Print your table's first rows at s = 1 next to the angles your lesson 07a rope_heads "
        "turns by (t theta_i): they must agree; at factor s, row p of yours is row p / s.",
        "angles[t, i] = (positions[t] / s) * base ** (-2i / d), a (T, d/2) float64 table.",
    ),
    atol=1e-9,
    rtol=1e-9,
    forbidden=COURSE_FREQUENCIES,
    forbidden_hint="The check compares your table with the course's, so handing it a course "
    "function that computes RoPE's frequencies or angles (rope_scaling.scaled_frequencies, "
    "frequencies or angles_of, positional.rope_angles) checks nothing. Build the frequencies "
    "base ** (-2i / d) yourself, then every interpolated position against every pair's.",
)

NTK_FREQUENCIES = Exercise(
    name="ntk_frequencies",
    lesson="16a_interpolation_and_ntk",
    reference=ntk_frequencies_reference,
    cases=_ntk_cases,
    idea="the section 'NTK-aware scaling: a new base': exercise 2's text",
    bugs=(
        Bug(
            "base_times_factor",
            _ntk(new_base=lambda b, s, d: b * s),
            "your slowest pair is divided by less than s",
            "the base is multiplied by s alone. The exponent d / (d - 2) is what makes the "
            "slowest pair, base ** (-(d - 2) / d), come out exactly s times slower: work out "
            "(b s ** k) ** (-(d - 2) / d) and choose k.",
        ),
        Bug(
            "exponent_inverted",
            _ntk(new_base=lambda b, s, d: b * s ** ((d - 2) / d)),
            "your slowest pair is divided by less than s",
            "the exponent on s is (d - 2) / d, upside down: it is d / (d - 2), a little above "
            "1, so that the slowest pair's exponent -(d - 2) / d cancels it.",
        ),
        Bug(
            "base_divided",
            _ntk(new_base=lambda b, s, d: b / s ** (d / (d - 2))),
            "your pairs turn faster than RoPE's: the frequencies went up",
            "you divided the base. A larger base means slower pairs, which is what a longer "
            "line needs: the base is multiplied by s ** (d / (d - 2)).",
        ),
        Bug(
            "interpolated_all",
            _ntk(after=lambda theta, s, d: theta / s),
            "your fastest pair is slowed down too: that is position interpolation",
            "every frequency is divided by s. NTK-aware scaling changes the base instead, so "
            "the fastest pair (i = 0, base ** 0 = 1) is left exactly as trained and only the "
            "slowest is divided by the full s.",
        ),
        Bug(
            "frequencies_divided",
            _ntk(after=lambda theta, s, d: theta / s ** (d / (d - 2))),
            "every pair is slowed down by the same factor, the fastest too",
            "you divided each frequency by s ** (d / (d - 2)). That factor multiplies the base, "
            "inside the power: theta'_i = (base s ** (d / (d - 2))) ** (-2i / d), so pair i is "
            "slowed by a factor that grows with i.",
        ),
        Bug(
            "wrong_width",
            _ntk(width=lambda d: d - 2),
            "your frequencies fall too fast across the pairs",
            "the angle's exponent is -2i / d, as in RoPE; d - 2 belongs only in the exponent "
            "of s, inside the new base.",
        ),
    ),
    hints=(
        "Check two pairs by hand: at i = 0 your frequency must be exactly 1, at the last pair "
        "i = d/2 - 1 exactly RoPE's divided by s. Write the new base as base * s ** k and solve "
        "(base s ** k) ** (-(d - 2) / d) = base ** (-(d - 2) / d) / s for k.",
        "Make the new base b' = base * s ** (d / (d - 2)), then RoPE's frequencies with it: "
        "b' ** (-2i / d), float64, shape (d/2,).",
    ),
    atol=1e-12,
    rtol=1e-9,
    forbidden=COURSE_FREQUENCIES,
    forbidden_hint="The check compares your frequencies with the course's, so handing it a "
    "course function that computes RoPE's frequencies (rope_scaling.scaled_frequencies, or "
    "rope_scaling.frequencies and positional.rope_angles with the new base) checks nothing. "
    "Work out the new base on paper, then write its frequencies b' ** (-2i / d) yourself.",
)


EXERCISES = (PI_ANGLES, NTK_FREQUENCIES)
