"""Lesson 16b's exercise: the frequencies of YaRN.

CONTRACT (fixed: the lesson, its explorer and its check rely on it):
- yarn_frequencies(d, factor, trained_len, alpha=1.0, beta=32.0, base=10000.0) -> (d/2,)
  float64: theta'_i = (1 - gamma_i) theta_i / s + gamma_i theta_i, gamma_i the ramp
  clamp((r_i - alpha) / (beta - alpha), 0, 1) of r_i = trained_len / (2 pi / theta_i),
  pair i's turns within the trained length (YaRN, Peng et al. 2023).

The reference is written from the paper's formula, a different way from the course's
course_lib.rope_scaling: each pair's wavelength against the trained length, pair by pair.
Every wrong version below is a mistake a learner makes, written the way it comes out; a test
(tests/test_exercises_lesson16b_yarn_compared.py) writes each again as a learner would and
checks its hint.
"""

import math

import torch

from course_lib.exercises.core import Bug, Case, Exercise
from course_lib.exercises.lesson16a_interpolation_and_ntk import (
    COURSE_FREQUENCIES,
    _log_theta,
    _theta,
)


def yarn_frequencies_reference(d, factor, trained_len, alpha=1.0, beta=32.0, base=10000.0):
    """The course's YaRN frequencies, (d/2,) float64 (lesson 16b)."""
    theta = torch.exp(_log_theta(d, base))
    wavelength = 2 * math.pi / theta
    turns = trained_len / wavelength  # r_i: turns of pair i within the trained length
    out = []
    for r, t in zip(turns.tolist(), theta.tolist(), strict=True):
        if r < alpha:
            out.append(t / factor)  # slow pair: interpolated
        elif r > beta:
            out.append(t)  # fast pair: left as trained
        else:
            g = (r - alpha) / (beta - alpha)
            out.append((1 - g) * t / factor + g * t)
    return torch.tensor(out, dtype=torch.float64)


# ---------------------------------------------------------------- the cases


def _yarn_cases() -> list[Case]:
    return [
        Case((16, 4.0, 32), label="the lesson's model: d = 16, s = 4, trained length 32"),
        Case((128, 16.0, 4096), label="d = 128, s = 16, trained length 4096 (Llama 2 to 64k)"),
        Case((128, 4.0, 2048), label="d = 128, s = 4, trained length 2048"),
        Case((16, 2.0, 32, 0.25, 1.0), label="d = 16, s = 2, L = 32, alpha 0.25, beta 1"),
        Case((64, 8.0, 1024, 2.0, 16.0, 500000.0), label="d = 64, base 500000, alpha 2, beta 16"),
    ]


# ---------------------------------------------------------------- the mistakes


def _yarn(turns=lambda L, t: L * t / (2 * math.pi), gamma=None, mix=None):
    def wrong(d, factor, trained_len, alpha=1.0, beta=32.0, base=10000.0):
        theta = _theta(d, base)
        r = turns(trained_len, theta)
        g = gamma(r, alpha, beta) if gamma else ((r - alpha) / (beta - alpha)).clamp(0, 1)
        if mix is not None:
            return mix(g, theta, factor)
        return (1 - g) * theta / factor + g * theta

    return wrong


YARN_FREQUENCIES = Exercise(
    name="yarn_frequencies",
    lesson="16b_yarn_compared",
    reference=yarn_frequencies_reference,
    cases=_yarn_cases,
    idea="the section 'YaRN: by wavelength': exercise 1's text",
    bugs=(
        Bug(
            "ramp_reversed",
            _yarn(mix=lambda g, t, s: g * t / s + (1 - g) * t),
            "your fast pairs are interpolated and your slow pairs left alone: the other way round",
            "gamma is 1 for a pair that turns many times within the trained length: that pair "
            "has seen every angle and is left as trained, theta. Its weight belongs on theta, "
            "and 1 - gamma on theta / s.",
        ),
        Bug(
            "turns_inverted",
            _yarn(turns=lambda L, t: (2 * math.pi / t) / L),
            "your ramp picks the wrong pairs",
            "r is the number of turns a pair makes within the trained length, L / wavelength, "
            "large for the fast pairs; you computed wavelength / L.",
        ),
        Bug(
            "no_two_pi",
            _yarn(turns=lambda L, t: L * t),
            "your ramp starts at the wrong pairs: r is about 6 times too large",
            "a pair turns once every 2 pi / theta positions: that is its wavelength. L * theta "
            "is the angle after L positions, in radians, not in turns.",
        ),
        Bug(
            "unclamped",
            _yarn(gamma=lambda r, a, b: (r - a) / (b - a)),
            "your frequencies are negative or too large for the pairs outside the ramp",
            "gamma must stay between 0 and 1: below alpha a pair is interpolated fully, above "
            "beta not at all. Clamp the ramp (torch.clamp).",
        ),
        Bug(
            "step",
            _yarn(gamma=lambda r, a, b: (r > a).double()),
            "your pairs between alpha and beta turns jump straight to theta",
            "between r = alpha and r = beta the weight rises linearly, (r - alpha) / (beta - "
            "alpha); only beyond beta is it 1.",
        ),
        Bug(
            "multiplied",
            _yarn(mix=lambda g, t, s: (1 - g) * t * s + g * t),
            "your slow pairs turn s times faster instead of s times slower",
            "interpolating a pair divides its frequency by s, as position interpolation does: "
            "theta / s, not theta * s.",
        ),
    ),
    hints=(
        "Print, per pair, its wavelength 2 pi / theta, its turns r = L / wavelength and your "
        "gamma: gamma is 0 where r < alpha, 1 where r > beta.",
        "theta'_i = (1 - gamma_i) theta_i / s + gamma_i theta_i, gamma_i = clamp((r_i - "
        "alpha) / (beta - alpha), 0, 1), float64, shape (d/2,).",
    ),
    atol=1e-12,
    rtol=1e-9,
    forbidden=COURSE_FREQUENCIES,
    forbidden_hint="The check compares your frequencies with the course's, so handing it a "
    "course function that computes them or their ramp (rope_scaling.scaled_frequencies, "
    "yarn_ramp, or rope_scaling.frequencies and positional.rope_angles for RoPE's own) checks "
    "nothing. Write RoPE's frequencies base ** (-2i / d), each pair's turns and its ramp "
    "yourself.",
)

EXERCISES = (YARN_FREQUENCIES,)
