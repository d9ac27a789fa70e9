"""Lesson 09's exercise: the feed-forward layer, with GELU written from its definition.

CONTRACT (fixed: lessons 11 and 14 and course_lib.mywork rely on it):
- feed_forward(x, lin1, lin2) -> x's shape and dtype: lin2(GELU(lin1(x))), GELU the exact one,
  x * Phi(x) with Phi(x) = (1 + erf(x / sqrt(2))) / 2, each position on its own. torch's own
  GELU (F.gelu, which nn.GELU calls) is the reference, so the check refuses a call to it.

Every wrong version below is a mistake a learner makes, written the way it comes out; a test
(tests/test_exercises_lesson09_feed_forward.py) writes each again as a learner would and checks
its hint.
"""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

from course_lib import feedforward
from course_lib.exercises.core import Bug, Case, Exercise
from course_lib.exercises.lesson08_transformer_block import aten_callables


def feed_forward_reference(x, lin1, lin2):
    return lin2(F.gelu(lin1(x)))  # (..., D) -> (..., d_ff) -> (..., D)


def _linear(n_in: int, n_out: int, g: torch.Generator, dtype=torch.float32) -> nn.Linear:
    """An nn.Linear with weights drawn from g (the global RNG is left alone), bias not zero."""
    layer = nn.Linear(n_in, n_out, dtype=dtype)
    with torch.no_grad():
        layer.weight.copy_(torch.randn(n_out, n_in, generator=g, dtype=dtype) / n_in**0.5)
        layer.bias.copy_(torch.randn(n_out, generator=g, dtype=dtype) * 0.5)
    return layer


def _cases() -> list[Case]:
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


def _with_bend(bend):
    """The feed-forward layer with `bend` in place of GELU."""
    return lambda x, lin1, lin2: lin2(bend(lin1(x)))


ROOT_HALF = 1 / math.sqrt(2.0)  # Phi(x) = (1 + erf(x / sqrt(2))) / 2


def _phi(z, scale=ROOT_HALF):
    return 0.5 * (1.0 + torch.erf(z * scale))


# the bugs write GELU out rather than call F.gelu: run as a learner's function (the core's
# tests do), a call to F.gelu would be refused before the bug could be recognised
def _gelu(z):
    return z * _phi(z)


ATEN_GELU = aten_callables("gelu", "gelu_")
_THIS = sys.modules[__name__]


def _gelu_tanh(z):
    """GELU's tanh approximation, as GPT-2 computes it."""
    return 0.5 * z * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (z + 0.044715 * z**3)))


FEED_FORWARD = Exercise(
    name="feed_forward",
    lesson="09_feed_forward",
    reference=feed_forward_reference,
    cases=_cases,
    idea="the contract of 'Exercise: the feed-forward layer', GELU's definition in it, and the "
    "token worked by hand below it",
    bugs=(
        Bug(
            "swapped",
            _if_shapes_fit(lambda x, lin1, lin2: lin1(_gelu(lin2(x)))),
            "your numbers differ when both layers are square",
            "the two layers run in the wrong order: lin1 widens each vector from D to d_ff, "
            "the GELU bends it, and lin2 brings it back to D. With square layers nothing "
            "complains; with d_ff != D the other order is a shape error.",
        ),
        Bug(
            "relu",
            _with_bend(F.relu),
            "your numbers differ most where lin1's outputs are negative",
            "the bend is ReLU, which is exactly 0 for every negative input; the layer bends "
            "with GELU, x times Phi(x), which lets a little of a negative input through.",
        ),
        Bug(
            "erf_without_sqrt2",
            _with_bend(lambda z: z * _phi(z, scale=1.0)),
            "your bend is too steep: your numbers are right at 0 and far from it, off in between",
            "erf integrates exp(-t^2), and the standard normal's density is exp(-t^2 / 2) "
            "(times a constant): the two curves differ in width, so x must be rescaled before "
            "erf sees it. Without that, the bend switches on too fast.",
        ),
        Bug(
            "no_half",
            _with_bend(lambda z: z * (1.0 + torch.erf(z / math.sqrt(2.0)))),
            "your hidden values are twice GELU's for large inputs",
            "Phi is a probability, running from 0 to 1; yours runs from 0 to 2 (erf itself runs "
            "from -1 to 1), so a large input comes out doubled.",
        ),
        Bug(
            "phi_only",
            _with_bend(_phi),
            "your hidden values all lie between 0 and 1",
            "you use Phi(x), the probability, as the bend. GELU is x times Phi(x): the input, "
            "let through as often as a standard normal falls below it.",
        ),
        Bug(
            "gelu_tanh",
            _with_bend(_gelu_tanh),
            "your numbers are off by a few parts in 10,000: more than rounding, less than a "
            "different function",
            "that is GELU's tanh approximation, which differs from the exact form by up to "
            "5e-4 per hidden unit. The course's block uses the exact form, x times Phi(x) "
            "written with the error function, and lesson 11a matches the trained model only "
            "with that one.",
        ),
        Bug(
            "sigmoid_gelu",
            _with_bend(lambda z: z * torch.sigmoid(1.702 * z)),
            "your numbers are off by a few hundredths",
            "that is the sigmoid approximation of GELU, x * sigmoid(1.702 x), off from the "
            "exact form by up to 0.02. Write Phi with the error function, torch.erf.",
        ),
        Bug(
            "extra_activation",
            lambda x, lin1, lin2: _gelu(lin2(_gelu(lin1(x)))),
            "your outputs are never below -0.17, so something bends them after the last layer",
            "you apply GELU after lin2 as well. The layer bends once, between its two linear "
            "layers; its output must be free to take any value, since it is added to the "
            "residual stream.",
        ),
        Bug(
            "no_activation",
            lambda x, lin1, lin2: lin2(lin1(x)),
            "your layer is linear: it has no bend between the two layers",
            "the GELU between lin1 and lin2 is missing. Without it the two layers collapse "
            "into a single linear map.",
        ),
        Bug(
            "residual_inside",
            lambda x, lin1, lin2: x + lin2(_gelu(lin1(x))),
            "your output is x plus the right answer",
            "you add the input x to the result. The residual addition belongs to the block "
            "(your prenorm_block of lesson 08 adds it), not to the layer: feed_forward "
            "returns only the update.",
        ),
        Bug(
            "no_bias",
            lambda x, lin1, lin2: _gelu(x @ lin1.weight.T) @ lin2.weight.T,
            "your numbers differ as if the layers had no bias",
            "you multiply by the layers' weights but leave out their biases. Calling a layer "
            "(lin1(x)) applies both, on the last axis, whatever the axes before it.",
        ),
        Bug(
            "weight_not_transposed",
            _if_shapes_fit(lambda x, l1, l2: _gelu(x @ l1.weight + l1.bias) @ l2.weight + l2.bias),
            "your numbers differ when both layers are square",
            "an nn.Linear stores its weight as (out_features, in_features), so x @ weight "
            "multiplies by the transpose of the layer's matrix. Calling the layer itself "
            "does it the right way round.",
        ),
    ),
    # F.gelu is the reference, and nn.GELU calls it: either would pass without GELU's formula,
    # as would torch.ops.aten's gelu, the course's own (feedforward.gelu, which the lesson's
    # explorer draws) and this module's, which the bugs are built on
    forbidden=(
        (F, "gelu"),
        *((ATEN_GELU, name) for name in vars(ATEN_GELU) if name != "__name__"),
        (feedforward, "gelu"),
        (_THIS, "_gelu"),
        (_THIS, "_phi"),
    ),
    forbidden_hint="The check compares with torch's GELU, so calling it (F.gelu, or nn.GELU, "
    "which calls it) proves nothing. Write GELU from its definition: x times Phi(x), Phi "
    "written with torch.erf.",
    hints=(
        "lin1 takes each token's vector from D to d_ff features, lin2 brings it back to D: an "
        "error that two shapes 'cannot be multiplied' means a layer was given a vector of "
        "the other width.",
        "nn.Linear works on the last axis of any tensor, so nothing needs reshaping: the layer "
        "is three steps, and only the middle one is yours to write.",
        "Check your Phi alone on the worked example's two numbers, Phi(1.0) = 0.84134 and "
        "Phi(-0.5) = 0.30854: if it is off, compare the exponent in erf's integral with the "
        "one in the normal density, and the ranges of the two functions.",
    ),
)

EXERCISES = (FEED_FORWARD,)
