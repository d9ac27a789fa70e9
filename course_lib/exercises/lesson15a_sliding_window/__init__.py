"""Lesson 15a's exercises: the sliding-window mask with sinks; one step of attention over a
rolling cache.

CONTRACTS (fixed: the lesson and its checks rely on them):
- sliding_window_mask(T, window, sinks=0) -> (T, T) bool, True where query i may read key j:
  j <= i, and either i - j < window (the query itself and the window - 1 keys before it) or
  j < sinks (the first sinks positions, once they exist). window >= 1, sinks >= 0.
- attend_rolling(x, qkv, out, num_heads, past_k, past_v, position, window, sinks=0,
  rope=None) -> (y, k, v): one attention layer for one new token. x (B, 1, D) its input at
  `position`; qkv a Linear(D, 3D) laid out [q | k | v], out a Linear(D, D); past_k, past_v
  (B, H, S, d) the rolling cache before it: the rotated keys and the values of the first
  min(position, sinks) positions, then of the last positions before `position`, at most
  sinks + window entries in all; rope None or a function rope(t, start) like lesson 13a's
  rope_from. The new token is turned at `position`, joins the cache after its entries, and
  reads the sinks and the last `window` positions (itself included): y (B, 1, D); k, v the
  cache after the step, the oldest entry after the sinks dropped once it holds more than
  sinks + window.

Every wrong version below is a mistake a learner makes, written the way it comes out; a test
(tests/test_exercises_lesson15a_sliding_window.py) writes each again as a learner would and
checks its hint.

One module per exercise: sliding_window_mask, attend_rolling.
"""

from course_lib.exercises.lesson15a_sliding_window.attend_rolling import (
    ATTEND_ROLLING,
    attend_rolling_reference,
    rolled,
    rolled_yours_or_course,
)
from course_lib.exercises.lesson15a_sliding_window.sliding_window_mask import (
    SLIDING_WINDOW_MASK,
    sliding_window_mask_reference,
)

EXERCISES = (SLIDING_WINDOW_MASK, ATTEND_ROLLING)

__all__ = [
    "ATTEND_ROLLING",
    "attend_rolling_reference",
    "rolled",
    "rolled_yours_or_course",
    "SLIDING_WINDOW_MASK",
    "sliding_window_mask_reference",
    "EXERCISES",
]
