"""The transformer block: attention and feed-forward sub-layers, norms, residuals (lesson 08)."""

import torch
from torch import nn

from course_lib._validation import one_of
from course_lib.feedforward import FEED_FORWARDS, SwiGLU
from course_lib.gqa import GroupedQueryAttention
from course_lib.multihead import MultiHeadAttention

NORMS = ("layer", "batch", "none", "rms")
RMS_EPS = 1e-5  # the eps of nn.LayerNorm, so "rms" differs from "layer" only in its formula


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
    """LayerNorm, TokenBatchNorm, Identity or RMSNorm for norm = "layer", "batch", "none" or
    "rms" (lessons 08 and 14)."""
    one_of("norm", norm, NORMS)
    if norm == "layer":
        return nn.LayerNorm(d_model)
    if norm == "rms":
        return nn.RMSNorm(d_model, eps=RMS_EPS)
    if norm == "batch":
        return TokenBatchNorm(d_model)
    return nn.Identity()


class NoFeedForward(nn.Module):
    """Stands in for the feed-forward layer of a block built with d_ff = 0: adds nothing."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(x)


class TransformerBlock(nn.Module):
    """The transformer block of lesson 08: attention and the feed-forward layer, each with its
    norm and its residual addition; pre-norm by default (lesson 08).

    prenorm=False gives the original post-norm block; residual=False drops the additions so
    lesson 08 can show what they buy.
    ff="swiglu" makes the feed-forward layer SwiGLU with hidden width d_ff, and bias=False
    drops the attention's biases: with norm="rms", the block of Llama-style models (lesson 14).
    num_kv_heads below num_heads makes the attention grouped-query (lesson 13c).
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
        check_inputs: bool = True,
        ff: str = "gelu",
        bias: bool = True,
        num_kv_heads: int | None = None,
    ):
        super().__init__()
        if isinstance(d_ff, bool) or not isinstance(d_ff, int):
            raise TypeError(f"d_ff: expected an int >= 0, got {type(d_ff).__name__} {d_ff!r}")
        if d_ff < 0:
            raise ValueError(f"d_ff: expected an int >= 0 (0: no feed-forward layer), got {d_ff}")
        one_of("norm", norm, NORMS)
        one_of("ff", ff, FEED_FORWARDS)
        if not isinstance(bias, bool):
            raise TypeError(f"bias: expected True or False, got {type(bias).__name__} {bias!r}")
        if not isinstance(dropout, int | float) or not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout: expected a probability in [0, 1), got {dropout!r}")
        self.prenorm = bool(prenorm)
        self.residual = bool(residual)
        if num_kv_heads is None or num_kv_heads == num_heads:
            self.attn = MultiHeadAttention(
                d_model, num_heads, bias=bias, rope=rope, scale=scale, check_inputs=check_inputs
            )
        else:  # H / num_kv_heads query heads share each key and value head
            self.attn = GroupedQueryAttention(
                d_model, num_heads, num_kv_heads, bias=bias, rope=rope, scale=scale,
                check_inputs=check_inputs,
            )  # fmt: skip
        self.norm1 = make_norm(norm, d_model)
        # d_ff = 0: a block without its feed-forward layer, for the variant table (lesson 09)
        if not d_ff:
            self.ff = NoFeedForward()
        elif ff == "swiglu":
            self.ff = SwiGLU(d_model, d_ff)
        else:
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


def learner_parts(block: TransformerBlock, mask, *, multihead, rope_heads, layer_norm) -> dict:
    """A trained pre-norm block's four parts as one-argument functions, the keyword arguments
    of lesson 08's prenorm_block: attention computed by the given multihead (lesson 04a) with
    rope_heads (lesson 07a) under `mask`, the norms by the given layer_norm, all with the
    block's own weights; the feed-forward layer is the block's own (lesson 08)."""
    attn = block.attn
    return {
        "attn": lambda h: multihead(h, attn.qkv, attn.out, attn.num_heads, mask, rope_heads),
        "ff": block.ff,
        "norm1": lambda h: layer_norm(h, block.norm1.weight, block.norm1.bias),
        "norm2": lambda h: layer_norm(h, block.norm2.weight, block.norm2.bias),
    }
