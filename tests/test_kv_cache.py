import dataclasses

import pytest
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.testing import assert_close

from course_lib.gqa import kv_cache_bytes
from course_lib.kv_cache import (
    KVCache,
    cached_forward,
    cached_logits,
    generate_cached,
    new_cache,
    rotate_from,
    token_costs,
)
from course_lib.model import TinyTransformer, generate
from course_lib.positional import RotaryEmbedding, apply_rope
from course_lib.variants import load_trained

V = 23


def tiny(positional="rope", max_len=24, **kwargs):
    """A random-weight TinyTransformer (num_kv_heads=2 or 1: its attention grouped-query)."""
    return TinyTransformer(V, 32, 4, 48, 2, max_len, positional=positional, **kwargs).eval()


def ids(B=2, T=24, seed=0):
    return torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_rotate_from_is_the_rope_module_at_shifted_positions(layout):
    rope = RotaryEmbedding(8, layout=layout, max_len=32)
    x = torch.randn(2, 3, 20, 8)
    assert torch.equal(rotate_from(rope, x, 0), rope(x))
    # the last 5 positions of a 20-long sequence, fed alone with start 15
    assert_close(rotate_from(rope, x[..., 15:, :], 15), rope(x)[..., 15:, :], atol=0, rtol=0)
    if layout == "interleaved":
        positions = torch.arange(7, 12)
        assert torch.equal(
            rotate_from(rope, x[..., :5, :], 7), apply_rope(x[..., :5, :], positions)
        )


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_one_position_at_a_time_is_the_tables_rotation_bit_for_bit(layout):
    # what a cached step does at every position of the base model's 128, against the table
    rope = RotaryEmbedding(16, layout=layout, max_len=128)
    x = torch.randn(2, 4, 128, 16)
    steps = torch.cat([rotate_from(rope, x[..., t : t + 1, :], t) for t in range(128)], dim=-2)
    assert torch.equal(steps, rope(x))


def test_rotated_scores_depend_only_on_the_distance():
    rope = RotaryEmbedding(16, max_len=64)
    q, k = torch.randn(1, 16, dtype=torch.float64), torch.randn(1, 16, dtype=torch.float64)
    score = [(rotate_from(rope, q, m) * rotate_from(rope, k, m - 3)).sum() for m in (3, 10, 40)]
    assert_close(score[0], score[1]) and assert_close(score[0], score[2])


def test_rotate_from_names_bad_offsets():
    rope = RotaryEmbedding(8, max_len=10)
    with pytest.raises(ValueError, match="start: expected an int >= 0, got -1"):
        rotate_from(rope, torch.randn(2, 8), -1)
    with pytest.raises(ValueError, match=r"start \+ T <= max_len = 10, got 9 \+ 2"):
        rotate_from(rope, torch.randn(2, 8), 9)


@pytest.mark.parametrize("positional", ["rope", "sinusoidal", "none", "learned"])
@pytest.mark.parametrize("prompt_len", [1, 2, 7, 24])
def test_cached_logits_match_the_full_forward(positional, prompt_len):
    model = tiny(positional)
    x = ids()
    assert_close(cached_logits(model, x, prompt_len), model(x), atol=1e-5, rtol=0)


@pytest.mark.parametrize("positional", ["rope", "sinusoidal"])
def test_chunks_after_a_cache_see_the_cache_and_their_own_past(positional):
    model = tiny(positional)
    x = ids()
    cache = new_cache(model, 2)
    with torch.no_grad():
        chunks = [cached_forward(model, x[:, a:b], cache) for a, b in ((0, 5), (5, 12), (12, 24))]
    assert_close(torch.cat(chunks, dim=1), model(x), atol=1e-5, rtol=0)


@pytest.mark.parametrize(
    "kwargs", [{"prenorm": False}, {"norm": "none"}, {"norm": "batch"}, {"scale": False},
               {"num_kv_heads": 2}, {"num_kv_heads": 1}]
)  # fmt: skip
def test_cached_logits_match_for_the_block_variants_and_grouped_queries(kwargs):
    model = tiny(**kwargs)
    x = ids()
    assert_close(cached_logits(model, x, 3), model(x), atol=1e-5, rtol=0)


@pytest.mark.parametrize("positional", ["rope", "sinusoidal", "none", "learned"])
@pytest.mark.parametrize("prompt_len,num_tokens", [(1, 10), (4, 20), (30, 5), (1, 40)])
def test_generate_cached_gives_the_tokens_generate_gives(positional, prompt_len, num_tokens):
    # (30, 5): a prompt longer than max_len = 24; (1, 40) and (4, 20): past max_len
    model = tiny(positional)
    prompt = ids(T=prompt_len, seed=1)
    expected = generate(model, prompt, num_tokens, temperature=0.8, seed=5)
    assert torch.equal(
        generate_cached(model, prompt, num_tokens, temperature=0.8, seed=5), expected
    )


@pytest.mark.parametrize("temperature, top_k", [(0, None), (0.8, 3), (1.5, 1), (0, 5)])
def test_generate_cached_keeps_generate_s_greedy_and_top_k(temperature, top_k):
    model = tiny()
    prompt = ids(B=3, T=4)
    expected = generate(model, prompt, 12, temperature=temperature, top_k=top_k, seed=3)
    got = generate_cached(model, prompt, 12, temperature=temperature, top_k=top_k, seed=3)
    assert torch.equal(got, expected)


def test_generate_cached_with_grouped_queries_and_the_model_left_in_training_mode():
    model = tiny(num_kv_heads=2, norm="batch").train()
    prompt = ids(B=3, T=2)
    expected = generate(model, prompt, 15, seed=2)
    assert torch.equal(generate_cached(model, prompt, 15, seed=2), expected)
    assert model.training  # put back as it was


@pytest.mark.slow  # about 0.5 s: 140 uncached steps
def test_shipped_checkpoint_same_tokens_and_logits(measure):
    model = load_trained("base", 0)
    prompt = torch.tensor([[3]])
    assert torch.equal(generate_cached(model, prompt, 140), generate(model, prompt, 140))
    x = ids(B=1, T=128, seed=3).clamp(max=model.config.vocab_size - 1)
    error = (cached_logits(model, x) - model(x)).abs().max()
    # float32 rounding, not a difference in the method: RoPE at an offset is bit for bit the
    # table's (test_one_position_at_a_time_...), and float64 agrees to 1.5e-14 (below). What
    # is left is the order in which torch sums a matrix product's terms: a (1, D) row through
    # a Linear against the same row inside a (T, D) batch (and the fused attention of one
    # query against 128) differ in the last bit or two, which the layer norms carry to the
    # logits. On this input, over the three shipped seeds, the native (AVX-512), generic and
    # AVX2 paths and 1 or 2 threads: 4.8e-6 .. 8.6e-6 (seed 0: 6.6e-6 .. 7.4e-6). Over 10
    # inputs drawn from the whole vocabulary it reaches 3.0e-5, and on the long split's lines,
    # past the 32 positions the models were trained on, 1.0e-4 (|logit| up to 16)
    assert measure("float32 max logit difference", error) < 2e-5
    model64 = model.double()
    assert_close(cached_logits(model64, x), model64(x), atol=1e-10, rtol=0)  # measured 1e-14


@pytest.mark.parametrize("num_kv_heads", [None, 2, 1])
def test_cache_bytes_are_the_formula(num_kv_heads):
    model = tiny(num_kv_heads=num_kv_heads)
    cache = new_cache(model, batch=3)
    cached_forward(model, ids(B=3, T=5), cache)
    cached_forward(model, ids(B=3, T=1), cache)
    kv = num_kv_heads or 4
    assert cache.length == 6 and cache.nbytes() == 3 * kv_cache_bytes(2, kv, 6, 8)
    assert cache.keys[0].shape == (3, kv, 24, 8)  # allocated for max_len once


class Products(TorchFunctionMode):
    """Multiply-adds and bytes of each F.linear and F.scaled_dot_product_attention call, from
    the shapes and sizes of the tensors actually passed: an independent count."""

    def __init__(self):
        super().__init__()
        self.multiply_adds = self.bytes = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func is F.linear:
            x, w = args[0], args[1]
            self.multiply_adds += x.numel() // x.shape[-1] * w.numel()
        elif func is F.scaled_dot_product_attention:
            q, k = args[0], args[1]
            self.multiply_adds += 2 * q.numel() * k.shape[-2]  # q.k and weights @ v
        else:
            return out
        tensors = [*args, *kwargs.values(), out]
        self.bytes += sum(t.nbytes for t in tensors if isinstance(t, torch.Tensor))
        return out


@pytest.mark.parametrize("num_kv_heads", [None, 2])
@pytest.mark.parametrize("T", [1, 6, 24])
def test_token_costs_match_a_count_of_the_calls(T, num_kv_heads):
    model = tiny(num_kv_heads=num_kv_heads)
    x = ids(B=1, T=T)
    with torch.no_grad(), Products() as recomputed:
        model(x)
    cache = new_cache(model, 1)
    with torch.no_grad():
        if T > 1:
            cached_forward(model, x[:, :-1], cache)
        with Products() as cached:
            cached_forward(model, x[:, -1:], cache)
    for count, is_cached in ((recomputed, False), (cached, True)):
        expected = token_costs(model.config, T, cached=is_cached, num_kv_heads=num_kv_heads)
        assert expected == {"multiply_adds": count.multiply_adds, "bytes": count.bytes}


class _NoFeedForward(torch.nn.Module):
    """A block's feed-forward layer that adds nothing (d_ff = 0)."""

    def forward(self, x):
        return torch.zeros_like(x)


def test_token_costs_without_feed_forward_layers():
    model = tiny()
    for block in model.blocks:
        block.ff = _NoFeedForward()
    x = ids(B=1, T=9)
    with torch.no_grad(), Products() as recomputed:
        model(x)
    config = dataclasses.replace(model.config, d_ff=0)
    expected = token_costs(config, 9, cached=False)
    assert expected == {"multiply_adds": recomputed.multiply_adds, "bytes": recomputed.bytes}


def test_cached_cost_grows_linearly_and_recomputing_quadratically():
    config = tiny().config
    cached = [token_costs(config, T, cached=True)["multiply_adds"] for T in (100, 200, 300)]
    full = [token_costs(config, T, cached=False)["multiply_adds"] for T in (100, 200, 300)]
    assert cached[2] - cached[1] == cached[1] - cached[0] == 2 * 2 * 100 * 32  # 2 L D per key
    assert full[2] - 2 * full[1] + full[0] == 2 * 2 * 2 * 100**2 * 32  # second difference
    one_cached, one_full = (token_costs(config, 1, cached=c) for c in (True, False))
    assert one_cached["multiply_adds"] == one_full["multiply_adds"]
    assert one_full["bytes"] - one_cached["bytes"] == 2  # the (1, 1) mask of each of 2 layers


@pytest.mark.slow  # torch's FLOP counter imports sympy on first use (about 1.5 s)
def test_token_costs_match_torchs_flop_counter():
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    model = tiny(num_kv_heads=2)
    x = ids(B=1, T=20)
    cache = new_cache(model, 1)
    with torch.no_grad():
        cached_forward(model, x[:, :-1], cache)
        # torch's math kernel: its matrix products are ones the counter knows
        with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as cached:
            cached_forward(model, x[:, -1:], cache)
        with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as full:
            model(x)
    costs = {c: token_costs(model.config, 20, cached=c, num_kv_heads=2) for c in (True, False)}
    assert cached.get_total_flops() == 2 * costs[True]["multiply_adds"]  # a multiply-add: 2
    assert full.get_total_flops() == 2 * costs[False]["multiply_adds"]


def test_bad_arguments_are_named():
    model = tiny()
    cache = new_cache(model, 2)
    with pytest.raises(ValueError, match="ids: expected a \\(B, T\\) tensor of int64"):
        cached_forward(model, torch.zeros(2, 3), cache)
    with pytest.raises(ValueError, match=r"ids: expected T >= 1 ids in \[0, 23\)"):
        cached_forward(model, torch.full((2, 3), 23), cache)
    with pytest.raises(ValueError, match="ids: expected batch 2 and at most 24 tokens"):
        cached_forward(model, ids(B=2, T=25), cache)
    with pytest.raises(ValueError, match="ids: expected batch 2"):
        cached_forward(model, ids(B=1, T=2), cache)
    with pytest.raises(TypeError, match="model: expected a TinyTransformer, got Linear"):
        new_cache(torch.nn.Linear(2, 2), 1)
    broken = tiny()
    broken.blocks[1].attn = torch.nn.Identity()
    with pytest.raises(TypeError, match=r"got TransformerBlock with Identity at blocks\[1\]"):
        generate_cached(broken, ids(T=2), 3)
    with pytest.raises(ValueError, match="prompt: expected a \\(B, T0\\) tensor"):
        generate_cached(model, torch.zeros(3, dtype=torch.long), 3)
    with pytest.raises(ValueError, match="num_tokens: expected a positive int, got 0"):
        generate_cached(model, ids(T=2), 0)
    with pytest.raises(ValueError, match="temperature: expected a number >= 0"):
        generate_cached(model, ids(T=2), 3, temperature=-0.5)
    with pytest.raises(ValueError, match="top_k: expected at most the vocabulary size"):
        generate_cached(model, ids(T=2), 3, top_k=model.config.vocab_size + 1)
    with pytest.raises(ValueError, match="prompt_len: expected a positive int, got 0"):
        cached_logits(model, ids(T=4), 0)
    with pytest.raises(TypeError, match="cached: expected True or False, got str"):
        token_costs(model.config, 4, cached="yes")
    with pytest.raises(ValueError, match="capacity: expected a positive int, got 0"):
        KVCache(2, 1, 4, 8, 0)


def test_token_costs_read_only_the_config():
    config = dataclasses.replace(tiny().config, num_layers=3)
    one = token_costs(dataclasses.replace(config, num_layers=1), 50, cached=True)
    three = token_costs(config, 50, cached=True)
    head = 32 * V  # the head's multiply-adds, once however many layers
    assert three["multiply_adds"] - head == 3 * (one["multiply_adds"] - head)
