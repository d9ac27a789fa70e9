"""Lesson 13's exercises: generation with a KV cache; grouped-query attention.

CONTRACTS (fixed: the lesson and its checks rely on them):
- rope_from(x, start) -> x's shape and dtype: x (..., T, d), row t turned pair by pair
  (interleaved pairs (2i, 2i+1)) by (start + t) * theta_i, theta_i = 10000**(-2i/d);
  rope_from(x, 0) is lesson 07a's rope_heads(x).
- attend_cached(x, qkv, out, num_heads, past_k, past_v, rope=None) -> (y, k, v): x (B, T, D)
  the T new tokens' input to one attention layer; qkv a Linear(D, 3D) laid out [q | k | v],
  out a Linear(D, D); past_k, past_v (B, H, S, d) the rotated keys and the values of the S
  tokens before (S may be 0); rope None or a function rope(t, start) like rope_from. The
  new tokens sit at positions S .. S + T - 1 and token i sees keys 0 .. S + i. y (B, T, D);
  k, v (B, H, S + T, d): the past with the new tokens' appended along the time axis.
- forward_with_cache(model, ids, cache) -> (logits (B, T, V), new cache): model a
  pre-norm TinyTransformer with RoPE (the shipped base model's kind), ids (B, T) the next T
  tokens, cache [] or a list of one (keys, values) pair per layer as attend_cached returns
  them.
- generate_cached(model, prompt, num_tokens, *, temperature=1.0, seed=0) -> (B, T0 +
  num_tokens) int64: course_lib.model.generate's tokens, with a cache, for prompt and new
  tokens within max_len.
- grouped_multihead(x, qkv, out, num_heads, num_kv_heads, mask=None, rope=None) ->
  (B, T, D): lesson 04a's multihead with qkv a Linear(D, D + 2 * num_kv_heads * d) laid out
  [q | k | v] and query head h reading key/value head h // (num_heads // num_kv_heads).

Every wrong version below is a mistake a learner makes, written the way it comes out; a test
(tests/test_exercises_lesson13.py) writes each again as a learner would and checks its hint.

One module per exercise: rope_from, attend_cached, cached_generation (forward_with_cache and
generate_cached), grouped_multihead.
"""

from course_lib.exercises.lesson13.attend_cached import (
    ATTEND_CACHED,
    attend_cached_reference,
    shifted_causal,
)
from course_lib.exercises.lesson13.cached_generation import (
    FORWARD_WITH_CACHE,
    GENERATE_CACHED,
    forward_with_cache_reference,
    generate_reference,
    run_forward,
    run_generate,
    stepwise,
    uncached,
)
from course_lib.exercises.lesson13.grouped_multihead import (
    GROUPED_MULTIHEAD,
    grouped_multihead_reference,
)
from course_lib.exercises.lesson13.rope_from import ROPE_FROM, rope_from_reference

EXERCISES = (ROPE_FROM, ATTEND_CACHED, FORWARD_WITH_CACHE, GENERATE_CACHED, GROUPED_MULTIHEAD)

__all__ = [
    "ATTEND_CACHED",
    "attend_cached_reference",
    "shifted_causal",
    "FORWARD_WITH_CACHE",
    "GENERATE_CACHED",
    "forward_with_cache_reference",
    "generate_reference",
    "run_forward",
    "run_generate",
    "stepwise",
    "uncached",
    "GROUPED_MULTIHEAD",
    "grouped_multihead_reference",
    "ROPE_FROM",
    "rope_from_reference",
    "EXERCISES",
]
