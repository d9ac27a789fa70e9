"""Lesson 17's exercises: attention over key tiles with an online softmax, and its backward
recomputed tile by tile from the saved log-sum-exp.

CONTRACTS (fixed: the lesson, its explorer and its checks rely on them):
- online_attention(q, k, v, mask=None, tile_size=64) -> (..., T_q, d_v) in q's dtype: q
  (..., T_q, d), k (..., T_k, d), v (..., T_k, d_v) with the same leading dims (none
  included); mask None or bool, True where a query may attend, broadcastable to
  (..., T_q, T_k), every query row with at least one True (a row may see no key in a whole
  tile, the first ones included); softmax(q k^T / sqrt(d), masked) v, taken over key tiles of
  tile_size (the last may be shorter), never holding the (T_q, T_k) scores; differentiable,
  its gradients those of torch's F.scaled_dot_product_attention.
- tiled_backward(q, k, v, out, lse, grad_out, mask=None, tile_size=64) -> (dq, dk, dv), each
  shaped and typed like q, k, v: out the attention's output, lse (..., T_q) the log-sum-exp of
  each row's scaled, masked scores, grad_out the gradient of a loss with respect to out; the
  gradients of that loss, computed key tile by key tile, never holding a (T_q, T_k) matrix.

Every wrong version below is a mistake a learner makes, written the way it comes out; a test
(tests/test_exercises_lesson17.py) writes each again as a learner would and checks its hint.

One module per exercise (online_attention, tiled_backward); `inputs` makes the tensors their
cases try and the probe that watches for a whole score matrix.
"""

from course_lib.exercises.lesson17.online_attention import (
    GRADIENTS,
    ONLINE_ATTENTION,
    gradients_of,
    online_attention_reference,
    run_online,
)
from course_lib.exercises.lesson17.tiled_backward import (
    TILED_BACKWARD,
    run_backward,
    saved,
    tiled_backward_reference,
)

EXERCISES = (ONLINE_ATTENTION, TILED_BACKWARD)

__all__ = [
    "GRADIENTS",
    "ONLINE_ATTENTION",
    "gradients_of",
    "online_attention_reference",
    "run_online",
    "TILED_BACKWARD",
    "run_backward",
    "saved",
    "tiled_backward_reference",
    "EXERCISES",
]
