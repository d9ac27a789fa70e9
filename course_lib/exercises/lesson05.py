"""Lesson 05's exercises: the feed-forward sub-layer, the pre-norm block, layer norm.

CONTRACTS (fixed: lesson 06 and course_lib.mywork rely on them):
- feed_forward(x, lin1, lin2) -> x's shape: lin2(GELU(lin1(x))), GELU the exact (erf) one,
  each position on its own.
- prenorm_block(x, attn, ff, norm1, norm2) -> (B, T, D): h = x + attn(norm1(x)), then
  h + ff(norm2(h)); attn, ff, norm1, norm2 are callables (B, T, D) -> (B, T, D).
- layer_norm(x, weight, bias, eps=1e-5) -> x's shape: torch.nn.LayerNorm over the last axis.
"""

import torch
import torch.nn.functional as F
from torch import nn

from course_lib.attention import causal_mask
from course_lib.block import TransformerBlock
from course_lib.exercises.core import Bug, Case, Exercise


def feed_forward_reference(x, lin1, lin2):
    return lin2(F.gelu(lin1(x)))  # (..., D) -> (..., d_ff) -> (..., D)


def prenorm_block_reference(x, attn, ff, norm1, norm2):
    h = x + attn(norm1(x))  # (B, T, D)
    return h + ff(norm2(h))  # (B, T, D)


def layer_norm_reference(x, weight, bias, eps=1e-5):
    return F.layer_norm(x, x.shape[-1:], weight, bias, eps)


# ---------------------------------------------------------------- feed_forward


def _linear(n_in: int, n_out: int, g: torch.Generator, dtype=torch.float32) -> nn.Linear:
    """An nn.Linear with weights drawn from g (the global RNG is left alone), bias not zero."""
    layer = nn.Linear(n_in, n_out, dtype=dtype)
    with torch.no_grad():
        layer.weight.copy_(torch.randn(n_out, n_in, generator=g, dtype=dtype) / n_in**0.5)
        layer.bias.copy_(torch.randn(n_out, generator=g, dtype=dtype) * 0.5)
    return layer


def _feed_forward_cases() -> list[Case]:
    g = torch.Generator().manual_seed(0)

    def case(shape, d_ff, label, dtype=torch.float32):
        D = shape[-1]
        # inputs spread so the hidden layer's inputs reach +-3, where GELU's exact and tanh
        # forms differ most (by up to 5e-4)
        x = torch.randn(*shape, generator=g, dtype=dtype) * 2
        return Case((x, _linear(D, d_ff, g, dtype), _linear(d_ff, D, g, dtype)), label=label)

    return [
        # first, so that taking the layers in the other order shows as wrong numbers, not
        # as a shape error
        case(
            (2, 5, 8), 8, "lin1 and lin2 both square (D = d_ff = 8): no shape error tells the order"
        ),
        case((2, 6, 16), 64, "a 3-D x (B, T, D), d_ff = 4D"),
        case((5, 16), 32, "a 2-D x (T, D)"),
        case((16,), 48, "a 1-D x: one token's vector"),
        case((2, 3, 4, 8), 32, "a 4-D x: more leading dims than (B, T)"),
        case((3, 4, 8), 32, "float64 x and layers: the result stays float64", torch.float64),
    ]


def _if_shapes_fit(wrong):
    """A mistake that only runs when lin1 and lin2 are square; on other cases it returns the
    right answer, so it is never matched there (a checker must not fail on its own bug)."""

    def guarded(x, lin1, lin2):
        if lin1.in_features != lin1.out_features:
            return feed_forward_reference(x, lin1, lin2)
        return wrong(x, lin1, lin2)

    return guarded


FEED_FORWARD = Exercise(
    name="feed_forward",
    lesson="05_transformer_block",
    reference=feed_forward_reference,
    cases=_feed_forward_cases,
    idea="the feed-forward sub-layer's contract and the example worked by hand below it "
    "(section 'Assembling one block'), and 'GELU or ReLU: the bend in the middle' for GELU "
    "itself",
    bugs=(
        Bug(
            "swapped",
            _if_shapes_fit(lambda x, lin1, lin2: lin1(F.gelu(lin2(x)))),
            "your numbers differ when both layers are square",
            "the two layers run in the wrong order: lin1 widens each vector from D to d_ff, "
            "the GELU bends it, and lin2 brings it back to D. With square layers nothing "
            "complains; with d_ff != D the other order is a shape error.",
        ),
        Bug(
            "relu",
            lambda x, lin1, lin2: lin2(F.relu(lin1(x))),
            "your numbers differ most where lin1's outputs are negative",
            "the bend is ReLU, which is exactly 0 for every negative input; the course's "
            "block bends with GELU, x times the standard normal's cumulative probability.",
        ),
        Bug(
            "gelu_tanh",
            lambda x, lin1, lin2: lin2(F.gelu(lin1(x), approximate="tanh")),
            "your numbers are off by a few parts in 10,000: more than rounding, less than a "
            "different function",
            "that is GELU's tanh approximation, which differs from the exact form by up to "
            "5e-4 per hidden unit. The course's block (nn.GELU() with its default) uses the "
            "exact form, x times Phi(x) written with the error function, and lesson 06 "
            "matches the trained model only with that one.",
        ),
        Bug(
            "sigmoid_gelu",
            lambda x, lin1, lin2: lin2(lin1(x) * torch.sigmoid(1.702 * lin1(x))),
            "your numbers are off by a few hundredths",
            "that is the sigmoid approximation of GELU, x * sigmoid(1.702 x), off from the "
            "exact form by up to 0.02. The block uses the exact GELU, written with the error "
            "function.",
        ),
        Bug(
            "extra_activation",
            lambda x, lin1, lin2: F.gelu(lin2(F.gelu(lin1(x)))),
            "your outputs are never below -0.17, so something bends them after the last layer",
            "you apply GELU after lin2 as well. The sub-layer bends once, between the two "
            "layers; its output must be free to take any value, since it is added to the "
            "residual stream.",
        ),
        Bug(
            "no_activation",
            lambda x, lin1, lin2: lin2(lin1(x)),
            "your sub-layer is linear: it has no bend between the two layers",
            "the GELU between lin1 and lin2 is missing. Without it the two layers collapse "
            "into a single linear map.",
        ),
        Bug(
            "residual_inside",
            lambda x, lin1, lin2: x + lin2(F.gelu(lin1(x))),
            "your output is x plus the right answer",
            "you add the input x to the result. The residual addition belongs to the block "
            "(prenorm_block adds it), not to the sub-layer: feed_forward returns only the "
            "update.",
        ),
        Bug(
            "no_bias",
            lambda x, lin1, lin2: F.gelu(x @ lin1.weight.T) @ lin2.weight.T,
            "your numbers differ as if the layers had no bias",
            "you multiply by the layers' weights but leave out their biases. Calling a layer "
            "(lin1(x)) applies both, on the last axis, whatever the axes before it.",
        ),
        Bug(
            "weight_not_transposed",
            _if_shapes_fit(lambda x, l1, l2: F.gelu(x @ l1.weight + l1.bias) @ l2.weight + l2.bias),
            "your numbers differ when both layers are square",
            "an nn.Linear stores its weight as (out_features, in_features), so x @ weight "
            "multiplies by the transpose of the layer's matrix. Calling the layer itself "
            "does it the right way round.",
        ),
    ),
    hints=(
        "lin1 takes each token's vector from D to d_ff features, lin2 brings it back to D: an "
        "error that two shapes 'cannot be multiplied' means a layer was given a vector of "
        "the other width.",
        "nn.Linear works on the last axis of any tensor, so nothing needs reshaping: the "
        "sub-layer is three calls, the layer, the exact GELU, the layer.",
    ),
)


# ---------------------------------------------------------------- prenorm_block


def _block_parts(D: int, H: int, seed: int, dtype=torch.float32):
    """(attn, ff, norm1, norm2) of a TransformerBlock whose two norms have distinct random
    gains and biases, so swapping them or using one twice changes the numbers."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        block = TransformerBlock(D, H, 4 * D).eval().to(dtype)
        for norm in (block.norm1, block.norm2):
            nn.init.uniform_(norm.weight, 0.5, 1.5)
            nn.init.uniform_(norm.bias, -0.5, 0.5)
    return block.attn, block.ff, block.norm1, block.norm2


def _prenorm_block_cases() -> list[Case]:
    g = torch.Generator().manual_seed(1)

    def x(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=g, dtype=dtype) * 2 + 1  # off-centre: norms matter

    attn, ff, norm1, norm2 = _block_parts(8, 2, seed=11)
    mask = causal_mask(7)  # (T, T)
    return [
        Case((x(2, 5, 16), *_block_parts(16, 4, seed=10)), label="the parts of a TransformerBlock"),
        Case(
            (x(1, 7, 8), lambda h: attn(h, mask), ff, norm1, norm2),
            label="attn a plain function (attention under a causal mask), not a module",
        ),
        Case((x(3, 1, 32), *_block_parts(32, 4, seed=12)), label="a single token per sequence"),
        Case(
            (x(2, 4, 16, dtype=torch.float64), *_block_parts(16, 2, 13, torch.float64)),
            label="float64 x and parts: the result stays float64",
        ),
    ]


def _postnorm(x, attn, ff, norm1, norm2):
    h = norm1(x + attn(x))
    return norm2(h + ff(h))


def _residual_from_normed(x, attn, ff, norm1, norm2):
    a = norm1(x)
    h = a + attn(a)
    b = norm2(h)
    return b + ff(b)


PRENORM_BLOCK = Exercise(
    name="prenorm_block",
    lesson="05_transformer_block",
    reference=prenorm_block_reference,
    cases=_prenorm_block_cases,
    idea="the pre-norm diagram in 'How the block is wired' (what each sub-layer reads, where "
    "each + takes its two inputs from) and the post-norm block written out below it",
    bugs=(
        Bug(
            "postnorm",
            _postnorm,
            "your block gives the post-norm block's output",
            "you normalise after each addition, norm(x + sublayer(x)): that is the 2017 order. "
            "In the pre-norm block each sub-layer reads a normalised copy of the stream, and "
            "its output is added to the stream as it was, un-normalised.",
        ),
        Bug(
            "no_residual",
            lambda x, attn, ff, norm1, norm2: ff(norm2(attn(norm1(x)))),
            "your block's output does not contain its input: the additions are missing",
            "neither sub-layer's output is added to the stream. Each sub-layer computes an "
            "update, and the block adds it to the stream it read from.",
        ),
        Bug(
            "residual_from_normed",
            _residual_from_normed,
            "your residual path carries normalised numbers",
            "you add each sub-layer's output to the normalised copy. The residual path (red in "
            "the diagram) carries the stream around the norm untouched: the update is added to "
            "the un-normalised x, and then to the un-normalised h.",
        ),
        Bug(
            "same_norm",
            lambda x, attn, ff, norm1, norm2: (h := x + attn(norm1(x))) + ff(norm1(h)),
            "your feed-forward sub-layer reads the wrong norm",
            "norm1 is used twice. Each sub-layer has its own norm with its own learned gain and "
            "bias: the feed-forward sub-layer reads through norm2.",
        ),
        Bug(
            "norms_swapped",
            lambda x, attn, ff, norm1, norm2: (h := x + attn(norm2(x))) + ff(norm1(h)),
            "your two norms are swapped",
            "attention reads through norm2 and the feed-forward sub-layer through norm1. norm1 "
            "belongs to the first sub-layer, attention; norm2 to the second.",
        ),
        Bug(
            "ff_sees_x",
            lambda x, attn, ff, norm1, norm2: x + attn(norm1(x)) + ff(norm2(x)),
            "your feed-forward sub-layer does not see attention's result",
            "the feed-forward sub-layer reads the block's input x, so the two sub-layers run "
            "side by side. In the block they run one after the other: the second reads the "
            "stream after the first one's addition.",
        ),
        Bug(
            "one_residual",
            lambda x, attn, ff, norm1, norm2: x + ff(norm2(attn(norm1(x)))),
            "your block adds its input back only once",
            "one addition wraps both sub-layers. Each sub-layer has its own: attention's update "
            "is added to the stream first, and the feed-forward sub-layer reads that sum.",
        ),
    ),
    hints=(
        "Follow the diagram from left to right: each box is one call, each + is one addition "
        "whose second input comes down the red path, from before the norm.",
    ),
)


# ---------------------------------------------------------------- layer_norm


def _layer_norm_cases() -> list[Case]:
    g = torch.Generator().manual_seed(2)

    def parts(*shape, spread=3.0, dtype=torch.float32):
        D = shape[-1]
        # off-centre and unevenly scaled features, as in the lesson's batch
        x = torch.randn(*shape, generator=g, dtype=dtype) * spread
        x = x + torch.randn(D, generator=g, dtype=dtype) * spread
        weight = torch.randn(D, generator=g, dtype=dtype) * 0.5 + 1
        bias = torch.randn(D, generator=g, dtype=dtype) * 0.5
        return x, weight, bias

    return [
        Case(parts(2, 5, 8), label="a 3-D x (B, T, D), eps left at its default"),
        Case(
            parts(4, 8, spread=1e-3),
            {"eps": 1e-5},
            label="features spread by 1e-3: their variance (about 2e-6) is below eps",
        ),
        Case((*parts(3, 6), 1.0), label="a large eps, 1.0: where it enters the formula shows"),
        Case(parts(12), {"eps": 1e-3}, label="a 1-D x: one token's vector"),
        Case((*parts(2, 3, 4, 6), 0.1), label="a 4-D x: more leading dims than (B, T)"),
        Case(
            parts(5, 16, dtype=torch.float64),
            {"eps": 1e-4},
            label="float64 x, weight and bias: the result stays float64",
        ),
    ]


def _layer_norm_wrong(*, dims=(-1,), unbiased=False, eps_at="inside", centre=True, affine="scale"):
    """A layer norm with one thing changed (each Bug below names what)."""

    def wrong(x, weight, bias, eps=1e-5):
        axes = tuple(range(x.dim() - 1)) if dims == "features" else dims
        if not axes:  # a 1-D x has no tokens to pool over: the mistake cannot show
            axes = (-1,)
        mean = x.mean(dim=axes, keepdim=True)
        var = x.var(dim=axes, keepdim=True, unbiased=unbiased)
        top = x - mean if centre else x
        if eps_at == "outside":
            y = top / (var.sqrt() + eps)
        elif eps_at == "fixed":
            y = top / torch.sqrt(var + 1e-5)
        elif eps_at == "none":
            y = top / var.sqrt()
        else:
            y = top / torch.sqrt(var + eps)
        if affine == "none":
            return y
        if affine == "shift_first":
            return (y + bias) * weight
        return y * weight + bias

    return wrong


LAYER_NORM = Exercise(
    name="layer_norm",
    lesson="05_transformer_block",
    reference=layer_norm_reference,
    cases=_layer_norm_cases,
    idea="'Layer norm, not batch norm' (which numbers each norm averages over) and the RMS "
    "norm written out above the exercise",
    bugs=(
        Bug(
            "unbiased",
            _layer_norm_wrong(unbiased=True),
            "your outputs are a little too small, by the same factor in every token",
            "the variance divides by D - 1, torch's default for .var(); layer norm's variance "
            "is the plain mean of the squared deviations, dividing by D.",
        ),
        Bug(
            "eps_outside",
            _layer_norm_wrong(eps_at="outside"),
            "your numbers are close where eps is small against the spread, and off where it is not",
            "eps is added to the standard deviation. It belongs inside the square root, added "
            "to the variance.",
        ),
        Bug(
            "eps_fixed",
            _layer_norm_wrong(eps_at="fixed"),
            "your numbers are right for eps = 1e-5 and wrong for other values of eps",
            "your function does not use its eps argument: it always adds 1e-5.",
        ),
        Bug(
            "no_eps",
            _layer_norm_wrong(eps_at="none"),
            "your numbers are off where the variance is tiny",
            "no eps is added. It keeps the division safe when a token's features are all "
            "nearly equal, and it changes the result wherever the variance is not much larger "
            "than eps.",
        ),
        Bug(
            "per_feature",
            _layer_norm_wrong(dims="features"),
            "your statistics are taken per feature, across the tokens",
            "you averaged each feature over every token: that is batch norm. Layer norm takes "
            "each token's mean and variance over its own D features.",
        ),
        Bug(
            "no_affine",
            _layer_norm_wrong(affine="none"),
            "your normalisation is right, but weight and bias are never applied",
            "after normalising, scale by the learned weight and then add the learned bias.",
        ),
        Bug(
            "shift_first",
            _layer_norm_wrong(affine="shift_first"),
            "your weight and bias are applied in the wrong order",
            "you add the bias and then scale, so the bias is scaled too: scale first, then shift.",
        ),
        Bug(
            "no_centre",
            _layer_norm_wrong(centre=False),
            "your tokens do not come out with mean 0 before the bias",
            "you divide by the standard deviation without subtracting each token's mean first.",
        ),
    ),
    hints=(
        "Each token's statistics come from its own D features: the last axis, whatever the "
        "number of axes before it, kept (keepdim) so they line up with x.",
        "The result is (x - mean) / sqrt(variance + eps), scaled by weight, then shifted by bias.",
    ),
)

EXERCISES = (FEED_FORWARD, PRENORM_BLOCK, LAYER_NORM)
