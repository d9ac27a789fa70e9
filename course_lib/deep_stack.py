"""Lesson 08's experiment: deep stacks of blocks with and without residuals and norms, and the
gradient and activation scale that reach each layer (lesson 08).

The block itself is course_lib.block.
"""

from dataclasses import dataclass

import torch
from torch import nn

from course_lib._validation import float_tensor, positive_int
from course_lib.block import TransformerBlock
from course_lib.runtime import one_thread


def build_stack(
    depth: int,
    d_model: int,
    num_heads: int,
    d_ff: int,
    *,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    **block_kwargs,
) -> nn.ModuleList:
    """depth TransformerBlocks drawn from their own seed, leaving the global RNG alone (lesson 08).

    The norms draw no random numbers, so one seed gives the same attention and feed-forward
    weights for every norm, prenorm and residual setting: comparisons change one thing only.
    """
    positive_int("depth", depth)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        blocks = [TransformerBlock(d_model, num_heads, d_ff, **block_kwargs) for _ in range(depth)]
    return nn.ModuleList(blocks).to(dtype)


@dataclass(frozen=True)
class StackProfile:
    """What one forward and backward pass through a stack looks like, layer by layer (lesson 08)."""

    grad_norms: torch.Tensor  # (L,) norm of d loss / d (input of block l): the signal reaching it
    act_scales: torch.Tensor  # (L,) root-mean-square of block l's output


def run_stack(blocks, x: torch.Tensor, mask=None) -> list[torch.Tensor]:
    """[x, h_1, ..., h_L]: x and every block's output, with autograd's record kept (lesson 08)."""
    if len(blocks) == 0:
        raise ValueError("blocks: expected at least one block, got an empty stack")
    float_tensor("x", x, min_dim=3)
    hidden = [x.detach().requires_grad_(True)]
    for block in blocks:
        hidden.append(block(hidden[-1], mask))  # (B, T, D)
    return hidden


def gradient_reaching(hidden: list[torch.Tensor], probe: torch.Tensor, depth=None) -> torch.Tensor:
    """(depth,) float64 norms of d loss / d h_(l-1), the gradient arriving at block l's input
    (lesson 08).

    loss = sum(h_depth * probe): a fixed probe makes the gradient leaving the top equal to
    probe whatever the output's size, so every stack starts its backward pass alike. The
    graph is kept, so one forward pass serves any depth up to len(hidden) - 1. The norms are
    taken in float64: a float32 gradient whose entries are all below about 3e-23 is not zero,
    but the squares a float32 norm adds up are, and it would report exactly 0.
    """
    depth = len(hidden) - 1 if depth is None else positive_int("depth", depth)
    if depth > len(hidden) - 1:
        raise ValueError(f"depth: expected at most {len(hidden) - 1} (the blocks run), got {depth}")
    float_tensor("probe", probe, min_dim=3)
    if probe.shape != hidden[depth].shape:
        expected = tuple(hidden[depth].shape)
        raise ValueError(f"probe: expected the output's shape {expected}, got {tuple(probe.shape)}")
    loss = (hidden[depth] * probe).sum()
    grads = torch.autograd.grad(loss, hidden[:depth], retain_graph=True)  # one (B, T, D) each
    return torch.stack([g.double().norm() for g in grads])  # (depth,), float64


def activation_scales(hidden: list[torch.Tensor]) -> torch.Tensor:
    """(L,) root-mean-square of each block's output h_1 .. h_L (lesson 08)."""
    return torch.stack([h.detach().pow(2).mean().sqrt() for h in hidden[1:]])  # (L,)


def stack_profile(blocks, x: torch.Tensor, probe: torch.Tensor, mask=None) -> StackProfile:
    """One forward and one backward pass up and down the stack, measured per layer (lesson 08).

    Runs on one thread: lesson 08's stacks are tiny, and waking a second thread for each
    of their thousands of small operations costs more than it saves.
    """
    with one_thread():
        hidden = run_stack(blocks, x, mask)
        return StackProfile(gradient_reaching(hidden, probe), activation_scales(hidden))


def stack_inputs(seed: int = 0, B: int = 2, T: int = 8, D: int = 16):
    """(x, probe), each (B, T, D), drawn in that order from their own generator seeded with
    `seed`: what lesson 08's stacks read, and the gradient fed in at their top. The lesson's
    explorer draws the same, so its stacks at 24 blocks are the lesson's (lesson 08)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, D, generator=g)  # (B, T, D)
    return x, torch.randn(B, T, D, generator=g)  # probe: (B, T, D)


# lesson 08's four settings of a pre-norm stack: {label: (norm, residual)}
SETTINGS = {
    "layer norm, residual on": ("layer", True),
    "layer norm, residual off": ("layer", False),
    "no norm, residual on": ("none", True),
    "no norm, residual off": ("none", False),
}


def depth_profiles(depth: int, seed: int = 0, settings=None) -> dict[str, StackProfile]:
    """{label: StackProfile} for each setting {label: (norm, residual)} (SETTINGS unless
    given): pre-norm stacks of `depth` blocks (D = 16, 2 heads, d_ff = 64), the same weights
    for every setting, from `seed`, run on stack_inputs(seed) (lesson 08)."""
    x, probe = stack_inputs(seed)
    return {
        label: stack_profile(
            build_stack(depth, 16, 2, 64, seed=seed, norm=norm, residual=residual), x, probe
        )
        for label, (norm, residual) in (settings or SETTINGS).items()
    }
