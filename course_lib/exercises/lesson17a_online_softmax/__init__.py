"""Lesson 17a's exercise: attention over key tiles with an online softmax.

CONTRACT (fixed: the lesson, its explorer, its check and lesson 17b rely on it):
- online_attention(q, k, v, mask=None, tile_size=64) -> (..., T_q, d_v) in q's dtype: q
  (..., T_q, d), k (..., T_k, d), v (..., T_k, d_v) with the same leading dims (none
  included); mask None or bool, True where a query may attend, broadcastable to
  (..., T_q, T_k), every query row with at least one True (a row may see no key in a whole
  tile, the first ones included); softmax(q k^T / sqrt(d), masked) v, taken over key tiles of
  tile_size (the last may be shorter), never holding the (T_q, T_k) scores; differentiable,
  its gradients those of torch's F.scaled_dot_product_attention.

Every wrong version in `online_attention` is a mistake a learner makes, written the way it
comes out; a test (tests/test_exercises_lesson17a_online_softmax.py) writes each again as a
learner would and checks its hint. `inputs` makes the tensors the checks of lessons 17a and
17b try and the probe that watches for a whole score matrix.
"""

from course_lib.exercises.lesson17a_online_softmax.online_attention import (
    GRADIENTS,
    ONLINE_ATTENTION,
    gradients_of,
    online_attention_reference,
    run_online,
)

EXERCISES = (ONLINE_ATTENTION,)

__all__ = [
    "GRADIENTS",
    "ONLINE_ATTENTION",
    "gradients_of",
    "online_attention_reference",
    "run_online",
    "EXERCISES",
]
