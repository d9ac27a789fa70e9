"""Lesson 03's exercises: split and merge heads; multi-head attention from your own parts.

CONTRACTS (fixed: later lessons and course_lib.mywork rely on them):
- split_heads(x, num_heads): (B, T, D) -> (B, H, T, d), d = D / H; head h holds features
  h*d .. (h+1)*d - 1 of every token.
- merge_heads(y): (B, H, T, d) -> (B, T, H*d), undoing split_heads.
- multihead(x, qkv, out, num_heads, mask=None, rope=None) -> (B, T, D): qkv a callable
  (an nn.Linear D -> 3D) whose output is laid out [q | k | v], each D wide; out a callable
  (nn.Linear D -> D) applied to the merged heads; mask None or bool broadcastable to
  (B, H, T, T), True = may attend; rope None or a function applied to q and to k, each
  (B, H, T, d), before the scores (lesson 04 passes one). Built from your split_heads,
  merge_heads and lesson 01's attention. Same numbers as torch.nn.MultiheadAttention with
  in_proj_weight = qkv.weight, out_proj = out.
"""

import torch

from course_lib.exercises.core import Exercise


def split_heads_reference(x, num_heads):
    B, T, D = x.shape
    return x.view(B, T, num_heads, D // num_heads).transpose(1, 2)  # (B, H, T, d)


def merge_heads_reference(y):
    B, H, T, d = y.shape
    return y.transpose(1, 2).reshape(B, T, H * d)  # (B, T, H, d) -> (B, T, D)


def multihead_reference(x, qkv, out, num_heads, mask=None, rope=None):
    D = x.shape[-1]
    q, k, v = qkv(x).split(D, dim=-1)  # each (B, T, D)
    q, k, v = (split_heads_reference(t, num_heads) for t in (q, k, v))  # each (B, H, T, d)
    if rope is not None:
        q, k = rope(q), rope(k)
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5  # (B, H, T, T)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    y = torch.softmax(scores, dim=-1) @ v  # (B, H, T, d)
    return out(merge_heads_reference(y))  # (B, T, D)


# PLACEHOLDER entries (reference only, no cases yet): the lesson's helper replaces them.
SPLIT_HEADS = Exercise("split_heads", "03", split_heads_reference, list, "lesson 03")
MERGE_HEADS = Exercise("merge_heads", "03", merge_heads_reference, list, "lesson 03")
MULTIHEAD = Exercise("multihead", "03", multihead_reference, list, "lesson 03")
EXERCISES = (SPLIT_HEADS, MERGE_HEADS, MULTIHEAD)
