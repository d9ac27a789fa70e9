"""Lesson 07a's exercises: RoPE on every head, and a projection's rows reordered for the
rotate-half layout.

CONTRACTS (fixed: later lessons and course_lib.mywork rely on them):
- rope_heads(x) -> x's shape and dtype: x (..., T, d) (in the model (B, H, T, d)), the
  vector at position t (0..T-1) rotated pair by pair by t * theta_i, as apply_rope.
- to_rotate_half(weight, num_heads) -> weight's shape and dtype: the rows of each head
  reordered so that rotate-half RoPE gives the interleaved layout's scores (see its module).

One module per exercise: rope_heads, to_rotate_half.
"""

from course_lib.exercises.lesson07a_rope_in_a_model.rope_heads import (
    ROPE_HEADS,
    rope_heads_reference,
)
from course_lib.exercises.lesson07a_rope_in_a_model.to_rotate_half import (
    TO_ROTATE_HALF,
    to_rotate_half_reference,
)

EXERCISES = (ROPE_HEADS, TO_ROTATE_HALF)

__all__ = [
    "ROPE_HEADS",
    "rope_heads_reference",
    "TO_ROTATE_HALF",
    "to_rotate_half_reference",
    "EXERCISES",
]
