"""Lesson 04's exercises: sinusoidal encoding, rotating a pair, the RoPE score, RoPE on heads.

CONTRACTS (fixed: later lessons and course_lib.mywork rely on them):
- sinusoidal_encoding(seq_len, d_model) -> (T, D) float32, sin in even columns, cos in odd.
- rotate_pair(pair, angle): pair (..., 2), angle a number or a tensor broadcastable to
  pair[..., 0] -> the pairs turned counter-clockwise, pair's dtype.
- rope_score(q, k, m, n) -> 0-d tensor: q (d,) rotated to position m dotted with k (d,)
  rotated to position n, interleaved pairs (2i, 2i+1), theta_i = 10000**(-2i/d).
- rope_heads(x) -> x's shape and dtype: x (..., T, d) (in the model (B, H, T, d)), the
  vector at position t (0..T-1) rotated pair by pair by t * theta_i, as apply_rope.
"""

import torch

from course_lib.exercises.core import Exercise
from course_lib.positional import apply_rope


def rope_heads_reference(x):
    return apply_rope(x, torch.arange(x.shape[-2]))  # (..., T, d)


# PLACEHOLDER entries (reference only, no cases yet): the lesson's helper replaces them.
ROPE_HEADS = Exercise("rope_heads", "04", rope_heads_reference, list, "lesson 04")
EXERCISES = (ROPE_HEADS,)
