"""The feed-forward layer: Linear, GELU, Linear, one token at a time (lesson 09).

Lesson 09 draws GELU and ReLU, curve and slope: the curves here are torch's and the slopes
autograd's, because the learner writes GELU from its definition in the lesson's exercise.
"""

from contextlib import contextmanager
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from course_lib._validation import float_tensor, one_of
from course_lib.runtime import evaluating

ACTIVATIONS = ("GELU", "ReLU")
FEED_FORWARDS = ("gelu", "swiglu")  # Linear, GELU, Linear (lesson 09) or SwiGLU (lesson 14)


def _tensor(name: str, x) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        got = f"dtype {x.dtype}" if isinstance(x, torch.Tensor) else type(x).__name__
        raise TypeError(f"{name}: expected a floating-point tensor, got {got}")
    return x


def gelu(x: torch.Tensor) -> torch.Tensor:
    """GELU(x), torch's exact one (lesson 09)."""
    return F.gelu(_tensor("x", x))


def gelu_slope(x: torch.Tensor) -> torch.Tensor:
    """d GELU / dx at each element of x, by autograd through torch's GELU (lesson 09)."""
    z = _tensor("x", x).detach().requires_grad_(True)
    with torch.enable_grad():
        (slope,) = torch.autograd.grad(F.gelu(z).sum(), z)
    return slope


def relu(x: torch.Tensor) -> torch.Tensor:
    """ReLU(x) = max(x, 0) (lesson 09)."""
    return _tensor("x", x).clamp(min=0.0)


def relu_slope(x: torch.Tensor) -> torch.Tensor:
    """d ReLU / dx: 1 where x > 0, else 0 (at 0 itself torch also uses 0) (lesson 09)."""
    return (_tensor("x", x) > 0).to(x.dtype)


def activation(name: str, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(value, slope) of "GELU" or "ReLU" at x (lesson 09)."""
    one_of("name", name, ACTIVATIONS)
    if name == "GELU":
        return gelu(x), gelu_slope(x)
    return relu(x), relu_slope(x)


def _check_inputs(x: torch.Tensor, changed: torch.Tensor) -> None:
    float_tensor("x", x, min_dim=3)
    float_tensor("changed", changed, min_dim=3)
    if changed.shape != x.shape:
        raise ValueError(
            f"changed: expected the shape of x {tuple(x.shape)}, got {tuple(changed.shape)}"
        )


@torch.no_grad()
def sublayer_changes(block, x: torch.Tensor, changed: torch.Tensor, mask=None) -> dict:
    """How much each sub-layer's output moves, position by position, when its input goes from
    x to `changed` (both (B, T, D)) (lesson 09).

    Returns {"attention": (B, T), "feed-forward": (B, T)}: the largest absolute change of
    attn(norm1(.)) and of ff(norm2(.)) at each position. The feed-forward sub-layer reads one
    token at a time, so it moves only where that token's own vector moved; attention mixes
    tokens, so it also moves where other tokens changed.
    """
    _check_inputs(x, changed)
    moved = {}
    for name, run in (
        ("attention", lambda h: block.attn(block.norm1(h), mask)),
        ("feed-forward", lambda h: block.ff(block.norm2(h))),
    ):
        moved[name] = (run(changed) - run(x)).abs().amax(dim=-1)  # (B, T)
    return moved


def your_layer(block, feed_forward):
    """(layer, whose): a one-argument feed-forward layer made of your feed_forward(x, lin1,
    lin2) with `block`'s own two linear layers, whose = "yours"; or, while yours is not
    written or fails on the block's width, the block's own layer and the reason in words
    (lesson 09)."""
    from course_lib.exercises.stub import attempt

    lin1, lin2 = block.ff[0], block.ff[2]  # block.ff is Sequential(Linear, GELU, Linear)
    layer = partial(feed_forward, lin1=lin1, lin2=lin2)
    with torch.no_grad():
        tried = attempt("feed_forward", layer, torch.zeros(1, 1, lin1.in_features))
    if tried.ran:
        return layer, "yours"
    return block.ff, f"the course's ({tried.reason})"


@torch.no_grad()
def token_by_token(ff, x: torch.Tensor) -> torch.Tensor:
    """ff run on each token of x (B, T, D) separately, as a batch of one-token sequences, and
    put back in place (lesson 09): equal to ff(x) because ff never looks across tokens."""
    float_tensor("x", x, min_dim=3)
    B, T, D = x.shape
    return ff(x.reshape(B * T, 1, D)).reshape(B, T, -1)  # (B*T, 1, D) -> (B, T, D)


@contextmanager
def without_feedforward(model, layer: int):
    """Inside the with-block, block `layer`'s feed-forward layer adds nothing: its output is
    zeroed, so the residual stream passes it by unchanged (lesson 09). The model's weights are
    never touched; the hook is removed on leaving the block."""
    count = len(model.blocks)
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < count:
        raise ValueError(f"layer: expected an int in 0..{count - 1} for this model, got {layer!r}")
    block = model.blocks[layer]
    handle = block.ff.register_forward_hook(lambda _m, _args, out: torch.zeros_like(out))
    try:
        yield model
    finally:
        handle.remove()


def feedforward_parameters(d_model: int, d_ff: int) -> int:
    """Weights and biases of Linear(D, d_ff), GELU, Linear(d_ff, D): 2 D d_ff + d_ff + D
    (lesson 09)."""
    return 2 * d_model * d_ff + d_ff + d_model


@torch.no_grad()
def hidden_inputs(model, ids: torch.Tensor) -> list[torch.Tensor]:
    """Per block, the inputs of its GELU, W_1 norm2(h) + b_1, over ids (N, T): one (N, T, d_ff)
    tensor per block, from one forward pass of the model in eval mode (lesson 09)."""
    if not isinstance(ids, torch.Tensor) or ids.dtype != torch.long or ids.dim() != 2:
        got = tuple(ids.shape) if isinstance(ids, torch.Tensor) else type(ids).__name__
        raise ValueError(f"ids: expected a (N, T) tensor of int64 token ids, got {got}")
    seen = []
    handles = [
        block.ff[0].register_forward_hook(lambda _m, _args, out: seen.append(out))
        for block in model.blocks
    ]
    try:
        with evaluating(model):
            model(ids)
    finally:
        for handle in handles:
            handle.remove()
    return seen


class SwiGLU(nn.Module):
    """down(silu(gate(x)) * up(x)), three bias-free Linears: the feed-forward layer of
    Llama-style models (lesson 14). Its 3 D d_ff weights match Linear, GELU, Linear's
    2 D d_ff' + d_ff' + D when d_ff is about two thirds of d_ff'."""

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.gate = nn.Linear(d_model, d_ff, bias=False)
        self.up = nn.Linear(d_model, d_ff, bias=False)
        self.down = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.nn.functional.silu(self.gate(x)) * self.up(x))


def swiglu_parameters(d_model: int, d_ff: int) -> int:
    """Weights of SwiGLU(d_model, d_ff): gate, up and down, no biases: 3 D d_ff (lesson 14)."""
    return 3 * d_model * d_ff
