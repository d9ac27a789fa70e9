import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from course_lib.attention import causal_mask, scaled_dot_product_attention
from course_lib.gqa import GroupedQueryAttention, grouped_attend, kv_cache_bytes, split_qkv
from course_lib.multihead import MultiHeadAttention
from course_lib.positional import RotaryEmbedding
from helpers import assert_fused_path_matches_scratch


def repeat_kv(t: torch.Tensor, groups: int) -> torch.Tensor:
    """Each key/value head copied for the query heads of its group: (B, H_kv, T, d) ->
    (B, H_kv * groups, T, d), head j serving query heads j * groups .. (j + 1) * groups - 1."""
    B, H_kv, T, d = t.shape
    return t[:, :, None].expand(B, H_kv, groups, T, d).reshape(B, H_kv * groups, T, d)


def by_hand(module, x, mask=None):
    """The module's output from its weights, with the key/value heads repeated by hand."""
    B, T, D = x.shape
    H, H_kv, d = module.num_heads, module.num_kv_heads, module.d_head
    W, b = module.qkv.weight, module.qkv.bias
    q = (x @ W[:D].T + b[:D]).view(B, T, H, d).permute(0, 2, 1, 3)  # (B, H, T, d)
    k = (x @ W[D : D + H_kv * d].T + b[D : D + H_kv * d]).view(B, T, H_kv, d).permute(0, 2, 1, 3)
    v = (x @ W[D + H_kv * d :].T + b[D + H_kv * d :]).view(B, T, H_kv, d).permute(0, 2, 1, 3)
    if module.rope is not None:
        q, k = module.rope(q), module.rope(k)
    k, v = repeat_kv(k, H // H_kv), repeat_kv(v, H // H_kv)
    y, _ = scaled_dot_product_attention(q, k, v, mask)  # the course's lesson-01 attention
    return module.out(y.permute(0, 2, 1, 3).reshape(B, T, D))


@pytest.mark.parametrize("H,H_kv", [(4, 1), (4, 2), (4, 4), (6, 3), (8, 2)])
@pytest.mark.parametrize("mask_shape", [None, "causal", (2, 1), "per head"])
def test_grouped_attend_matches_torch_enable_gqa_and_repeated_heads(H, H_kv, mask_shape):
    q, k, v = torch.randn(2, H, 7, 4), torch.randn(2, H_kv, 7, 4), torch.randn(2, H_kv, 7, 4)
    if mask_shape == "causal":
        mask = causal_mask(7)
    elif mask_shape is None:
        mask = None
    else:
        mask = torch.rand(*((2, H) if mask_shape == "per head" else mask_shape), 7, 7) > 0.5
        mask[..., 3] = True
    y, weights = grouped_attend(q, k, v, mask, 0.5)
    assert_close(y, F.scaled_dot_product_attention(q, k, v, mask, scale=0.5, enable_gqa=True))
    rk, rv = repeat_kv(k, H // H_kv), repeat_kv(v, H // H_kv)
    assert_close(y, F.scaled_dot_product_attention(q, rk, rv, mask, scale=0.5))
    expected_y, expected_w = scaled_dot_product_attention(q, rk, rv, mask, scale=0.5)
    assert_close(weights, expected_w) and weights.shape == (2, H, 7, 7)


def test_repeat_kv_is_torch_repeat_interleave():
    k = torch.randn(2, 3, 5, 4)
    assert torch.equal(repeat_kv(k, 4), k.repeat_interleave(4, dim=1))


@pytest.mark.parametrize("H_kv", [1, 2, 4])
@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("rope", [False, True])
def test_module_matches_the_heads_repeated_by_hand(H_kv, fused, rope):
    module = GroupedQueryAttention(32, 4, H_kv, rope=RotaryEmbedding(8) if rope else None)
    module.fused = fused
    x = torch.randn(2, 9, 32)
    mask = causal_mask(9)
    assert_close(module(x, mask), by_hand(module, x, mask))
    y, weights = module(x, mask, return_weights=True)
    assert_close(y, by_hand(module, x, mask))
    assert_close(weights.sum(-1), torch.ones(2, 4, 9)) and torch.all(weights.triu(1) == 0)


@pytest.mark.parametrize("fused", [True, False])
def test_as_many_kv_heads_as_query_heads_is_multi_head_attention(fused):
    mha = MultiHeadAttention(24, 3, rope=RotaryEmbedding(8))
    gqa = GroupedQueryAttention(24, 3, 3, rope=RotaryEmbedding(8))
    gqa.load_state_dict(mha.state_dict())  # the same names and shapes: [q | k | v] and out
    gqa.fused = fused
    x, mask = torch.randn(2, 6, 24), causal_mask(6)
    assert_close(gqa(x, mask), mha(x, mask))
    plain_mha, plain_gqa = MultiHeadAttention(24, 3), GroupedQueryAttention(24, 3, 3)
    plain_gqa.load_state_dict(plain_mha.state_dict())
    expected, _ = plain_mha.to_torch()(x, x, x, attn_mask=~mask, need_weights=False)
    assert_close(plain_gqa(x, mask), expected)  # torch.nn.MultiheadAttention, mask inverted


def test_split_matches_multihead_attentions_own_split():
    mha = MultiHeadAttention(16, 2)
    x = torch.randn(2, 5, 16)
    for ours, theirs in zip(split_qkv(mha.qkv(x), 2, 2), mha.qkv_heads(x), strict=True):
        assert torch.equal(ours, theirs)


def test_fused_and_from_scratch_paths_agree_in_gradients():
    module = GroupedQueryAttention(32, 8, 2, rope=RotaryEmbedding(4))
    x = torch.randn(2, 10, 32, requires_grad=True)
    assert_fused_path_matches_scratch(module, x, causal_mask(10))


@pytest.mark.parametrize("H_kv", [1, 2, 4, 8])
def test_fewer_kv_heads_fewer_parameters(H_kv):
    D, H, d = 64, 8, 8
    count = sum(p.numel() for p in GroupedQueryAttention(D, H, H_kv).parameters())
    assert count == (D * D + D) + 2 * (D * H_kv * d + H_kv * d) + (D * D + D)


def test_without_the_scale_scores_are_plain_dot_products():
    scaled = GroupedQueryAttention(16, 4, 2)
    plain = GroupedQueryAttention(16, 4, 2, scale=False)
    plain.load_state_dict(scaled.state_dict())
    x = torch.randn(1, 5, 16)
    q, k, v = plain.grouped_heads(x)
    y = F.scaled_dot_product_attention(q, k, v, scale=1.0, enable_gqa=True)
    assert_close(plain(x), plain.out(y.transpose(1, 2).reshape(1, 5, 16)))
    plain.fused = False
    assert_close(plain(x), plain.out(y.transpose(1, 2).reshape(1, 5, 16)))
    assert not torch.allclose(scaled(x), plain(x), atol=1e-3)


def test_kv_cache_bytes_is_the_formula_and_what_the_heads_hold():
    assert kv_cache_bytes(2, 4, 128, 16) == 2 * 2 * 4 * 128 * 16 * 4 == 131072
    assert kv_cache_bytes(2, 1, 128, 16, bytes_per_value=2) == 16384
    layers = [GroupedQueryAttention(64, 8, 2) for _ in range(3)]
    x = torch.randn(1, 50, 64)
    held = sum(t.nbytes for layer in layers for t in layer.grouped_heads(x)[1:])
    assert held == kv_cache_bytes(3, 2, 50, 8)


@pytest.mark.parametrize(
    "args,kwargs,error,message",
    [
        ((32, 4, 3), {}, ValueError, r"num_kv_heads: expected a divisor of num_heads = 4, got 3"),
        ((32, 4, 0), {}, ValueError, "num_kv_heads: expected a positive int, got 0"),
        ((32, 4, 2.0), {}, TypeError, "num_kv_heads: expected a positive int, got float"),
        ((30, 4, 2), {}, ValueError, "num_heads: expected a divisor of d_model = 30, got 4"),
        ((32, 4, 2), {"rope": RotaryEmbedding(4)}, ValueError, "rope: expected a RotaryEmbedding"),
        ((32, 4, 2), {"scale": 0.5}, TypeError, "scale: expected True or False, got float 0.5"),
    ],
)
def test_bad_construction_is_named(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        GroupedQueryAttention(*args, **kwargs)


def test_bad_inputs_are_named():
    module = GroupedQueryAttention(16, 4, 2)
    with pytest.raises(ValueError, match=r"x: expected shape \(B, T, 16\), got \(1, 3, 8\)"):
        module(torch.randn(1, 3, 8))
    with pytest.raises(ValueError, match="mask: expected a shape broadcastable"):
        module(torch.randn(1, 3, 16), torch.ones(1, 2, 3, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="qkv: expected a last dimension"):
        split_qkv(torch.randn(1, 3, 10), 4, 2)
    with pytest.raises(ValueError, match="T: expected a positive int, got 0"):
        kv_cache_bytes(2, 2, 0, 8)
    with pytest.raises(TypeError, match="bytes_per_value: expected a positive int"):
        kv_cache_bytes(2, 2, 4, 8, bytes_per_value=2.5)
