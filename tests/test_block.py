import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from torch.testing import assert_close

from course_lib.attention import causal_mask
from course_lib.block import TransformerBlock
from course_lib.positional import RotaryEmbedding


@settings(max_examples=25, deadline=None)
@given(
    heads=st.sampled_from([1, 2, 4]),
    B=st.integers(1, 3),
    T=st.integers(1, 8),
    norm=st.sampled_from(["layer", "batch", "none"]),
    prenorm=st.booleans(),
    residual=st.booleans(),
)
def test_output_shape_equals_input_shape(heads, B, T, norm, prenorm, residual):
    block = TransformerBlock(8, heads, 16, norm=norm, prenorm=prenorm, residual=residual)
    x = torch.randn(B, T, 8)
    if norm == "batch" and B * T == 1:
        with pytest.raises(ValueError, match="x: batch norm in training mode needs at least 2"):
            block(x)
        block.eval()
    assert block(x).shape == x.shape


def test_prenorm_block_is_the_two_residual_formula():
    block = TransformerBlock(16, 4, 32).eval()
    x = torch.randn(2, 5, 16)
    mask = causal_mask(5)
    h = x + block.attn(block.norm1(x), mask)
    expected = h + block.ff(block.norm2(h))
    assert_close(block(x, mask), expected)
    assert isinstance(block.norm1, nn.LayerNorm)
    assert [type(m) for m in block.ff] == [nn.Linear, nn.GELU, nn.Linear]


def test_postnorm_and_no_residual_variants():
    block = TransformerBlock(16, 2, 32, prenorm=False).eval()
    x = torch.randn(1, 4, 16)
    h = block.norm1(x + block.attn(x))
    assert_close(block(x), block.norm2(h + block.ff(h)))
    plain = TransformerBlock(16, 2, 32, residual=False).eval()
    h = plain.attn(plain.norm1(x))
    assert_close(plain(x), plain.ff(plain.norm2(h)))


def test_causal_block_ignores_future_tokens():
    block = TransformerBlock(16, 4, 32, rope=RotaryEmbedding(4)).eval()
    x = torch.randn(1, 6, 16)
    y = x.clone()
    y[:, 4:] = torch.randn(1, 2, 16)
    mask = causal_mask(6)
    assert_close(block(x, mask)[:, :4], block(y, mask)[:, :4])


def test_return_weights_gives_per_head_maps():
    block = TransformerBlock(16, 4, 32)
    out, weights = block(torch.randn(2, 5, 16), return_weights=True)
    assert out.shape == (2, 5, 16) and weights.shape == (2, 4, 5, 5)


@pytest.mark.parametrize(
    "kwargs,error,message",
    [
        (
            {"norm": "group"},
            ValueError,
            r"norm: expected one of \('layer', 'batch', 'none', 'rms'\), got 'group'",
        ),
        ({"d_ff": -1}, ValueError, "d_ff: expected an int >= 0 .0: no feed-forward layer., got -1"),
        ({"d_ff": 2.5}, TypeError, "d_ff: expected an int >= 0, got float 2.5"),
        ({"dropout": 1.5}, ValueError, "dropout: expected a probability"),
        ({"num_heads": 3}, ValueError, "num_heads: expected a divisor of d_model = 8"),
    ],
)
def test_bad_construction_is_named(kwargs, error, message):
    args = {"d_model": 8, "num_heads": 2, "d_ff": 16} | kwargs
    with pytest.raises(error, match=message):
        TransformerBlock(**args)


def test_a_block_without_feed_forward_layer_is_attention_and_its_residual():
    torch.manual_seed(0)
    block = TransformerBlock(8, 2, 0).eval()
    x = torch.randn(2, 5, 8)
    mask = torch.tril(torch.ones(5, 5, dtype=torch.bool))
    assert sum(p.numel() for p in block.ff.parameters()) == 0
    torch.testing.assert_close(block(x, mask), x + block.attn(block.norm1(x), mask))


def test_a_block_without_residuals_keeps_only_the_updates():
    torch.manual_seed(0)
    block = TransformerBlock(8, 2, 16, residual=False).eval()
    x = torch.randn(2, 5, 8)
    a = block.attn(block.norm1(x))
    torch.testing.assert_close(block(x), block.ff(block.norm2(a)))
