"""course_lib.feedforward (lesson 09): GELU and ReLU by hand, the feed-forward layer works on
each token alone, without_feedforward takes one out, and bad input is named. References are
torch's own functions and autograd, and a trained model's forward pass written out by hand."""

import pytest
import torch
import torch.nn.functional as F

from course_lib.attention import causal_mask
from course_lib.block import TransformerBlock
from course_lib.feedforward import (
    activation,
    feedforward_parameters,
    gelu,
    gelu_slope,
    relu,
    relu_slope,
    sublayer_changes,
    token_by_token,
    without_feedforward,
)
from course_lib.variants import load_trained

XS = torch.linspace(-6.0, 6.0, 241, dtype=torch.float64)


def autograd_slope(fn, x):
    x = x.clone().requires_grad_(True)
    (slope,) = torch.autograd.grad(fn(x).sum(), x)
    return slope


# ---------------------------------------------------------------- GELU and ReLU


def test_gelu_is_torchs_exact_gelu_and_its_slope_is_autograds():
    torch.testing.assert_close(gelu(XS), F.gelu(XS))
    torch.testing.assert_close(gelu(XS.float()), torch.nn.GELU()(XS.float()))
    torch.testing.assert_close(gelu_slope(XS), autograd_slope(F.gelu, XS))
    # the tanh approximation is a different curve (by up to ~5e-4): ours is the exact one
    assert (gelu(XS) - F.gelu(XS, approximate="tanh")).abs().max() > 1e-4


def test_relu_and_its_slope_are_torchs():
    torch.testing.assert_close(relu(XS), F.relu(XS))
    torch.testing.assert_close(relu_slope(XS), autograd_slope(F.relu, XS))
    assert relu_slope(torch.zeros(1)).item() == 0.0  # torch's choice at the kink too


def test_gelu_facts_the_lesson_states():
    x = torch.linspace(-4.0, 4.0, 8001, dtype=torch.float64)
    value, slope = activation("GELU", x)
    assert value.min() == pytest.approx(-0.170, abs=1e-3)  # its dip below zero
    assert x[value.argmin()] == pytest.approx(-0.752, abs=1e-3)
    assert gelu_slope(torch.zeros(1)).item() == pytest.approx(0.5)
    assert (slope[x < 0] != 0).all()  # unlike ReLU, every negative input still passes a slope
    assert slope.max() == pytest.approx(1.129, abs=1e-3)  # slopes a bit steeper than 1


def test_activation_picks_by_name_and_names_bad_input():
    x = torch.randn(5)
    torch.testing.assert_close(activation("ReLU", x)[0], F.relu(x))
    with pytest.raises(ValueError, match=r"name: expected one of \('GELU', 'ReLU'\), got 'tanh'"):
        activation("tanh", x)
    with pytest.raises(TypeError, match="x: expected a floating-point tensor, got dtype torch.int"):
        gelu(torch.arange(3))
    with pytest.raises(TypeError, match="x: expected a floating-point tensor, got list"):
        relu_slope([1.0, 2.0])


# ---------------------------------------------------------------- the sub-layer


def independent_ff(ff, x):
    """Linear, GELU, Linear written with torch.nn.functional from the layer's raw weights."""
    first, _, second = ff
    return F.linear(F.gelu(F.linear(x, first.weight, first.bias)), second.weight, second.bias)


def test_the_blocks_feed_forward_is_linear_gelu_linear():
    block = TransformerBlock(16, 2, 64)
    x = torch.randn(3, 5, 16)
    torch.testing.assert_close(block.ff(x), independent_ff(block.ff, x))
    trained = load_trained("base", 0).blocks[1].ff
    x = torch.randn(2, 7, 64)
    torch.testing.assert_close(trained(x), independent_ff(trained, x))
    count = sum(p.numel() for p in block.ff.parameters())
    assert feedforward_parameters(16, 64) == count == 2 * 16 * 64 + 64 + 16


def test_token_by_token_equals_the_whole_sequence_at_once():
    block = TransformerBlock(16, 2, 64)
    x = torch.randn(3, 5, 16)
    by_hand = torch.stack(
        [torch.stack([independent_ff(block.ff, x[b, t]) for t in range(5)]) for b in range(3)]
    )
    torch.testing.assert_close(token_by_token(block.ff, x), by_hand)
    torch.testing.assert_close(token_by_token(block.ff, x), block.ff(x))


@pytest.mark.parametrize("changed_at", [0, 3])
def test_changing_one_token_moves_attention_everywhere_after_it_and_feed_forward_only_there(
    changed_at,
):
    block = load_trained("base", 0).blocks[0]
    g = torch.Generator().manual_seed(changed_at)
    x = torch.randn(2, 8, 64, generator=g)
    changed = x.clone()
    changed[:, changed_at] = torch.randn(2, 64, generator=g)
    moved = sublayer_changes(block, x, changed, causal_mask(8))
    # the reference: each sub-layer run by hand on both inputs
    with torch.no_grad():
        ff_ref = (independent_ff(block.ff, block.norm2(changed)) - independent_ff(
            block.ff, block.norm2(x))).abs().amax(-1)  # fmt: skip
    torch.testing.assert_close(moved["feed-forward"], ff_ref)
    others = [t for t in range(8) if t != changed_at]
    assert (moved["feed-forward"][:, others] == 0).all()  # exactly: same input, same output
    assert (moved["feed-forward"][:, changed_at] > 0.05).all()
    # causal attention: positions before the change cannot see it, those after it do
    assert (moved["attention"][:, :changed_at] == 0).all()
    assert (moved["attention"][:, changed_at:] > 1e-3).all()


def test_sublayer_changes_names_bad_input():
    block = TransformerBlock(16, 2, 64)
    x = torch.randn(1, 4, 16)
    with pytest.raises(ValueError, match=r"changed: expected the shape of x \(1, 4, 16\), got"):
        sublayer_changes(block, x, torch.randn(1, 5, 16))
    with pytest.raises(TypeError, match="x: expected a floating-point tensor"):
        sublayer_changes(block, torch.ones(1, 4, 16, dtype=torch.long), x)
    with pytest.raises(ValueError, match="x: expected at least 3 dimensions"):
        token_by_token(block.ff, torch.randn(4, 16))


# ---------------------------------------------------------------- taking one out


def forward_by_hand(model, ids, removed=None):
    """Logits of a trained base model, block by block, the feed-forward layer of block
    `removed` left out (its RoPE is inside attention; no positions are added to the stream)."""
    x = model.embed(ids)  # (B, T, D)
    mask = causal_mask(ids.shape[1])
    for layer, block in enumerate(model.blocks):
        x = x + block.attn(block.norm1(x), mask)
        if layer != removed:
            x = x + independent_ff(block.ff, block.norm2(x))
    return model.head(model.norm(x))  # (B, T, V)


@pytest.mark.parametrize("removed", [0, 1])
def test_without_feedforward_is_the_model_with_that_layer_left_out(removed):
    model = load_trained("base", 0)
    ids = torch.randint(
        model.config.vocab_size, (2, 12), generator=torch.Generator().manual_seed(3)
    )
    with torch.no_grad():
        with without_feedforward(model, removed):
            got = model(ids)
        torch.testing.assert_close(got, forward_by_hand(model, ids, removed))
        torch.testing.assert_close(model(ids), forward_by_hand(model, ids))  # given back whole
    assert not any(m._forward_hooks for m in model.modules())
    with pytest.raises(ValueError, match=r"layer: expected an int in 0\.\.1 for this model, got 2"):
        with without_feedforward(model, 2):
            pass
