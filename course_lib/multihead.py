"""Multi-head attention: H narrow attentions side by side (lesson 03)."""

import torch
import torch.nn.functional as F
from torch import nn

from course_lib._validation import float_tensor, positive_int
from course_lib.attention import check_mask, scaled_dot_product_attention


class MultiHeadAttention(nn.Module):
    """Split D into H heads of width d = D / H, attend in each, concatenate, project (lesson 03).

    qkv is one Linear(D, 3D) laid out [q | k | v], each split into heads in order: the same
    layout as torch.nn.MultiheadAttention's in_proj_weight, so weights copy across directly.
    """

    def __init__(
        self, d_model: int, num_heads: int, *, bias: bool = True, rope=None, scale: bool = True
    ):
        super().__init__()
        if not isinstance(scale, bool):
            raise TypeError(f"scale: expected True or False, got {type(scale).__name__} {scale!r}")
        positive_int("d_model", d_model)
        positive_int("num_heads", num_heads)
        if d_model % num_heads:
            raise ValueError(
                f"num_heads: expected a divisor of d_model = {d_model}, got {num_heads} "
                f"({d_model} % {num_heads} = {d_model % num_heads})"
            )
        self.num_heads = num_heads
        self.d_head = d_model // num_heads
        if rope is not None and getattr(rope, "d_head", None) != self.d_head:
            raise ValueError(
                f"rope: expected a RotaryEmbedding of width d_head = {self.d_head}, "
                f"got {getattr(rope, 'd_head', type(rope).__name__)}"
            )
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)
        self.rope = rope
        self.scale = scale  # False: scores are q.k, not q.k / sqrt(d) (lesson 06's ablation)
        # True: torch's fused kernel when weights are not asked for (same numbers, faster);
        # False: always the from-scratch path that lesson 01 builds.
        self.fused = True

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, D) -> (B, H, T, d)."""
        B, T, _ = x.shape
        return x.view(B, T, self.num_heads, self.d_head).transpose(1, 2)  # (B, H, T, d)

    def to_torch(self) -> nn.MultiheadAttention:
        """torch.nn.MultiheadAttention (batch_first) holding copies of these weights, to check
        this module against torch's own (lesson 03). There is no rotary embedding in torch's."""
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
        float_tensor("x", x, min_dim=3)
        B, T, D = x.shape
        if x.dim() != 3 or D != self.num_heads * self.d_head:
            raise ValueError(
                f"x: expected shape (B, T, {self.num_heads * self.d_head}), got {tuple(x.shape)}"
            )
        if mask is not None:
            check_mask(mask, torch.Size((B, self.num_heads, T, T)))
        qkv = self.qkv(x).view(B, T, 3, self.num_heads, self.d_head)  # (B, T, 3, H, d)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)  # each (B, H, T, d)
        if self.rope is not None:
            q, k = self.rope(q), self.rope(k)
        if return_weights or not self.fused:
            # (B, H, T, d), (B, H, T, T)
            y, weights = scaled_dot_product_attention(q, k, v, mask, scale=self.scale)
        else:
            factor = None if self.scale else 1.0  # None: torch's default 1/sqrt(d)
            y, weights = (
                F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=factor),
                None,
            )  # (B, H, T, d)
        y = y.transpose(1, 2).reshape(B, T, D)  # (B, H, T, d) -> (B, T, H, d) -> (B, T, D)
        y = self.out(y)  # (B, T, D)
        return (y, weights) if return_weights else y
