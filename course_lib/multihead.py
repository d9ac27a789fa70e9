"""Multi-head attention: H narrow attentions side by side (lesson 04a)."""

import torch
import torch.nn.functional as F
from torch import nn

from course_lib._validation import float_tensor, positive_int
from course_lib.attention import attend, check_mask, scale_factor


def check_heads(d_model, num_heads, scale, rope=None) -> None:
    """The checks every attention module with heads makes of its sizes, scale flag and RoPE
    (lesson 04a)."""
    if not isinstance(scale, bool):
        raise TypeError(f"scale: expected True or False, got {type(scale).__name__} {scale!r}")
    positive_int("d_model", d_model)
    positive_int("num_heads", num_heads)
    if d_model % num_heads:
        raise ValueError(
            f"num_heads: expected a divisor of d_model = {d_model}, got {num_heads} "
            f"({d_model} % {num_heads} = {d_model % num_heads})"
        )
    d_head = d_model // num_heads
    if rope is not None and getattr(rope, "d_head", None) != d_head:
        raise ValueError(
            f"rope: expected a RotaryEmbedding of width d_head = {d_head}, "
            f"got {getattr(rope, 'd_head', type(rope).__name__)}"
        )


def check_input(x, mask, num_heads: int, d_head: int) -> None:
    """Raise unless x is (B, T, H * d) floating point and mask fits (B, H, T, T) (lesson 04a)."""
    float_tensor("x", x, min_dim=3)
    B, T, D = x.shape[0], x.shape[1], x.shape[-1]
    if x.dim() != 3 or D != num_heads * d_head:
        raise ValueError(f"x: expected shape (B, T, {num_heads * d_head}), got {tuple(x.shape)}")
    if mask is not None:
        check_mask(mask, torch.Size((B, num_heads, T, T)))


def stacked_heads(projected: torch.Tensor, parts: int, num_heads: int, d_head: int) -> tuple:
    """Split one projection (B, T, parts * H * d), laid out [part 0 | part 1 | ...] each H
    heads of d wide, into `parts` tensors (B, H, T, d): q, k, v of a fused in-projection, or
    k, v of cross-attention's (lesson 04a)."""
    B, T, _ = projected.shape
    stacked = projected.view(B, T, parts, num_heads, d_head)  # (B, T, parts, H, d)
    return tuple(stacked.permute(2, 0, 3, 1, 4))  # each (B, H, T, d)


class MultiHeadAttention(nn.Module):
    """Split D into H heads of width d = D / H, attend in each, concatenate, project (lesson 04a).

    qkv is one Linear(D, 3D) laid out [q | k | v], each split into heads in order: the same
    layout as torch.nn.MultiheadAttention's in_proj_weight, so weights copy across directly.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        *,
        bias: bool = True,
        rope=None,
        scale: bool = True,
        check_inputs: bool = True,
    ):
        super().__init__()
        check_heads(d_model, num_heads, scale, rope)
        self.num_heads = num_heads
        self.d_head = d_model // num_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)
        self.rope = rope
        self.scale = scale  # False: scores are q.k, not q.k / sqrt(d) (lesson 03a)
        # True: torch's fused kernel when weights are not asked for (same numbers, faster);
        # False: always the from-scratch path that lesson 02b builds.
        self.fused = True
        # False inside TinyTransformer: the model checks its ids once and passes a causal mask
        # that is valid by construction, so its layers skip the checks (one costs a host sync)
        self.check_inputs = bool(check_inputs)

    def qkv_heads(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q, k, v of x (B, T, D), each (B, H, T, d), with RoPE on q and k if given (lesson 04a)."""
        q, k, v = stacked_heads(self.qkv(x), 3, self.num_heads, self.d_head)  # each (B, H, T, d)
        if self.rope is not None:
            q, k = self.rope.rotate_qk(q, k)  # each (B, H, T, d)
        return q, k, v

    def check(self, x, mask) -> None:
        """Raise unless x is (B, T, D) floating point and mask fits (B, H, T, T) (lesson 04a)."""
        check_input(x, mask, self.num_heads, self.d_head)

    def to_torch(self) -> nn.MultiheadAttention:
        """torch.nn.MultiheadAttention (batch_first) holding copies of these weights, to check
        this module against torch's own (lesson 04a). There is no rotary embedding in torch's."""
        if self.rope is not None:
            raise ValueError("rope: expected None, torch's MultiheadAttention has no RoPE")
        if not self.scale:
            raise ValueError("scale: expected True, torch's MultiheadAttention always scales")
        bias = self.qkv.bias is not None
        twin = nn.MultiheadAttention(
            self.out.in_features, self.num_heads, bias=bias, batch_first=True
        ).to(self.qkv.weight.dtype)
        with torch.no_grad():
            twin.in_proj_weight.copy_(self.qkv.weight)
            twin.out_proj.weight.copy_(self.out.weight)
            if bias:
                twin.in_proj_bias.copy_(self.qkv.bias)
                twin.out_proj.bias.copy_(self.out.bias)
        return twin

    def forward(self, x: torch.Tensor, mask=None, return_weights: bool = False):
        if self.check_inputs:
            self.check(x, mask)
        B, T, D = x.shape
        q, k, v = self.qkv_heads(x)  # each (B, H, T, d)
        if return_weights or not self.fused:
            # scaled_dot_product_attention's arithmetic; q, k, v are this layer's own
            factor = scale_factor(self.scale, self.d_head)
            y, weights = attend(q, k, v, mask, factor)  # (B, H, T, d), (B, H, T, T)
        else:
            factor = None if self.scale else 1.0  # None: torch's default 1/sqrt(d)
            y, weights = (
                F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=factor),
                None,
            )  # (B, H, T, d)
        y = y.transpose(1, 2).reshape(B, T, D)  # (B, H, T, d) -> (B, T, H, d) -> (B, T, D)
        y = self.out(y)  # (B, T, D)
        return (y, weights) if return_weights else y
