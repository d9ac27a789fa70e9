from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from torch.testing import assert_close

from course_lib.attention import causal_mask
from course_lib.multihead import MultiHeadAttention
from course_lib.positional import RotaryEmbedding
from helpers import assert_fused_path_matches_scratch


@pytest.mark.parametrize("d_model,heads,T", [(16, 1, 5), (16, 4, 7), (24, 3, 4), (32, 8, 9)])
@pytest.mark.parametrize("causal", [False, True])
def test_matches_torch_multihead_attention(d_model, heads, T, causal):
    mha = MultiHeadAttention(d_model, heads)
    ref = mha.to_torch()
    x = torch.randn(2, T, d_model)
    mask = causal_mask(T) if causal else None
    out, weights = mha(x, mask, return_weights=True)
    # torch's attn_mask is True where attending is NOT allowed: the opposite convention
    ref_out, ref_weights = ref(
        x, x, x, attn_mask=None if mask is None else ~mask, average_attn_weights=False
    )
    assert_close(out, ref_out)
    assert_close(weights, ref_weights)


@pytest.mark.parametrize("causal", [False, True])
def test_fused_path_agrees_with_from_scratch_path(causal):
    mha = MultiHeadAttention(32, 4, rope=RotaryEmbedding(8))
    x = torch.randn(3, 10, 32, requires_grad=True)
    assert_fused_path_matches_scratch(mha, x, causal_mask(10) if causal else None)


@pytest.mark.parametrize("heads", [1, 2, 4, 8, 16])
def test_parameter_count_does_not_depend_on_heads(heads):
    count = sum(p.numel() for p in MultiHeadAttention(64, heads).parameters())
    assert count == 4 * 64 * 64 + 4 * 64


@settings(max_examples=20, deadline=None)
@given(T=st.integers(2, 8), heads=st.sampled_from([1, 2, 4]), seed=st.integers(0, 1000))
def test_without_positions_permuting_tokens_permutes_outputs(T, heads, seed):
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    mha = MultiHeadAttention(8, heads)
    x = torch.randn(1, T, 8, generator=g)
    perm = torch.randperm(T, generator=g)
    assert_close(mha(x[:, perm]), mha(x)[:, perm], atol=1e-5, rtol=1e-4)


def test_rope_breaks_permutation_equivariance():
    mha = MultiHeadAttention(8, 2, rope=RotaryEmbedding(4))
    x = torch.randn(1, 6, 8)
    perm = torch.tensor([5, 4, 3, 2, 1, 0])
    assert (mha(x[:, perm]) - mha(x)[:, perm]).abs().max() > 1e-3


@pytest.mark.parametrize(
    "kwargs,error,message",
    [
        (
            {"d_model": 10, "num_heads": 3},
            ValueError,
            "num_heads: expected a divisor of d_model = 10, got 3",
        ),
        ({"d_model": 0, "num_heads": 1}, ValueError, "d_model: expected a positive int, got 0"),
        ({"d_model": 8, "num_heads": -2}, ValueError, "num_heads: expected a positive int, got -2"),
        ({"d_model": 8.0, "num_heads": 2}, TypeError, "d_model: expected a positive int"),
        (
            {"d_model": 8, "num_heads": 2, "rope": RotaryEmbedding(8)},
            ValueError,
            "rope: expected a RotaryEmbedding of width d_head = 4",
        ),
    ],
)
def test_bad_construction_is_named(kwargs, error, message):
    with pytest.raises(error, match=message):
        MultiHeadAttention(**kwargs)


def test_bad_forward_input_is_named():
    mha = MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match=r"x: expected shape \(B, T, 8\), got \(1, 3, 6\)"):
        mha(torch.randn(1, 3, 6))
    with pytest.raises(TypeError, match="mask: expected dtype torch.bool"):
        mha(torch.randn(1, 3, 8), torch.ones(3, 3))
    with pytest.raises(ValueError, match="query row 0"):
        mha(torch.randn(1, 3, 8), torch.zeros(3, 3, dtype=torch.bool))


@pytest.mark.parametrize("bias", [True, False])
def test_torch_twin_holds_the_same_weights_without_bias_and_in_float64(bias):
    mha = MultiHeadAttention(12, 3, bias=bias).double()
    twin = mha.to_torch()
    assert type(twin) is nn.MultiheadAttention and (twin.in_proj_bias is not None) == bias
    x = torch.randn(2, 5, 12, dtype=torch.float64)
    expected, _ = twin(x, x, x, need_weights=False)
    torch.testing.assert_close(mha(x), expected)
    with torch.no_grad():  # copies, not shared tensors
        twin.in_proj_weight.zero_()
    assert mha.qkv.weight.abs().sum() > 0


def test_torch_twin_refuses_rope():
    with pytest.raises(ValueError, match="rope: expected None"):
        MultiHeadAttention(16, 2, rope=RotaryEmbedding(8)).to_torch()


@pytest.mark.parametrize("fused", [True, False])
def test_without_the_scale_scores_are_plain_dot_products(fused):
    mha = MultiHeadAttention(16, 4, scale=False)
    mha.fused = fused
    x = torch.randn(2, 6, 16)
    mask = causal_mask(6)
    q, k, v = (
        t.view(2, 6, 4, 4).transpose(1, 2) for t in mha.qkv(x).split(16, dim=-1)
    )  # each (B, H, T, d)
    y = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1.0)
    expected = mha.out(y.transpose(1, 2).reshape(2, 6, 16))
    torch.testing.assert_close(mha(x, mask), expected)
    scaled = MultiHeadAttention(16, 4)
    scaled.load_state_dict(mha.state_dict())
    assert not torch.allclose(scaled(x, mask), expected, atol=1e-3)


def test_scale_must_be_a_bool_and_torch_has_no_unscaled_twin():
    with pytest.raises(TypeError, match="scale: expected True or False, got float 0.5"):
        MultiHeadAttention(16, 4, scale=0.5)
    with pytest.raises(ValueError, match="scale: expected True"):
        MultiHeadAttention(16, 4, scale=False).to_torch()


def test_qkv_heads_is_the_one_split_forward_and_the_ablation_use():
    mha = MultiHeadAttention(16, 2, rope=RotaryEmbedding(8))
    x = torch.randn(2, 5, 16)
    q, k, v = mha.qkv_heads(x)  # each (B, H, T, d)
    by_hand = mha.qkv(x).view(2, 5, 3, 2, 8).permute(2, 0, 3, 1, 4)  # (3, B, H, T, d)
    assert torch.equal(q, mha.rope(by_hand[0])) and torch.equal(k, mha.rope(by_hand[1]))
    assert torch.equal(v, by_hand[2])
    assert not hasattr(MultiHeadAttention, "split_heads")  # the dead copy stays deleted
    # the split is written once in the package: the ablation's "mean" knock-out calls qkv_heads
    package = Path(__file__).resolve().parent.parent / "course_lib"
    holders = [p.name for p in package.rglob("*.py") if ".permute(2, 0, 3, 1, 4)" in p.read_text()]
    assert holders == ["multihead.py"], holders
