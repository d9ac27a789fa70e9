"""Lesson 05_encoder_decoder's exercises: cross-attention; the decoder layer that uses it.

Keyed by the lesson's full stem, not its number: the former lesson 05_transformer_block (now
lessons 08 and 09; a learner's workspace may still hold it) shared the 05
(course_lib.exercises.lesson_file finds each lesson's notebook by its key).

CONTRACTS (fixed: later lessons and course_lib.mywork rely on them):
- cross_attention(x, memory, q_proj, kv_proj, out, num_heads, mask=None) -> (B, T_q, D):
  x (B, T_q, D) gives the queries through q_proj (Linear D -> D); memory (B, T_k, D) gives
  the keys and values through kv_proj (Linear D -> 2D, laid out [k | v]); H heads of width
  d = D / H, each scaled by 1/sqrt(d); mask None or bool broadcastable to (B, H, T_q, T_k),
  True = may attend; out (Linear D -> D) mixes the merged heads. Same numbers as
  torch.nn.MultiheadAttention called as layer(x, memory, memory), in_proj_weight =
  [q_proj.weight; kv_proj.weight]. Built from the learner's attention (lesson 02b) and
  split_heads / merge_heads (lesson 04a).
- decoder_layer(y, memory, self_attn, cross_attn, memory_mask=None) -> (B, T_out, D):
  h = y + self_attn(y, causal mask of size T_out); return h + cross_attn(h, memory,
  memory_mask). self_attn(h, mask=None) and cross_attn(h, memory, mask=None) are functions.
  Same numbers as torch.nn.TransformerDecoderLayer (pre-norm, norms replaced by the identity,
  feed-forward output zero) behind those functions.
"""

from course_lib.exercises.lesson05_encoder_decoder.cross_attention import CROSS_ATTENTION
from course_lib.exercises.lesson05_encoder_decoder.decoder_layer import (
    DECODER_LAYER,
    TorchCrossAttention,
    TorchSelfAttention,
    decoder_layer_torch,
)

EXERCISES = (CROSS_ATTENTION, DECODER_LAYER)

__all__ = [
    "CROSS_ATTENTION",
    "DECODER_LAYER",
    "EXERCISES",
    "TorchCrossAttention",
    "TorchSelfAttention",
    "decoder_layer_torch",
]
