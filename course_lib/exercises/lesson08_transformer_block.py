"""Lesson 08's exercises: the pre-norm block and layer norm.

CONTRACTS (fixed: lessons 11 and 14 and course_lib.mywork rely on them):
- prenorm_block(x, attn, ff, norm1, norm2) -> (B, T, D): h = x + attn(norm1(x)), then
  h + ff(norm2(h)); attn, ff, norm1, norm2 are callables (B, T, D) -> (B, T, D).
- layer_norm(x, weight, bias, eps=1e-5) -> x's shape: torch.nn.LayerNorm over the last axis.
"""

import sys
from functools import partial
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn

from course_lib import seq2seq
from course_lib.attention import causal_mask
from course_lib.block import TransformerBlock
from course_lib.exercises.core import Bug, Case, Exercise


def prenorm_block_reference(x, attn, ff, norm1, norm2):
    h = x + attn(norm1(x))  # (B, T, D)
    return h + ff(norm2(h))  # (B, T, D)


def layer_norm_reference(x, weight, bias, eps=1e-5):
    return F.layer_norm(x, x.shape[-1:], weight, bias, eps)


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


def torch_layer_parts(D: int, H: int, seed: int):
    """(layer, attn, ff, norm1, norm2): torch's own pre-norm block, an nn.TransformerEncoderLayer
    with norm_first=True (GELU, no dropout), and its four parts as one-argument callables, its
    norms' gains and biases random. The layer itself computes what prenorm_block must, by code
    of its own: tests/test_exercises_lesson08_transformer_block.py compares the two."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layer = nn.TransformerEncoderLayer(D, H, 4 * D, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True).eval()  # fmt: skip
        for norm in (layer.norm1, layer.norm2):
            nn.init.uniform_(norm.weight, 0.5, 1.5)
            nn.init.uniform_(norm.bias, -0.5, 0.5)
    attn = lambda h: layer.self_attn(h, h, h, need_weights=False)[0]  # noqa: E731
    ff = lambda h: layer.linear2(F.gelu(layer.linear1(h)))  # noqa: E731
    return layer, attn, ff, layer.norm1, layer.norm2


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
            (x(2, 6, 16), *torch_layer_parts(16, 4, seed=14)[1:]),
            label="the parts of torch's nn.TransformerEncoderLayer(norm_first=True)",
        ),
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
    lesson="08_transformer_block",
    reference=prenorm_block_reference,
    cases=_prenorm_block_cases,
    idea="'One block, two sub-layers': the post-norm diagram, and where pre-norm moves each "
    "norm (what each sub-layer reads, where each + takes its two inputs from)",
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
        "Start from the post-norm diagram and move each LayerNorm box from behind its + to the "
        "entrance of its sub-layer. Then ask, of each +, what its red path carries now.",
        "Trace the worked example's four functions through your block by hand, and compare "
        "with what the cell after the check prints for it.",
    ),
    # the course's block computes this very wiring from the same four parts
    forbidden=((TransformerBlock, "forward"), (seq2seq, "decoder_layer_reference")),
    forbidden_hint="The course's TransformerBlock computes this block, so running its forward "
    "on the parts proves nothing; nor does the course's decoder layer of lesson 05 "
    "(seq2seq.decoder_layer_reference), which makes both additions for you. Wire the four "
    "parts yourself.",
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
        # first, so that where eps goes shows at once: with eps far below the variance, eps
        # added to torch's .std() (which divides by D - 1) looks like the D - 1 alone
        Case(
            parts(4, 8, spread=1e-3),
            {"eps": 1e-5},
            label="features spread by 1e-3: their variance (about 2e-6) is below eps",
        ),
        Case(parts(2, 5, 8), label="a 3-D x (B, T, D), eps left at its default"),
        Case((*parts(3, 6), 1.0), label="a large eps, 1.0: where it enters the formula shows"),
        Case(parts(12), {"eps": 1e-3}, label="a 1-D x: one token's vector"),
        Case((*parts(2, 3, 4, 6), 0.1), label="a 4-D x: more leading dims than (B, T)"),
        Case(
            parts(5, 16, dtype=torch.float64),
            {"eps": 1e-4},
            label="float64 x, weight and bias: the result stays float64",
        ),
    ]


def _norm_variant(x, weight, bias, eps=1e-5, *, dims, unbiased, eps_at, centre, affine):
    """A layer norm with the settings each Bug below names, every one given: with the right
    ones it is a layer norm, so the exercise forbids it (a learner's call to it is refused)."""
    if dims == "features":  # every axis but the last: one mean per feature
        axes = tuple(range(x.dim() - 1)) or (-1,)  # a 1-D x has no tokens to pool over
    elif dims == "all":  # every axis: one mean for the whole tensor
        axes = tuple(range(x.dim()))
    else:
        axes = dims
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
    if affine == "swapped":
        return y * bias + weight
    return y * weight + bias


RIGHT = {"dims": (-1,), "unbiased": False, "eps_at": "inside", "centre": True, "affine": "scale"}


def _layer_norm_wrong(**change):
    """The layer norm with one or two settings changed (each Bug below names what); with no
    change it would be right, so one is required."""
    if not change:
        raise TypeError("_layer_norm_wrong: name the setting that is wrong")
    return partial(_norm_variant, **(RIGHT | change))


def aten_callables(*names: str) -> SimpleNamespace:
    """torch.ops.aten's operators `names`, every overload, as one namespace whose attributes
    are the callables a call reaches ("layer_norm", "layer_norm.default", ...), for an
    exercise's `forbidden` (lessons 08 and 09): a learner may reach torch's layer norm or GELU
    through torch.ops.aten as well as through torch.nn.functional."""
    found = {}
    for name in names:
        packet = getattr(torch.ops.aten, name)
        found[name] = packet._op
        for overload in packet.overloads():
            found[f"{name}.{overload}"] = getattr(packet, overload)._op
    return SimpleNamespace(__name__="torch.ops.aten", **found)


# every route to torch's normalisations: each standardises some axis, and a token's features
# can be made that axis (F.group_norm with one group over (N, 1, D), F.instance_norm, batch
# norm on the transposed tokens, RMS norm of the centred x)
NORM_OPS = ("layer_norm", "native_layer_norm", "group_norm", "native_group_norm",
            "instance_norm", "batch_norm", "native_batch_norm", "_native_batch_norm_legit",
            "_native_batch_norm_legit_no_training", "_batch_norm_impl_index", "rms_norm",
            "_fused_rms_norm")  # fmt: skip
ATEN_NORMS = aten_callables(*NORM_OPS)
_THIS = sys.modules[__name__]


LAYER_NORM = Exercise(
    name="layer_norm",
    lesson="08_transformer_block",
    reference=layer_norm_reference,
    cases=_layer_norm_cases,
    idea="'Layer norm, not batch norm' (which numbers each norm averages over) and batch "
    "norm's feature worked by hand in 'Exercise 2: layer norm'",
    bugs=(
        Bug(
            "unbiased",
            _layer_norm_wrong(unbiased=True),
            "your outputs are a little too small, by the same factor in every token",
            "the variance divides by D - 1, torch's default for .var() and .std(); layer "
            "norm's variance is the plain mean of the squared deviations, dividing by D.",
        ),
        Bug(
            "eps_outside",
            _layer_norm_wrong(eps_at="outside"),
            "your numbers are close where eps is small against the spread, and off where it is not",
            "eps is added to the standard deviation. It belongs inside the square root, added "
            "to the variance: sqrt(variance + eps).",
        ),
        Bug(
            "eps_outside_unbiased",
            _layer_norm_wrong(eps_at="outside", unbiased=True),
            "your numbers are off everywhere a little, and far off where the variance is tiny",
            "two things: eps is added to the standard deviation, where it belongs inside the "
            "square root (sqrt(variance + eps)), and the standard deviation divides by D - 1 "
            "(torch's default for .std()), where layer norm divides by D.",
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
            "all_axes",
            _layer_norm_wrong(dims="all"),
            "your tokens share one mean and one variance: the statistics cover the whole tensor",
            "you took the mean and the variance over every axis at once (.mean() or .var() "
            "with no dim): one pair of numbers for all tokens, so each token depends on the "
            "others. Layer norm takes them per token, over the last axis only.",
        ),
        Bug(
            "all_axes_unbiased",
            _layer_norm_wrong(dims="all", unbiased=True),
            "your tokens share one mean and one variance: the statistics cover the whole tensor",
            "you took the mean and the variance over every axis at once (.mean() and .var() or "
            ".std() with no dim, which also divide by N - 1): one pair of numbers for all "
            "tokens. Layer norm takes them per token, over the last axis only, dividing by D.",
        ),
        Bug(
            "no_affine",
            _layer_norm_wrong(affine="none"),
            "your normalisation is right, but weight and bias are never applied",
            "after normalising, scale by the learned weight and then add the learned bias.",
        ),
        Bug(
            "weight_bias_swapped",
            _layer_norm_wrong(affine="swapped"),
            "your normalisation is scaled by the bias and shifted by the weight",
            "weight and bias are swapped: the normalised token is multiplied by `weight` (the "
            "gain, starting at 1) and then `bias` is added (the shift, starting at 0).",
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
    # F.layer_norm is the reference: calling it (or nn.LayerNorm, which calls it), or any of
    # torch's other normalisations set to standardise each token, or the course's own layer
    # norm of the bugs below with the right settings, passes every case without the arithmetic
    forbidden=(
        (F, "layer_norm"),
        *((torch, name) for name in NORM_OPS if hasattr(torch, name)),
        *((ATEN_NORMS, name) for name in vars(ATEN_NORMS) if name != "__name__"),
        (_THIS, "_norm_variant"),
    ),
    forbidden_hint="The check compares with torch's layer_norm, so calling it (nn.LayerNorm, "
    "F.layer_norm, torch.ops.aten), or another of torch's or the course's norms set up to "
    "standardise each token, proves nothing. Build it from means and arithmetic, as the worked "
    "example does for batch norm.",
    hints=(
        "Each token's statistics come from its own D features: the last axis, whatever the "
        "number of axes before it, kept (keepdim) so they line up with x.",
        "Redo the worked example on one token of your own x, by hand or in a cell: the same "
        "steps in the same order, taken along a row instead of a column. Compare each step "
        "with your code's.",
    ),
)

EXERCISES = (PRENORM_BLOCK, LAYER_NORM)
