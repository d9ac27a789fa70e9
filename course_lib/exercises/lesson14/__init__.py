"""Lesson 14's exercises: RMSNorm and the SwiGLU feed-forward layer, the block of Llama-style
models.

CONTRACTS (fixed: the lesson and its checks rely on them):
- rms_norm(x, weight, eps=1e-5) -> x's shape and dtype: x (..., D) divided, vector by vector
  along the last axis, by sqrt(mean(x ** 2) + eps), then multiplied by weight (D,) feature
  by feature: torch.nn.RMSNorm(D, eps=eps) with that weight, and
  torch.nn.functional.rms_norm(x, (D,), weight, eps).
- swiglu(x, gate, up, down) -> x's shape and dtype: down(silu(gate(x)) * up(x)), gate and up
  Linear(D, h), down Linear(h, D), silu(z) = z * sigmoid(z); each position on its own.

Every wrong version below is a mistake a learner makes, written the way it comes out; a test
(tests/test_exercises_lesson14.py) writes each again as a learner would and checks its hint.

One module per exercise: rms_norm, swiglu.
"""

from course_lib.exercises.lesson14.rms_norm import RMS_NORM, rms_norm_reference
from course_lib.exercises.lesson14.swiglu import SWIGLU, swiglu_reference

EXERCISES = (RMS_NORM, SWIGLU)

__all__ = ["RMS_NORM", "rms_norm_reference", "SWIGLU", "swiglu_reference", "EXERCISES"]
