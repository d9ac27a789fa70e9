"""Lesson 02a_attention's exercises: the causal mask, and the q/k/v projections from one
stored matrix.

CONTRACTS (fixed: later lessons and course_lib.mywork rely on them):
- make_causal_mask(T) -> (T, T) bool, True on and below the diagonal.
- qkv_projection(x, w_qkv, d_k) -> (q, k, v): x (..., T, D) with any leading axes (none
  included); w_qkv (2 d_k + d_v, D), rows [queries | keys | values] as nn.Linear stores a
  weight; q, k (..., T, d_k), v (..., T, d_v), in x's dtype, the gradient reaching w_qkv.
"""

from course_lib.exercises.lesson02a_attention.masks import (
    CAUSAL_MASK,
    make_causal_mask_reference,
)
from course_lib.exercises.lesson02a_attention.projections import (
    QKV_PROJECTION,
    qkv_projection_reference,
)

EXERCISES = (CAUSAL_MASK, QKV_PROJECTION)

__all__ = [
    "CAUSAL_MASK",
    "EXERCISES",
    "QKV_PROJECTION",
    "make_causal_mask_reference",
    "qkv_projection_reference",
]
