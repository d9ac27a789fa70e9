"""Lesson 13a's exercises: RoPE from a starting position, and one attention layer with a cache.

CONTRACTS (fixed: lessons 13a, 13b and 15 and their checks rely on them):
- rope_from(x, start) -> x's shape and dtype: x (..., T, d), row t turned pair by pair
  (interleaved pairs (2i, 2i+1)) by (start + t) * theta_i, theta_i = 10000**(-2i/d);
  rope_from(x, 0) is lesson 07's rope_heads(x).
- attend_cached(x, qkv, out, num_heads, past_k, past_v, rope=None) -> (y, k, v): x (B, T, D)
  the T new tokens' input to one attention layer; qkv a Linear(D, 3D) laid out [q | k | v],
  out a Linear(D, D); past_k, past_v (B, H, S, d) the rotated keys and the values of the S
  tokens before (S may be 0); rope None or a function rope(t, start) like rope_from. The
  new tokens sit at positions S .. S + T - 1 and token i sees keys 0 .. S + i. y (B, T, D);
  k, v (B, H, S + T, d): the past with the new tokens' appended along the time axis.

Every wrong version below is a mistake a learner makes, written the way it comes out; a test
(tests/test_exercises_lesson13a_what_generation_recomputes.py) writes each again as a learner
would and checks its hint. One module per exercise: rope_from, attend_cached.
"""

from course_lib.exercises.lesson13a_what_generation_recomputes.attend_cached import (
    ATTEND_CACHED,
    attend_cached_reference,
    shifted_causal,
)
from course_lib.exercises.lesson13a_what_generation_recomputes.rope_from import (
    ROPE_FROM,
    rope_from_reference,
)

EXERCISES = (ROPE_FROM, ATTEND_CACHED)

__all__ = [
    "ATTEND_CACHED",
    "attend_cached_reference",
    "shifted_causal",
    "ROPE_FROM",
    "rope_from_reference",
    "EXERCISES",
]
