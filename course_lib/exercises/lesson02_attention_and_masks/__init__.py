"""Lesson 02_attention_and_masks's exercises: the causal mask, the q/k/v projections from one
stored matrix, attention for every query, and the padding mask.

CONTRACTS (fixed: later lessons and course_lib.mywork rely on them):
- make_causal_mask(T) -> (T, T) bool, True on and below the diagonal.
- qkv_projection(x, w_qkv, d_k) -> (q, k, v): x (..., T, D) with any leading axes (none
  included); w_qkv (2 d_k + d_v, D), rows [queries | keys | values] as nn.Linear stores a
  weight; q, k (..., T, d_k), v (..., T, d_v), in x's dtype, the gradient reaching w_qkv.
- attention(q, k, v, mask=None) -> (output, weights): q (..., T_q, d_k), k (..., T_k, d_k),
  v (..., T_k, d_v) with any number of leading batch dimensions (none included) that
  broadcast; scores divided by sqrt(d_k); mask None or bool, True where a query may attend,
  broadcastable to (..., T_q, T_k). output (..., T_q, d_v), weights (..., T_q, T_k), in q's
  dtype.
- padding_mask(lengths, T) -> (B, 1, T) bool: lengths int64 (B,), each 1..T; True at key s
  of sentence b when s < lengths[b].
"""

from course_lib.exercises.lesson02_attention_and_masks.attention import (
    ATTENTION,
    attention_reference,
)
from course_lib.exercises.lesson02_attention_and_masks.masks import (
    CAUSAL_MASK,
    PADDING_MASK,
    make_causal_mask_reference,
    padding_mask_reference,
)
from course_lib.exercises.lesson02_attention_and_masks.projections import (
    QKV_PROJECTION,
    qkv_projection_reference,
)

EXERCISES = (CAUSAL_MASK, QKV_PROJECTION, ATTENTION, PADDING_MASK)

__all__ = [
    "ATTENTION",
    "CAUSAL_MASK",
    "EXERCISES",
    "PADDING_MASK",
    "QKV_PROJECTION",
    "attention_reference",
    "make_causal_mask_reference",
    "padding_mask_reference",
    "qkv_projection_reference",
]
