"""Lesson 06's rotate_pair exercise: a pair turned by an angle."""

import math

import torch

from course_lib import position_demos, positional
from course_lib.exercises.core import Bug, Case, Exercise
from course_lib.position_demos import rotate_pair

# ---------------------------------------------------------------- rotate_pair


def rotate_pair_reference(pair, angle):
    return rotate_pair(pair, angle)  # (..., 2)


def _rotate_cases() -> list[Case]:
    g = torch.Generator().manual_seed(0)

    def randn(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=g, dtype=dtype)

    def angles(*shape, dtype=torch.float32):
        return (torch.rand(*shape, generator=g, dtype=dtype) - 0.5) * 2 * math.pi

    return [
        Case(
            (torch.tensor([[1.0, 0.0], [0.0, 1.0]]), math.pi / 2),
            label="(1, 0) and (0, 1) turned a quarter turn",
        ),
        Case((torch.tensor([3.0, 4.0]), 1.0), label="the pair (3, 4) turned by 1 radian"),
        Case((randn(2, 2), angles(2)), label="two pairs, an angle for each"),
        Case((randn(5, 2), angles(5)), label="five pairs, an angle for each"),
        Case((randn(3, 2), torch.tensor(1.2)), label="a 0-d tensor angle for every pair"),
        Case((randn(3, 4, 2), angles(3, 4)), label="a (3, 4) grid of pairs, an angle for each"),
        Case(
            (randn(3, 4, 2), angles(4)),
            label="a (3, 4) grid of pairs, angles (4,): one per column, shared down the rows",
        ),
        Case((randn(3, 4, 2), 0.7), label="a Python float angle for every pair"),
        Case((randn(6, 2), 3), label="a Python int angle (3 radians)"),
        Case(
            (randn(4, 2, dtype=torch.float64), angles(4, dtype=torch.float64)),
            label="float64 pairs and angles: the result keeps pair's dtype",
        ),
        Case(
            (randn(3, 2, dtype=torch.float64), -2.5),
            label="float64 pairs, a Python float angle: the result keeps pair's dtype",
        ),
    ]


def _parts(pair, angle):
    angle = torch.as_tensor(angle, dtype=pair.dtype)
    return pair[..., 0], pair[..., 1], angle.cos(), angle.sin()


def _clockwise(pair, angle):
    x, y, c, s = _parts(pair, angle)
    return torch.stack((x * c + y * s, -x * s + y * c), dim=-1)  # (..., 2)


def _overwrite(pair, angle):
    x, y, c, s = _parts(pair, angle)
    new_x = x * c - y * s
    return torch.stack((new_x, new_x * s + y * c), dim=-1)  # (..., 2): y from the NEW x


def _swapped(pair, angle):
    x, y, c, s = _parts(pair, angle)
    return torch.stack((x * s - y * c, x * c + y * s), dim=-1)  # (..., 2)


def _no_minus(pair, angle):
    x, y, c, s = _parts(pair, angle)
    return torch.stack((x * c + y * s, x * s + y * c), dim=-1)  # (..., 2)


def _order(pair, angle):
    return rotate_pair(pair, angle).flip(-1)  # (..., 2): (new y, new x)


def _method_on_number(pair, angle):
    """angle.cos(): fine for a tensor, an AttributeError for a Python number."""
    x, y = pair[..., 0], pair[..., 1]
    return torch.stack((x * angle.cos() - y * angle.sin(), x * angle.sin() + y * angle.cos()), -1)


def _math_on_tensor(pair, angle):
    """math.cos(angle): fine for a number, a ValueError for a tensor of several angles."""
    x, y = pair[..., 0], pair[..., 1]
    c, s = math.cos(angle), math.sin(angle)
    return torch.stack((x * c - y * s, x * s + y * c), dim=-1)  # (..., 2)


def _angle_on_last_axis(pair, angle):
    """cos and sin multiplied onto the (..., 2) pairs as they are: the angles meet (x, y)."""
    x, y, c, s = _parts(pair, angle)
    turned = torch.stack((-y, x), dim=-1)  # (..., 2): each pair a quarter turn on
    try:
        return pair * c + turned * s  # c and s broadcast against the LAST axis of pair
    except RuntimeError:  # where the shapes do not fit, the learner's code raises too
        return rotate_pair(pair, angle)


ROTATE_PAIR = Exercise(
    name="rotate_pair",
    lesson="06_sinusoidal_and_rope",
    reference=rotate_pair_reference,
    cases=_rotate_cases,
    idea="the picture of (1, 0) and (0, 1) turned by the angle a, in the section 'RoPE: "
    "rotate the queries and keys', just above exercise 2",
    bugs=(
        Bug(
            "no_minus",
            _no_minus,
            "your (1, 0) turns the right way but your (0, 1) does not: a quarter turn takes "
            "(0, 1) to (-1, 0)",
            "a minus sign is missing: where does the picture send (0, 1)? For a small positive "
            "angle its new x is negative.",
        ),
        Bug(
            "clockwise",
            _clockwise,
            "your pairs turn the wrong way round: a quarter turn takes (1, 0) to (0, -1)",
            "you turn clockwise. A positive angle turns counter-clockwise, taking (1, 0) "
            "towards (0, 1): read off where the picture sends (1, 0) and (0, 1) again.",
        ),
        Bug(
            "overwrite",
            _overwrite,
            "your new x is right, your new y is not",
            "the new y was computed from the NEW x: both new components come from the old x "
            "and y, so keep the old ones until both new ones exist.",
        ),
        Bug(
            "swapped",
            _swapped,
            "your pairs come out turned by a quarter turn minus the angle, so a quarter turn "
            "leaves them where they were",
            "sin and cos trade places in your formula. Check it on the picture: at angle 0 "
            "nothing moves, so the cosine multiplies the part of each new component that stays.",
        ),
        Bug(
            "order",
            _order,
            "your result holds (new y, new x): the two components come back the wrong way round",
            "return the new x first and the new y second along the last axis.",
        ),
        Bug(
            "angle_on_last_axis",
            _angle_on_last_axis,
            "with two pairs and one angle each, your angles land on the wrong numbers",
            "your angles line up with the last axis, the (x, y) axis, instead of with the "
            "pairs: multiplying a (2, 2) pair by cos of a (2,) angle gives x the first angle "
            "and y the second. Take x and y apart first (pair[..., 0], pair[..., 1]), or give "
            "the angle a last axis of size 1.",
        ),
        Bug(
            "method_on_number",
            _method_on_number,
            "your function fails when angle is a Python number, which has no cos or sin method",
            "angle may be a plain Python number or a tensor. A number has no cos method of its "
            "own, and torch's cos and sin take only tensors: turn angle into a tensor in pair's "
            "dtype first, and the same code then serves both.",
        ),
        Bug(
            "math_on_tensor",
            _math_on_tensor,
            "math.cos and math.sin take one number, and here angle is a tensor of several",
            "the math module works on single Python numbers; with one angle per pair it cannot "
            "turn them all. Use torch's cos and sin on a tensor of the angles (a number made "
            "into a tensor first), which work element by element.",
        ),
    ),
    hints=(
        "A pair (x, y) is x times (1, 0) plus y times (0, 1), and a rotation turns both "
        "parts alike: the picture shows where each part goes.",
        "angle may be a Python number or a tensor: torch.as_tensor turns either into a tensor, "
        "and each pair[..., 0] (x) and pair[..., 1] (y) then meets its own angle by "
        "broadcasting.",
    ),
    # the course's rotation, and the private rotations inside its RoPE, which turn pairs too
    forbidden=(
        (position_demos, "rotate_pair"),
        (positional, "_rotate_interleaved"),
        (positional, "_rotate_half"),
    ),
    forbidden_hint="The check compares yours with the course's position_demos.rotate_pair, so "
    "calling it, or the rotation inside the course's RoPE, checks nothing. Work out where "
    "(1, 0) and (0, 1) end up, as the picture above the exercise shows, and what x times the "
    "one plus y times the other makes.",
)
