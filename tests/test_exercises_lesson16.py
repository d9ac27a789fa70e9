"""Lesson 16's exercises: the notebook's solutions pass, learner-style mistakes get their hint.

Every wrong function here is written the way a learner would write it (floor division of
integer positions, the base scaled by the factor alone, the ramp run the wrong way), not taken
from the bug list in course_lib/exercises/lesson16/. They were written before that list.
"""

import math
from pathlib import Path

import nbformat
import pytest
import torch

from course_lib.checks import check_ntk_frequencies, check_pi_angles, check_yarn_frequencies
from course_lib.exercises.core import run
from course_lib.exercises.lesson16 import EXERCISES, NTK_FREQUENCIES, PI_ANGLES, YARN_FREQUENCIES
from course_lib.workspace import stub_solutions
from helpers import failed_with_hint as _check
from helpers import notebook_functions, stub, verdict

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "16_longer_than_trained.ipynb"
NAMES = ("pi_angles", "ntk_frequencies", "yarn_frequencies")
BY_NAME = {e.name: e for e in EXERCISES}


# ---------------------------------------------------------------- right answers, as written


def pi_angles(positions, d, factor, base=10000.0):
    i = torch.arange(d // 2, dtype=torch.float64)
    theta = 1.0 / base ** (2 * i / d)
    return torch.outer(positions.double() / factor, theta)


def ntk_frequencies(d, factor, base=10000.0):
    new_base = base * factor ** (d / (d - 2))
    return new_base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)


def yarn_frequencies(d, factor, trained_len, alpha=1.0, beta=32.0, base=10000.0):
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    r = trained_len / (2 * math.pi / theta)
    gamma = torch.clamp((r - alpha) / (beta - alpha), 0, 1)
    return (1 - gamma) * theta / factor + gamma * theta


def test_the_right_answers_written_here_pass():
    assert run(PI_ANGLES, pi_angles).passed
    assert run(NTK_FREQUENCIES, ntk_frequencies).passed
    assert run(YARN_FREQUENCIES, yarn_frequencies).passed


@pytest.mark.parametrize("name", NAMES)
def test_the_lessons_solution_passes(name):
    mine = notebook_functions(*NAMES)
    assert run(BY_NAME[name], mine[name]).passed


CHECKS = [check_pi_angles, check_ntk_frequencies, check_yarn_frequencies]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_a_stub_is_not_implemented_yet(check, capsys):
    assert "not implemented yet" in verdict(check, stub, capsys)


def test_the_workspace_stubs_are_not_implemented_yet(capsys):
    namespace = {"torch": torch, "math": math}
    for cell in nbformat.read(NOTEBOOK, as_version=4).cells:
        if cell.metadata.get("nbgrader", {}).get("solution"):
            exec(stub_solutions(cell.source), namespace)
    for check in CHECKS:
        name = check.__name__.removeprefix("check_")
        assert "not implemented yet" in verdict(check, namespace[name], capsys), name


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.name)
def test_every_bug_runs_on_every_case_and_differs_from_the_reference(exercise):
    from course_lib.exercises.core import values_close

    for bug in exercise.bugs:
        differs = False
        for case in exercise.case_list():
            got = bug.wrong(*case.args, **case.kwargs)
            expected = exercise.reference(*case.args, **case.kwargs)
            differs |= not values_close(got, expected, exercise.atol, exercise.rtol)
        assert differs, bug.name


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


# ---------------------------------------------------------------- yarn_frequencies


def _yarn(turns=lambda L, theta: L * theta / (2 * math.pi), gamma=None, mix=None):
    def wrong(d, factor, trained_len, alpha=1.0, beta=32.0, base=10000.0):
        theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        r = turns(trained_len, theta)
        g = (gamma or (lambda r, a, b: ((r - a) / (b - a)).clamp(0, 1)))(r, alpha, beta)
        if mix is not None:
            return mix(g, theta, factor)
        return (1 - g) * theta / factor + g * theta

    return wrong


def test_yarn_with_the_ramp_backwards_is_named():
    _check(YARN_FREQUENCIES, _yarn(mix=lambda g, t, s: g * t / s + (1 - g) * t), "ramp_reversed")


def test_yarn_with_wavelength_over_length_is_named():
    _check(YARN_FREQUENCIES, _yarn(turns=lambda L, t: (2 * math.pi / t) / L), "turns_inverted")


def test_yarn_without_two_pi_is_named():
    _check(YARN_FREQUENCIES, _yarn(turns=lambda L, t: L * t), "no_two_pi")


def test_yarn_without_the_clamp_is_named():
    _check(YARN_FREQUENCIES, _yarn(gamma=lambda r, a, b: (r - a) / (b - a)), "unclamped")


def test_yarn_that_multiplies_where_it_should_divide_is_named():
    _check(YARN_FREQUENCIES, _yarn(mix=lambda g, t, s: (1 - g) * t * s + g * t), "multiplied")


def test_yarn_with_a_step_instead_of_a_ramp_is_named():
    _check(YARN_FREQUENCIES, _yarn(gamma=lambda r, a, b: (r > a).double()), "step")
