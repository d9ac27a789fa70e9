"""Lesson 05's exercises: the feed-forward sub-layer, the pre-norm block, layer norm.

CONTRACTS (fixed: lesson 06 and course_lib.mywork rely on them):
- feed_forward(x, lin1, lin2) -> x's shape: lin2(GELU(lin1(x))), GELU the exact (erf) one,
  each position on its own.
- prenorm_block(x, attn, ff, norm1, norm2) -> (B, T, D): h = x + attn(norm1(x)), then
  h + ff(norm2(h)); attn, ff, norm1, norm2 are callables (B, T, D) -> (B, T, D).
- layer_norm(x, weight, bias, eps=1e-5) -> x's shape: torch.nn.LayerNorm over the last axis.
"""

import torch.nn.functional as F

from course_lib.exercises.core import Exercise


def feed_forward_reference(x, lin1, lin2):
    return lin2(F.gelu(lin1(x)))  # (..., D) -> (..., d_ff) -> (..., D)


def prenorm_block_reference(x, attn, ff, norm1, norm2):
    h = x + attn(norm1(x))  # (B, T, D)
    return h + ff(norm2(h))  # (B, T, D)


def layer_norm_reference(x, weight, bias, eps=1e-5):
    return F.layer_norm(x, x.shape[-1:], weight, bias, eps)


# PLACEHOLDER entries (reference only, no cases yet): the lesson's helper replaces them.
FEED_FORWARD = Exercise("feed_forward", "05", feed_forward_reference, list, "lesson 05")
PRENORM_BLOCK = Exercise("prenorm_block", "05", prenorm_block_reference, list, "lesson 05")
LAYER_NORM = Exercise("layer_norm", "05", layer_norm_reference, list, "lesson 05")
EXERCISES = (FEED_FORWARD, PRENORM_BLOCK, LAYER_NORM)
