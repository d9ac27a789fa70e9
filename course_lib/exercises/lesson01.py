"""Lesson 01's exercises: batched attention with an optional mask; the causal mask.

CONTRACTS (fixed: later lessons and course_lib.mywork rely on them; a helper fills in cases
and bugs):
- attention(q, k, v, mask=None) -> (output, weights): q (..., T_q, d_k), k (..., T_k, d_k),
  v (..., T_k, d_v) with any number of leading batch dimensions (none included) that
  broadcast; mask None or bool, True where a query may attend, broadcastable to
  (..., T_q, T_k). output (..., T_q, d_v), weights (..., T_q, T_k), in q's dtype.
- make_causal_mask(T) -> (T, T) bool, True on and below the diagonal.
"""

import torch

from course_lib.attention import causal_mask
from course_lib.exercises.core import Exercise


def attention_reference(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5  # (..., T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)  # (..., T_q, T_k)
    return weights @ v, weights  # (..., T_q, d_v), (..., T_q, T_k)


def make_causal_mask_reference(T):
    return causal_mask(T)  # (T, T)


# PLACEHOLDER entries (reference only, no cases yet): the lesson's helper replaces them.
ATTENTION = Exercise("attention", "01", attention_reference, list, "lesson 01")
CAUSAL_MASK = Exercise("make_causal_mask", "01", make_causal_mask_reference, list, "lesson 01")
EXERCISES = (ATTENTION, CAUSAL_MASK)
