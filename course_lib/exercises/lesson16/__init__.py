"""Lesson 16's exercises: the RoPE angles and frequencies of three ways to run a model longer
than it was trained.

CONTRACTS (fixed: the lesson, its explorer and its checks rely on them):
- pi_angles(positions, d, factor, base=10000.0) -> (T, d/2) float64: positions (T,) integer
  or float, d even, factor s >= 1; angles[t, i] = (positions[t] / s) * base ** (-2i / d),
  RoPE's angle table at the interpolated positions (Chen et al. 2023).
- ntk_frequencies(d, factor, base=10000.0) -> (d/2,) float64: RoPE's frequencies with the
  base multiplied by s ** (d / (d - 2)) (NTK-aware scaling).
- yarn_frequencies(d, factor, trained_len, alpha=1.0, beta=32.0, base=10000.0) -> (d/2,)
  float64: theta'_i = (1 - gamma_i) theta_i / s + gamma_i theta_i, gamma_i the ramp
  clamp((r_i - alpha) / (beta - alpha), 0, 1) of r_i = trained_len / (2 pi / theta_i),
  pair i's turns within the trained length (YaRN, Peng et al. 2023).

Every wrong version below is a mistake a learner makes, written the way it comes out; a test
(tests/test_exercises_lesson16.py) writes each again as a learner would and checks its hint.
"""

from course_lib.exercises.lesson16.frequencies import (
    NTK_FREQUENCIES,
    PI_ANGLES,
    YARN_FREQUENCIES,
    ntk_frequencies_reference,
    pi_angles_reference,
    yarn_frequencies_reference,
)

EXERCISES = (PI_ANGLES, NTK_FREQUENCIES, YARN_FREQUENCIES)

__all__ = [
    "EXERCISES",
    "NTK_FREQUENCIES",
    "PI_ANGLES",
    "YARN_FREQUENCIES",
    "ntk_frequencies_reference",
    "pi_angles_reference",
    "yarn_frequencies_reference",
]
