"""Lesson 16b's exercise: learner-style mistakes get their hint, and an answer that hands the check
one of the course's own frequency functions is told so.

Every wrong function here is written the way a learner would write it (the ramp run the wrong
way, the turns without 2 pi), not taken from the bug list in
course_lib/exercises/lesson16b_yarn_compared.py. They were written before that list.
"""

import math
from functools import partial
from pathlib import Path

import torch

from course_lib import positional
from course_lib import rope_scaling as rs
from course_lib.checks import check_yarn_frequencies
from course_lib.exercises.core import run
from course_lib.exercises.lesson16b_yarn_compared import EXERCISES, YARN_FREQUENCIES
from helpers import failed_with_hint as _check
from helpers import refused_as_forbidden

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "16b_yarn_compared.ipynb"


def yarn_frequencies(d, factor, trained_len, alpha=1.0, beta=32.0, base=10000.0):
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    r = trained_len / (2 * math.pi / theta)
    gamma = torch.clamp((r - alpha) / (beta - alpha), 0, 1)
    return (1 - gamma) * theta / factor + gamma * theta


def test_the_right_answer_written_here_passes():
    assert run(YARN_FREQUENCIES, yarn_frequencies).passed


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


# ---------------------------------------------------------------- the course's own, handed over

# a right answer built on a course function: it passes once nothing is forbidden, and the
# list names the call, with the forbidden hint
_forbidden = partial(refused_as_forbidden, YARN_FREQUENCIES, right=True)


def test_yarn_frequencies_that_wrap_the_courses_are_told_so():
    # the route lesson 16b's own measuring cell shows
    _forbidden(lambda d, s, L, alpha=1.0, beta=32.0, base=10000.0: rs.scaled_frequencies(
        "yarn", s, d, trained_len=L, alpha=alpha, beta=beta, base=base),
        "course_lib.rope_scaling.scaled_frequencies")  # fmt: skip


def test_yarn_frequencies_on_the_courses_ramp_or_frequencies_are_told_so():
    def on_the_ramp(d, s, L, alpha=1.0, beta=32.0, base=10000.0):
        theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        gamma = rs.yarn_ramp(d, L, alpha, beta, base)
        return (1 - gamma) * theta / s + gamma * theta

    def on_rope_angles(d, s, L, alpha=1.0, beta=32.0, base=10000.0):
        theta = positional.rope_angles(torch.ones(1), d, base, dtype=torch.float64)[0]
        gamma = ((L * theta / (2 * math.pi) - alpha) / (beta - alpha)).clamp(0, 1)
        return (1 - gamma) * theta / s + gamma * theta

    def on_angles_of(d, s, L, alpha=1.0, beta=32.0, base=10000.0):
        return rs.angles_of(yarn_frequencies(d, s, L, alpha, beta, base), 2)[1]  # row 1: 1 theta'

    _forbidden(on_the_ramp, "course_lib.rope_scaling.yarn_ramp")
    _forbidden(on_rope_angles, "course_lib.positional.rope_angles")
    _forbidden(on_angles_of, "course_lib.rope_scaling.angles_of")


def test_every_course_function_that_gives_an_answer_is_forbidden():
    names = {(getattr(m, "__name__", m), a) for e in EXERCISES for m, a in e.forbidden}
    for pair in (("course_lib.rope_scaling", "scaled_frequencies"),
                 ("course_lib.rope_scaling", "frequencies"),
                 ("course_lib.rope_scaling", "yarn_ramp"),
                 ("course_lib.rope_scaling", "angles_of"),
                 ("course_lib.positional", "rope_angles")):  # fmt: skip
        assert pair in names, pair
