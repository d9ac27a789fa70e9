"""The transformer block: attention and feed-forward sub-layers, norms, residuals (lesson 05)."""

from dataclasses import dataclass

import torch
from torch import nn

from course_lib._validation import float_tensor, one_of, positive_int
from course_lib.multihead import MultiHeadAttention
from course_lib.runtime import one_thread

NORMS = ("layer", "batch", "none")


class TokenBatchNorm(nn.Module):
    """BatchNorm1d over (B, T, D): one mean and variance per feature, pooled over batch and time."""

    def __init__(self, d_model: int):
        super().__init__()
        self.bn = nn.BatchNorm1d(d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training and x.shape[0] * x.shape[1] < 2:
            raise ValueError(
                "x: batch norm in training mode needs at least 2 tokens (B * T >= 2) to "
                f"estimate a mean and variance, got shape {tuple(x.shape)}; call .eval() first"
            )
        return self.bn(x.transpose(1, 2)).transpose(1, 2)  # (B, T, D) -> (B, D, T) -> (B, T, D)


def make_norm(norm: str, d_model: int) -> nn.Module:
    """LayerNorm, TokenBatchNorm or Identity for norm = "layer", "batch" or "none" (lesson 05)."""
    one_of("norm", norm, NORMS)
    if norm == "layer":
        return nn.LayerNorm(d_model)
    if norm == "batch":
        return TokenBatchNorm(d_model)
    return nn.Identity()


class TransformerBlock(nn.Module):
    """Pre-norm by default: x + attn(norm1(x)), then x + ff(norm2(x)) (lesson 05).

    prenorm=False gives the original post-norm block, norm1(x + attn(x)) then
    norm2(x + ff(x)); residual=False drops the "x +" so lesson 05 can show what it buys.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        *,
        norm: str = "layer",
        prenorm: bool = True,
        residual: bool = True,
        dropout: float = 0.0,
        rope=None,
        scale: bool = True,
    ):
        super().__init__()
        positive_int("d_ff", d_ff)
        one_of("norm", norm, NORMS)
        if not isinstance(dropout, int | float) or not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout: expected a probability in [0, 1), got {dropout!r}")
        self.prenorm = bool(prenorm)
        self.residual = bool(residual)
        self.attn = MultiHeadAttention(d_model, num_heads, rope=rope, scale=scale)
        self.norm1 = make_norm(norm, d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        self.norm2 = make_norm(norm, d_model)
        self.drop = nn.Dropout(dropout)

    def _add(self, x: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
        return x + update if self.residual else update

    def forward(self, x: torch.Tensor, mask=None, return_weights: bool = False):
        weights = None
        if self.prenorm:
            a = self.attn(self.norm1(x), mask, return_weights)
            a, weights = a if return_weights else (a, None)
            x = self._add(x, self.drop(a))  # (B, T, D)
            x = self._add(x, self.drop(self.ff(self.norm2(x))))  # (B, T, D)
        else:
            a = self.attn(x, mask, return_weights)
            a, weights = a if return_weights else (a, None)
            x = self.norm1(self._add(x, self.drop(a)))  # (B, T, D)
            x = self.norm2(self._add(x, self.drop(self.ff(x))))  # (B, T, D)
        return (x, weights) if return_weights else x


# ---------------------------------------------------------------- lesson 05: deep stacks, norms


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
    """depth TransformerBlocks drawn from their own seed, leaving the global RNG alone (lesson 05).

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
    """What one forward and backward pass through a stack looks like, layer by layer (lesson 05)."""

    grad_norms: torch.Tensor  # (L,) norm of d loss / d (input of block l): the signal reaching it
    act_scales: torch.Tensor  # (L,) root-mean-square of block l's output


def run_stack(blocks, x: torch.Tensor, mask=None) -> list[torch.Tensor]:
    """[x, h_1, ..., h_L]: x and every block's output, with autograd's record kept (lesson 05)."""
    if len(blocks) == 0:
        raise ValueError("blocks: expected at least one block, got an empty stack")
    float_tensor("x", x, min_dim=3)
    hidden = [x.detach().requires_grad_(True)]
    for block in blocks:
        hidden.append(block(hidden[-1], mask))  # (B, T, D)
    return hidden


def gradient_reaching(hidden: list[torch.Tensor], probe: torch.Tensor, depth=None) -> torch.Tensor:
    """(depth,) float64 norms of d loss / d h_(l-1), the gradient arriving at block l's input
    (lesson 05).

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
    """(L,) root-mean-square of each block's output h_1 .. h_L (lesson 05)."""
    return torch.stack([h.detach().pow(2).mean().sqrt() for h in hidden[1:]])  # (L,)


def stack_profile(blocks, x: torch.Tensor, probe: torch.Tensor, mask=None) -> StackProfile:
    """One forward and one backward pass up and down the stack, measured per layer (lesson 05).

    Runs on one thread: lesson 05's stacks are tiny, and waking a second thread for each
    of their thousands of small operations costs more than it saves.
    """
    with one_thread():
        hidden = run_stack(blocks, x, mask)
        return StackProfile(gradient_reaching(hidden, probe), activation_scales(hidden))
