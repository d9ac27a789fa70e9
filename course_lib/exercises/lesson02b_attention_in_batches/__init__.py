"""Lesson 02b_attention_in_batches's exercises: attention for every query, and the padding
mask.

CONTRACTS (fixed: later lessons and course_lib.mywork rely on them):
- attention(q, k, v, mask=None) -> (output, weights): q (..., T_q, d_k), k (..., T_k, d_k),
  v (..., T_k, d_v) with any number of leading batch dimensions (none included) that
  broadcast; scores divided by sqrt(d_k); mask None or bool, True where a query may attend,
  broadcastable to (..., T_q, T_k). output (..., T_q, d_v), weights (..., T_q, T_k), in q's
  dtype.
- padding_mask(lengths, T) -> (B, 1, T) bool: lengths int64 (B,), each 1..T; True at key s
  of sentence b when s < lengths[b].
"""

from course_lib.exercises.lesson02b_attention_in_batches.attention import (
    ATTENTION,
    attention_reference,
)
from course_lib.exercises.lesson02b_attention_in_batches.padding import (
    PADDING_MASK,
    padding_mask_reference,
)

EXERCISES = (ATTENTION, PADDING_MASK)

__all__ = [
    "ATTENTION",
    "EXERCISES",
    "PADDING_MASK",
    "attention_reference",
    "padding_mask_reference",
]
