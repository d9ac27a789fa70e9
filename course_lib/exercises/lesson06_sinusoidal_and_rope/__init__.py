"""Lesson 06's exercises: sinusoidal encoding, rotating a pair, the RoPE score.

CONTRACTS (fixed: later lessons and course_lib.mywork rely on them):
- sinusoidal_encoding(seq_len, d_model) -> (T, D) float32, sin in even columns, cos in odd.
- rotate_pair(pair, angle): pair (..., 2), angle a number or a tensor broadcastable to
  pair[..., 0] -> the pairs turned counter-clockwise, pair's dtype.
- rope_score(q, k, m, n) -> 0-d tensor: q (d,) rotated to position m dotted with k (d,)
  rotated to position n, interleaved pairs (2i, 2i+1), theta_i = 10000**(-2i/d).

RoPE on every head of multi-head attention, rope_heads, is lesson 07a's first exercise
(course_lib/exercises/lesson07a_rope_in_a_model/).

Every wrong version below is a mistake a learner makes, written the way it comes out; a test
(tests/test_exercises_lesson06_sinusoidal_and_rope.py) writes each again as a learner would
and checks its hint. Each exercise's `forbidden` lists the course's own functions that compute
its answer (a learner who wraps one checks nothing).

One module per exercise: sinusoidal_encoding, rotate_pair, rope_score.
"""

from course_lib.exercises.lesson06_sinusoidal_and_rope.rope_score import (
    ROPE_SCORE,
    rope_score_reference,
)
from course_lib.exercises.lesson06_sinusoidal_and_rope.rotate_pair import (
    ROTATE_PAIR,
    rotate_pair_reference,
)
from course_lib.exercises.lesson06_sinusoidal_and_rope.sinusoidal_encoding import (
    BASE,
    SINUSOIDAL_ENCODING,
    sinusoidal_reference,
)

EXERCISES = (SINUSOIDAL_ENCODING, ROTATE_PAIR, ROPE_SCORE)

__all__ = [
    "ROPE_SCORE",
    "rope_score_reference",
    "ROTATE_PAIR",
    "rotate_pair_reference",
    "BASE",
    "SINUSOIDAL_ENCODING",
    "sinusoidal_reference",
    "EXERCISES",
]
