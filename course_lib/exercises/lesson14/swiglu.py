"""Lesson 14's swiglu exercise: the feed-forward layer of Llama-style models."""

import torch
import torch.nn.functional as F
from torch import nn

from course_lib.exercises.core import Bug, Case, Exercise


def swiglu_reference(x, gate, up, down):
    """Written with torch's GLU instead of SiLU: glu([a, b]) = a * sigmoid(b), so
    glu([gate * up, gate]) = gate * sigmoid(gate) * up = silu(gate) * up (lesson 14)."""
    g, u = gate(x), up(x)  # (..., h) each
    return down(F.glu(torch.cat([g * u, g], dim=-1), dim=-1))  # (..., 2h) -> (..., h) -> (..., D)


def _linear(n_in, n_out, g, bias, dtype):
    """An nn.Linear with weights drawn from g (the global RNG is left alone)."""
    with torch.random.fork_rng(devices=[]):
        layer = nn.Linear(n_in, n_out, bias=bias, dtype=dtype)
    with torch.no_grad():
        layer.weight.copy_(torch.randn(n_out, n_in, generator=g, dtype=dtype) / n_in**0.5)
        if bias:
            layer.bias.copy_(torch.randn(n_out, generator=g, dtype=dtype) * 0.5)
    return layer


def _swiglu_cases() -> list[Case]:
    g = torch.Generator().manual_seed(15)

    def case(shape, h, label, bias=False, dtype=torch.float32):
        D = shape[-1]
        # spread so the gate's inputs reach +-3, where SiLU, GELU and sigmoid differ most
        x = torch.randn(*shape, generator=g, dtype=dtype) * 2
        layers = [_linear(D, h, g, bias, dtype), _linear(D, h, g, bias, dtype),
                  _linear(h, D, g, bias, dtype)]  # fmt: skip
        return Case((x, *layers), label=label)

    return [
        case((2, 5, 16), 24, "a 3-D x (B, T, D), bias-free layers as in Llama, h = 24"),
        case((6, 8), 12, "a 2-D x (T, D)"),
        case((16,), 40, "a 1-D x: one token's vector"),
        case((2, 3, 8), 16, "gate, up and down with biases: call the layers", bias=True),
        case((3, 4, 8), 20, "float64 x and layers: the result stays float64", dtype=torch.float64),
    ]


def _with(hidden):
    """A wrong version whose hidden layer is hidden(gate(x), up(x))."""
    return lambda x, gate, up, down: down(hidden(gate(x), up(x)))


SWIGLU = Exercise(
    name="swiglu",
    lesson="14_todays_block",
    reference=swiglu_reference,
    cases=_swiglu_cases,
    idea="the section 'SwiGLU: a gate on the feed-forward layer' and exercise 2's text",
    bugs=(
        Bug(
            "gelu",
            _with(lambda a, b: F.gelu(a) * b),
            "your numbers are close, but off most where the gate's inputs are near 1 or -1",
            "the gate goes through GELU; SwiGLU's goes through SiLU, z * sigmoid(z). The two "
            "curves look alike, but SiLU lies below GELU for positive z and dips deeper for "
            "negative z.",
        ),
        Bug(
            "sigmoid",
            _with(lambda a, b: torch.sigmoid(a) * b),
            "your gate never lets more than all of up(x) through: it stays between 0 and 1",
            "the gate is sigmoid(gate(x)), which is the original GLU. SwiGLU's gate is "
            "SiLU: gate(x) * sigmoid(gate(x)).",
        ),
        Bug(
            "relu",
            _with(lambda a, b: torch.relu(a) * b),
            "your gate is exactly 0 wherever gate(x) is negative",
            "the gate goes through ReLU (that is ReGLU). SwiGLU's gate is SiLU, z * sigmoid(z), "
            "slightly negative for negative z.",
        ),
        Bug(
            "swapped",
            _with(lambda a, b: F.silu(b) * a),
            "your formula has the right form, but the SiLU sits on the other projection",
            "you apply SiLU to up(x) and multiply by gate(x). Either way round is a SwiGLU, "
            "but the names fix which layer is which: SiLU goes on gate(x), and checkpoints "
            "trained this way only work if the weight called gate is the one inside SiLU.",
        ),
        Bug(
            "silu_both",
            _with(lambda a, b: F.silu(a) * F.silu(b)),
            "your up projection is bent too",
            "SiLU is applied to up(x) as well. Only the gate is bent; up(x) enters the "
            "product as it is, so the layer stays linear in it.",
        ),
        Bug(
            "product_first",
            _with(lambda a, b: F.silu(a * b)),
            "you bend the product instead of the gate",
            "you multiply gate(x) by up(x) and then apply SiLU. SiLU goes on gate(x) alone, "
            "and its result multiplies up(x).",
        ),
        Bug(
            "added",
            _with(lambda a, b: F.silu(a) + b),
            "your gate adds where it should multiply",
            "the gate's SiLU and up(x) are added. In a gated layer they are multiplied, "
            "element by element, so the gate can switch each hidden unit off.",
        ),
        Bug(
            "no_up",
            _with(lambda a, b: F.silu(a)),
            "your layer never uses up(x)",
            "up(x) is missing: without it this is Linear, SiLU, Linear, the feed-forward "
            "layer of lesson 09 with SiLU for GELU. SwiGLU multiplies the bent gate by up(x).",
        ),
        Bug(
            "no_gate",
            _with(lambda a, b: F.silu(b)),
            "your layer never uses gate(x)",
            "gate(x) is missing: you bend up(x) and send it down. SwiGLU bends gate(x) and "
            "multiplies the result by up(x).",
        ),
        Bug(
            "residual_inside",
            lambda x, gate, up, down: x + down(F.silu(gate(x)) * up(x)),
            "your output is x plus the right answer",
            "you add the input x. The residual addition belongs to the block (your "
            "prenorm_block adds it); swiglu returns only the update.",
        ),
    ),
    hints=(
        "Three calls of the layers and one product: gate(x) goes through SiLU, "
        "z * sigmoid(z); up(x) does not; their element-wise product goes into down.",
        "gate and up both take x from D to h features; down brings their product back to D.",
    ),
)
