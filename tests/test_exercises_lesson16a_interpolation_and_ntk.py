"""Lesson 16a's exercises: learner-style mistakes get their hint, and an answer that hands the check
one of the course's own frequency functions is told so.

Every wrong function here is written the way a learner would write it (floor division of
integer positions, the base scaled by the factor alone), not taken from the bug list in
course_lib/exercises/lesson16a_interpolation_and_ntk.py. They were written before that list.
"""

from functools import partial
from pathlib import Path

import torch

from course_lib import positional
from course_lib import rope_scaling as rs
from course_lib.checks import check_ntk_frequencies, check_pi_angles
from course_lib.exercises.core import run
from course_lib.exercises.lesson16a_interpolation_and_ntk import (
    EXERCISES,
    NTK_FREQUENCIES,
    PI_ANGLES,
)
from helpers import failed_with_hint as _check
from helpers import refused_as_forbidden

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "16a_interpolation_and_ntk.ipynb"


# ---------------------------------------------------------------- right answers, as written


def pi_angles(positions, d, factor, base=10000.0):
    i = torch.arange(d // 2, dtype=torch.float64)
    theta = 1.0 / base ** (2 * i / d)
    return torch.outer(positions.double() / factor, theta)


def ntk_frequencies(d, factor, base=10000.0):
    new_base = base * factor ** (d / (d - 2))
    return new_base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)


def test_the_right_answers_written_here_pass():
    assert run(PI_ANGLES, pi_angles).passed
    assert run(NTK_FREQUENCIES, ntk_frequencies).passed


# ---------------------------------------------------------------- pi_angles


def test_pi_with_floor_division_of_integer_positions_is_named():
    def wrong(positions, d, factor, base=10000.0):
        theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        return (positions // factor).double()[:, None] * theta

    _check(PI_ANGLES, wrong, "floor_division")


def test_pi_that_multiplies_the_positions_is_named():
    def wrong(positions, d, factor, base=10000.0):
        theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        return (positions.double() * factor)[:, None] * theta

    _check(PI_ANGLES, wrong, "multiplied")


def test_pi_that_scales_the_base_instead_is_named():
    def wrong(positions, d, factor, base=10000.0):
        theta = (base * factor) ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        return positions.double()[:, None] * theta

    _check(PI_ANGLES, wrong, "base_scaled")


def test_pi_with_i_over_d_in_the_exponent_is_named():
    def wrong(positions, d, factor, base=10000.0):
        theta = base ** (-torch.arange(d // 2, dtype=torch.float64) / d)
        return (positions.double() / factor)[:, None] * theta

    _check(PI_ANGLES, wrong, "half_exponent")


def test_pi_with_the_table_on_its_side_is_named():
    def wrong(positions, d, factor, base=10000.0):
        theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        return theta[:, None] * (positions.double() / factor)[None, :]

    result = run(PI_ANGLES, wrong)
    assert not result.passed and "shape" in result.message


def test_pi_with_the_exponent_positive_is_named():
    def wrong(positions, d, factor, base=10000.0):
        theta = base ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
        return (positions.double() / factor)[:, None] * theta

    _check(PI_ANGLES, wrong, "exponent_sign")


def test_pi_in_float32_gets_the_dtype_hint():
    def wrong(positions, d, factor, base=10000.0):
        theta = base ** (-torch.arange(0, d, 2) / d)
        return (positions / factor)[:, None] * theta

    result = run(PI_ANGLES, wrong)
    assert not result.passed and "dtype" in result.message


# ---------------------------------------------------------------- ntk_frequencies


def _ntk(new_base=lambda b, s, d: b * s ** (d / (d - 2)), width=lambda d: d):
    def wrong(d, factor, base=10000.0):
        return new_base(base, factor, d) ** (-torch.arange(0, d, 2, dtype=torch.float64) / width(d))

    return wrong


def test_ntk_with_the_base_times_the_factor_is_named():
    _check(NTK_FREQUENCIES, _ntk(new_base=lambda b, s, d: b * s), "base_times_factor")


def test_ntk_with_the_exponent_upside_down_is_named():
    _check(NTK_FREQUENCIES, _ntk(new_base=lambda b, s, d: b * s ** ((d - 2) / d)),
           "exponent_inverted")  # fmt: skip


def test_ntk_that_divides_the_base_is_named():
    _check(NTK_FREQUENCIES, _ntk(new_base=lambda b, s, d: b / s ** (d / (d - 2))), "base_divided")


def test_ntk_that_divides_every_frequency_is_named():
    def wrong(d, factor, base=10000.0):
        return base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d) / factor

    _check(NTK_FREQUENCIES, wrong, "interpolated_all")


def test_ntk_that_divides_the_frequencies_by_the_base_factor_is_named():
    def wrong(d, factor, base=10000.0):
        theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        return theta / factor ** (d / (d - 2))

    _check(NTK_FREQUENCIES, wrong, "frequencies_divided")


def test_ntk_with_d_minus_2_in_the_angle_is_named():
    _check(NTK_FREQUENCIES, _ntk(width=lambda d: d - 2), "wrong_width")


# ---------------------------------------------------------------- the course's own, handed over

# an answer built on a course function that computes it: refused with the forbidden hint; a
# right one (the default) passes every case once nothing is forbidden, so the list is all that
# stops it
_forbidden = partial(refused_as_forbidden, right=True)


def pi_on_scaled(p, d, s, base=10000.0):  # the route lesson 16a's own measuring cell shows
    return p.double()[:, None] * rs.scaled_frequencies("pi", s, d, base=base)


def pi_on_frequencies(p, d, s, base=10000.0):
    return (p.double() / s)[:, None] * rs.frequencies(d, base)


def pi_on_rope_angles(p, d, s, base=10000.0):
    return positional.rope_angles(p.double() / s, d, base, dtype=torch.float64)


def test_pi_angles_that_wrap_the_courses_frequencies_are_told_so():
    scaled = "course_lib.rope_scaling.scaled_frequencies"
    _forbidden(PI_ANGLES, pi_on_scaled, scaled)
    _forbidden(PI_ANGLES, pi_on_frequencies, "course_lib.rope_scaling.frequencies")
    _forbidden(PI_ANGLES, pi_on_rope_angles, "course_lib.positional.rope_angles")


def ntk_on_scaled(d, s, base=10000.0):
    return rs.scaled_frequencies("ntk", s, d, base=base)


def ntk_on_frequencies(d, s, base=10000.0):
    return rs.frequencies(d, base * s ** (d / (d - 2)))


def ntk_on_rope_angles(d, s, base=10000.0):
    new_base = base * s ** (d / (d - 2))
    return positional.rope_angles(torch.ones(1), d, new_base, dtype=torch.float64)[0]


def test_ntk_frequencies_that_wrap_the_courses_are_told_so():
    _forbidden(NTK_FREQUENCIES, ntk_on_scaled, "course_lib.rope_scaling.scaled_frequencies")
    _forbidden(NTK_FREQUENCIES, ntk_on_frequencies, "course_lib.rope_scaling.frequencies")
    _forbidden(NTK_FREQUENCIES, ntk_on_rope_angles, "course_lib.positional.rope_angles")


def test_a_wrong_answer_on_the_courses_frequencies_is_told_so_too():
    # the base times s alone, built on the course's function: the call is named first
    _forbidden(NTK_FREQUENCIES, lambda d, s, base=10000.0: rs.frequencies(d, base * s),
               "course_lib.rope_scaling.frequencies", right=False)  # fmt: skip


def test_every_course_function_that_gives_an_answer_is_forbidden():
    for exercise in EXERCISES:
        names = {(getattr(m, "__name__", m), a) for m, a in exercise.forbidden}
        for pair in (("course_lib.rope_scaling", "scaled_frequencies"),
                     ("course_lib.rope_scaling", "frequencies"),
                     ("course_lib.rope_scaling", "yarn_ramp"),
                     ("course_lib.rope_scaling", "angles_of"),
                     ("course_lib.positional", "rope_angles")):  # fmt: skip
            assert pair in names, (exercise.name, pair)
