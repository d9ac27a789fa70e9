"""Generation with a KV cache: each token's keys and values are computed once and kept, so a
new token costs one position's work, not the whole sequence's (lessons 13a and 13b).

This module drives a TinyTransformer from outside, reading its modules (embed, each block's
norms, attention projections and feed-forward layer, the final norm and head, the RoPE
module); the model itself is unchanged. generate_cached keeps generate's contract: the same
tokens, from logits within rounding of the uncached forward pass.
"""

import time

import torch
import torch.nn.functional as F

from course_lib._validation import positive_int
from course_lib.block import TransformerBlock
from course_lib.gqa import GroupedQueryAttention, split_qkv
from course_lib.model import check_ids, check_sampling, next_token
from course_lib.multihead import MultiHeadAttention
from course_lib.positional import apply_rope, apply_rope_half
from course_lib.runtime import evaluating, one_thread


def rotate_from(rope, x: torch.Tensor, start: int) -> torch.Tensor:
    """x (..., T, d) rotated by RoPE at positions start .. start + T - 1: the rope module's
    rotation with a start offset, in its layout (lesson 13a).

    rotate_from(rope, x, 0) is rope(x). A cached step feeds one token at position start, and
    its query and key must turn by that position's angles, not by position 0's.
    """
    if isinstance(start, bool) or not isinstance(start, int) or start < 0:
        raise ValueError(f"start: expected an int >= 0, got {start!r}")
    T = x.shape[-2] if isinstance(x, torch.Tensor) and x.dim() >= 2 else 0
    if start + T > rope.max_len:
        raise ValueError(
            f"start: expected start + T <= max_len = {rope.max_len}, got {start} + {T}"
        )
    positions = torch.arange(start, start + T, device=x.device)  # (T,)
    rotate = apply_rope if rope.layout == "interleaved" else apply_rope_half
    return rotate(x, positions, rope.base)  # (..., T, d)


class KVCache:
    """Per layer, the keys and values (B, H_kv, capacity, d) of every position so far.

    The tensors are allocated once, for capacity positions (the model's max_len); length
    says how many are filled. A step writes its new positions after them (lesson 13b).
    """

    def __init__(self, num_layers, batch, num_kv_heads, d_head, capacity, dtype=torch.float32):
        for name, value in (
            ("num_layers", num_layers), ("batch", batch), ("num_kv_heads", num_kv_heads),
            ("d_head", d_head), ("capacity", capacity),
        ):  # fmt: skip
            positive_int(name, value)
        shape = (batch, num_kv_heads, capacity, d_head)
        self.keys = [torch.zeros(shape, dtype=dtype) for _ in range(num_layers)]
        self.values = [torch.zeros(shape, dtype=dtype) for _ in range(num_layers)]
        self.capacity = capacity
        self.length = 0  # positions filled, the same in every layer after each step

    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple:
        """Store k, v (B, H_kv, T, d) after the filled positions; return all of them so far,
        (B, H_kv, length + T, d) each. The caller moves length on once every layer wrote
        (lesson 13b)."""
        stop = self.length + k.shape[-2]
        self.keys[layer][:, :, self.length : stop] = k
        self.values[layer][:, :, self.length : stop] = v
        return self.keys[layer][:, :, :stop], self.values[layer][:, :, :stop]

    def nbytes(self) -> int:
        """Bytes of the keys and values held for the filled positions, all layers (lesson 13b)."""
        return sum(t[:, :, : self.length].nbytes for t in self.keys + self.values)


def _kv_heads(attn) -> int:
    return attn.num_kv_heads if isinstance(attn, GroupedQueryAttention) else attn.num_heads


def _check_model(model) -> None:
    if not hasattr(model, "blocks") or not hasattr(model, "config"):
        raise TypeError(f"model: expected a TinyTransformer, got {type(model).__name__}")
    for i, block in enumerate(model.blocks):
        attn = getattr(block, "attn", None)
        if not isinstance(block, TransformerBlock) or not isinstance(
            attn, MultiHeadAttention | GroupedQueryAttention
        ):
            raise TypeError(
                "model: expected TransformerBlocks with MultiHeadAttention or "
                f"GroupedQueryAttention, got {type(block).__name__} with "
                f"{type(attn).__name__} at blocks[{i}]"
            )


def new_cache(model, batch: int) -> KVCache:
    """An empty KVCache shaped for model's layers, for batch sequences of up to max_len
    (lesson 13b)."""
    _check_model(model)
    attn = model.blocks[0].attn
    return KVCache(
        len(model.blocks), batch, _kv_heads(attn), attn.d_head, model.config.max_len,
        dtype=model.embed.weight.dtype,
    )  # fmt: skip


def _attention_step(attn, x, mask, cache: KVCache, layer: int, start: int):
    """The block's attention for new positions start .. start + T - 1 of x (B, T, D): their
    queries against every cached key, their own keys and values added to the cache."""
    B, T, D = x.shape
    q, k, v = split_qkv(attn.qkv(x), attn.num_heads, _kv_heads(attn))  # (B, H|H_kv, T, d)
    if attn.rope is not None:
        q, k = rotate_from(attn.rope, q, start), rotate_from(attn.rope, k, start)
    k, v = cache.write(layer, k, v)  # (B, H_kv, start + T, d) each
    factor = None if attn.scale else 1.0  # None: torch's default 1/sqrt(d)
    y = F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, scale=factor, enable_gqa=k.shape[1] != q.shape[1]
    )  # (B, H, T, d)
    return attn.out(y.transpose(1, 2).reshape(B, T, D))  # (B, T, D)


def _block_step(block, x, mask, cache: KVCache, layer: int, start: int):
    """TransformerBlock's forward with the cached attention (pre- or post-norm)."""

    def add(x, update):
        return x + update if block.residual else update

    def attend(h):
        return block.drop(_attention_step(block.attn, h, mask, cache, layer, start))

    if block.prenorm:
        x = add(x, attend(block.norm1(x)))  # (B, T, D)
        return add(x, block.drop(block.ff(block.norm2(x))))  # (B, T, D)
    x = block.norm1(add(x, attend(x)))  # (B, T, D)
    return block.norm2(add(x, block.drop(block.ff(x))))  # (B, T, D)


def cached_forward(model, ids: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """Logits (B, T, V) of ids (B, T), the tokens that follow the cache's positions; their
    keys and values join the cache (lesson 13b).

    Position start + i sees the cached positions and new positions 0..i, as the causal mask
    of the whole sequence would let it. With an empty cache this is model(ids). Put the
    model in eval mode first, as generate does (dropout, batch norm's running statistics).
    """
    _check_model(model)
    check_ids("ids", ids, model.config.vocab_size)
    B, T = ids.shape
    start = cache.length
    if B != cache.keys[0].shape[0] or start + T > cache.capacity:
        raise ValueError(
            f"ids: expected batch {cache.keys[0].shape[0]} and at most "
            f"{cache.capacity - start} tokens (the cache holds {start} of {cache.capacity}), "
            f"got shape {(B, T)}"
        )
    x = model.embed(ids)  # (B, T, D)
    if model.config.positional == "sinusoidal":
        x = x + model.pe[start : start + T]  # (B, T, D) + (T, D)
    elif model.config.positional == "learned":
        x = x + model.pos.weight[start : start + T]  # (B, T, D) + (T, D)
    # one new token sees every cached position: no mask needed
    mask = model.causal[start : start + T, : start + T] if T > 1 else None  # (T, start + T)
    for layer, block in enumerate(model.blocks):
        x = _block_step(block, x, mask, cache, layer, start)  # (B, T, D)
    cache.length = start + T
    return model.head(model.norm(x))  # (B, T, V)


@torch.no_grad()
def cached_logits(model, ids: torch.Tensor, prompt_len: int = 1) -> torch.Tensor:
    """Logits (B, T, V) of ids (B, T) as cached generation computes them: the first
    prompt_len tokens in one pass, then one token per step. Compare with model(ids) (lesson 13b)."""
    _check_model(model)
    check_ids("ids", ids, model.config.vocab_size)
    positive_int("prompt_len", prompt_len)
    with evaluating(model):
        cache = new_cache(model, ids.shape[0])
        logits = [cached_forward(model, ids[:, :prompt_len], cache)]
        for t in range(prompt_len, ids.shape[1]):
            logits.append(cached_forward(model, ids[:, t : t + 1], cache))  # (B, 1, V)
    return torch.cat(logits, dim=1)  # (B, T, V)


@torch.no_grad()
def generate_cached(
    model,
    prompt: torch.Tensor,
    num_tokens: int,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    seed: int = 0,
) -> torch.Tensor:
    """course_lib.model.generate with a KV cache: the same tokens for the same seed
    (lesson 13b). Returns (B, T0 + num_tokens).

    The prompt (at most max_len tokens of it) goes through in one pass; each new token after
    that is one position's work. Once the sequence is longer than max_len, generate's window
    slides by a token per step, every position in it moves, and no cached key still holds:
    each step then recomputes the window, as generate does. temperature 0 (greedy) and
    top_k pick each token as generate does (lesson 10), through the same next_token.
    """
    _check_model(model)
    check_sampling(prompt, num_tokens, temperature, top_k, model.config.vocab_size)
    generator = torch.Generator().manual_seed(seed)
    max_len = model.config.max_len
    ids = prompt
    with evaluating(model):
        cache = new_cache(model, prompt.shape[0])
        logits = cached_forward(model, ids[:, -max_len:], cache)[:, -1]  # (B, V)
        for step in range(num_tokens):
            new = next_token(logits, temperature, top_k, generator)  # (B, 1)
            ids = torch.cat([ids, new], dim=1)
            if step == num_tokens - 1:
                break
            if cache.length < max_len:
                logits = cached_forward(model, new, cache)[:, -1]  # (B, V)
            else:  # the window slides: start again from the last max_len tokens
                cache = new_cache(model, prompt.shape[0])
                logits = cached_forward(model, ids[:, -max_len:], cache)[:, -1]
    return ids


def token_costs(config, T: int, *, cached: bool, num_kv_heads=None, bytes_per_value: int = 4):
    """{"multiply_adds", "bytes"} of the matrix products behind one new token's logits at
    context length T (the new token included), for one sequence (lesson 13a).

    cached=True: the new token alone goes through, its attention reading T cached keys and
    values per layer. cached=False: all T tokens go through again, as generate does, with a
    (T, T) causal mask, and every position gets logits. Counted from the config alone, for
    TinyTransformer's layout (biases on the attention and feed-forward Linears, none on the
    head). Bytes are what each product reads and writes: operands, bias and result once per
    product, bytes_per_value bytes a value; the attention is one fused call reading q, k, v
    and the mask (1 byte an entry) and writing its output. Norms, GELU, softmax, RoPE's
    rotation and the embedding lookup are not matrix products and are left out.
    """
    positive_int("T", T)
    positive_int("bytes_per_value", bytes_per_value)
    if not isinstance(cached, bool):
        raise TypeError(f"cached: expected True or False, got {type(cached).__name__}")
    D, H, V = config.d_model, config.num_heads, config.vocab_size
    kv = (num_kv_heads or H) * (D // H)  # width of the keys, and of the values
    N = 1 if cached else T  # tokens that go through the model

    def linear(n_in, n_out, bias=True):  # (multiply-adds, values read and written)
        return N * n_in * n_out, N * n_in + n_in * n_out + (n_out if bias else 0) + N * n_out

    products = [linear(D, D + 2 * kv), linear(D, D)]
    if config.d_ff:  # d_ff = 0: blocks without a feed-forward layer
        products += [linear(D, config.d_ff), linear(config.d_ff, D)]
    # scores q.k and the weighted sum of v: N queries x T keys x H heads of d = D wide, twice
    attention = (2 * N * T * D, N * D + 2 * T * kv + N * D)
    layer_macs = sum(m for m, _ in products) + attention[0]
    layer_values = sum(b for _, b in products) + attention[1]
    mask_bytes = 0 if cached else T * T  # the (T, T) bool mask of the full forward pass
    head_macs, head_values = linear(D, V, bias=False)
    return {
        "multiply_adds": config.num_layers * layer_macs + head_macs,
        "bytes": config.num_layers * (layer_values * bytes_per_value + mask_bytes)
        + head_values * bytes_per_value,
    }


def _median_seconds(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return sorted(times)[repeats // 2]


@torch.no_grad()
def time_per_token(model, contexts, *, repeats: tuple = (15, 3)) -> dict:
    """{"cached": [...], "recomputed": [...]}: median seconds for one new token at each
    context length T of `contexts`, on one torch thread (lesson 13b). Cached: cached_forward
    of the T-th token after T - 1 cached ones, in a cache allocated once; recomputed:
    model(ids) on all T tokens. Wall time: it differs from machine to machine and run to run.
    """
    timed = {"cached": [], "recomputed": []}
    with one_thread(), evaluating(model):
        for T in contexts:
            g = torch.Generator().manual_seed(T)
            seq = torch.randint(model.config.vocab_size, (1, T), generator=g)  # (1, T)
            cache = new_cache(model, 1)
            cached_forward(model, seq[:, :-1], cache)  # T - 1 tokens cached

            def cached_step(cache=cache, seq=seq):
                cache.length = seq.shape[1] - 1  # back to T - 1 filled: the same step again
                cached_forward(model, seq[:, -1:], cache)

            timed["cached"].append(_median_seconds(cached_step, repeats[0]))
            timed["recomputed"].append(_median_seconds(lambda seq=seq: model(seq), repeats[1]))
    return timed
