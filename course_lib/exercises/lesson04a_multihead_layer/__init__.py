"""Lesson 04a_multihead_layer's exercises: split and merge heads; multi-head attention from
your own parts.

CONTRACTS (fixed: later lessons and course_lib.mywork rely on them):
- split_heads(x, num_heads): (B, T, D) -> (B, H, T, d), d = D / H; head h holds features
  h*d .. (h+1)*d - 1 of every token.
- merge_heads(y): (B, H, T, d) -> (B, T, H*d), undoing split_heads.
- multihead(x, qkv, out, num_heads, mask=None, rope=None) -> (B, T, D): qkv a callable
  (an nn.Linear D -> 3D) whose output is laid out [q | k | v], each D wide; out a callable
  (nn.Linear D -> D) applied to the merged heads; mask None or bool broadcastable to
  (B, H, T, T), True = may attend; rope None or a function applied to q and to k, each
  (B, H, T, d), before the scores (lesson 07 passes one). Built from your split_heads,
  merge_heads and lesson 02b's attention. Same numbers as torch.nn.MultiheadAttention with
  in_proj_weight = qkv.weight, out_proj = out.

The multihead check compares with torch's own multi-head attention (the function that
torch.nn.MultiheadAttention.forward runs), handed qkv's and out's weights; torch's layer has
no rotary embedding, so with a rope the reference is the same projections around torch's
fused attention, which tests/test_exercises_lesson04a_multihead_layer.py holds against the course's
MultiHeadAttention(rope=RotaryEmbedding(d)).

One module per exercise: split_heads, merge_heads, multihead.
"""

from course_lib.exercises.lesson04a_multihead_layer.merge_heads import (
    MERGE_HEADS,
    merge_heads_reference,
)
from course_lib.exercises.lesson04a_multihead_layer.multihead import (
    MULTIHEAD,
    multihead_reference,
    torch_attn_mask,
)
from course_lib.exercises.lesson04a_multihead_layer.split_heads import (
    SPLIT_HEADS,
    split_heads_reference,
)

EXERCISES = (SPLIT_HEADS, MERGE_HEADS, MULTIHEAD)

__all__ = [
    "MERGE_HEADS",
    "merge_heads_reference",
    "MULTIHEAD",
    "multihead_reference",
    "torch_attn_mask",
    "SPLIT_HEADS",
    "split_heads_reference",
    "EXERCISES",
]
