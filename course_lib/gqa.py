"""Grouped-query and multi-query attention: fewer key/value heads than query heads
(lesson 13c).

A generating model keeps every key and value it has computed (the KV cache), so its memory
grows with the number of key/value heads. Grouped-query attention lets H / num_kv_heads query
heads share one key head and one value head: num_kv_heads = H is multi-head attention, 1 is
multi-query attention, and the cache shrinks by the same factor.
"""

import torch
import torch.nn.functional as F
from torch import nn

from course_lib._validation import positive_int
from course_lib.attention import attend, scale_factor
from course_lib.multihead import check_heads, check_input


def split_qkv(qkv: torch.Tensor, num_heads: int, num_kv_heads: int) -> tuple:
    """Split a projection (B, T, (H + 2 H_kv) d) laid out [q | k | v] into q (B, H, T, d)
    and k, v (B, H_kv, T, d), each part's heads in order (lesson 13c).

    With num_kv_heads = num_heads this is MultiHeadAttention's own layout."""
    B, T, width = qkv.shape
    if width % (num_heads + 2 * num_kv_heads):
        raise ValueError(
            f"qkv: expected a last dimension that is (num_heads + 2 num_kv_heads) d = "
            f"({num_heads} + 2 x {num_kv_heads}) d, got {width}"
        )
    d = width // (num_heads + 2 * num_kv_heads)
    q, k, v = qkv.split([num_heads * d, num_kv_heads * d, num_kv_heads * d], dim=-1)
    q = q.view(B, T, num_heads, d).transpose(1, 2)  # (B, T, H, d) -> (B, H, T, d)
    k = k.view(B, T, num_kv_heads, d).transpose(1, 2)  # (B, H_kv, T, d)
    v = v.view(B, T, num_kv_heads, d).transpose(1, 2)  # (B, H_kv, T, d)
    return q, k, v


def grouped_attend(q, k, v, mask, factor: float):
    """Attention of q (B, H, T_q, d) with k, v (B, H_kv, T_k, d): query head h reads key and
    value head h // (H / H_kv), without copying k or v (lesson 13c).

    Each group of H / H_kv query heads is laid beside its shared key head, which broadcasts
    over the group. Returns (output (B, H, T_q, d), weights (B, H, T_q, T_k)).
    """
    B, H, T_q, _ = q.shape
    H_kv, T_k = k.shape[1], k.shape[2]
    q = q.unflatten(1, (H_kv, H // H_kv))  # (B, H_kv, G, T_q, d)
    k, v = k[:, :, None], v[:, :, None]  # (B, H_kv, 1, T_k, d), one per group
    if mask is not None:
        mask = mask.broadcast_to((B, H, T_q, T_k)).unflatten(1, (H_kv, H // H_kv))
    y, weights = attend(q, k, v, mask, factor)  # (B, H_kv, G, T_q, d), (B, H_kv, G, T_q, T_k)
    return y.flatten(1, 2), weights.flatten(1, 2)  # (B, H, T_q, d), (B, H, T_q, T_k)


class GroupedQueryAttention(nn.Module):
    """H query heads in num_kv_heads groups, each group sharing one key and one value head;
    then concatenate and project, as MultiHeadAttention (lesson 13c).

    qkv is one Linear(D, D + 2 * num_kv_heads * d) laid out [q | k | v]; with num_kv_heads = H
    it is MultiHeadAttention's Linear(D, 3D), and that module's weights load directly.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        num_kv_heads: int,
        *,
        bias: bool = True,
        rope=None,
        scale: bool = True,
        check_inputs: bool = True,
    ):
        super().__init__()
        check_heads(d_model, num_heads, scale, rope)
        positive_int("num_kv_heads", num_kv_heads)
        if num_heads % num_kv_heads:
            raise ValueError(
                f"num_kv_heads: expected a divisor of num_heads = {num_heads}, got {num_kv_heads} "
                f"({num_heads} % {num_kv_heads} = {num_heads % num_kv_heads})"
            )
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.d_head = d_model // num_heads
        self.qkv = nn.Linear(d_model, d_model + 2 * num_kv_heads * self.d_head, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)
        self.rope = rope
        self.scale = scale
        self.fused = True  # as MultiHeadAttention: torch's kernel unless weights are asked for
        self.check_inputs = bool(check_inputs)

    def grouped_heads(self, x: torch.Tensor) -> tuple:
        """q (B, H, T, d) and k, v (B, H_kv, T, d) of x (B, T, D), RoPE on q and k if given
        (lesson 13c)."""
        q, k, v = split_qkv(self.qkv(x), self.num_heads, self.num_kv_heads)
        if self.rope is not None:
            q, k = self.rope.rotate_qk(q, k)  # (B, H, T, d), (B, H_kv, T, d)
        return q, k, v

    def check(self, x, mask) -> None:
        """Raise unless x is (B, T, D) floating point and mask fits (B, H, T, T) (lesson 13c)."""
        check_input(x, mask, self.num_heads, self.d_head)

    def forward(self, x: torch.Tensor, mask=None, return_weights: bool = False):
        if self.check_inputs:
            self.check(x, mask)
        B, T, D = x.shape
        q, k, v = self.grouped_heads(x)  # (B, H, T, d), (B, H_kv, T, d) twice
        if return_weights or not self.fused:
            factor = scale_factor(self.scale, self.d_head)
            y, weights = grouped_attend(q, k, v, mask, factor)  # (B, H, T, d), (B, H, T, T)
        else:
            factor = None if self.scale else 1.0  # None: torch's default 1/sqrt(d)
            y, weights = (
                F.scaled_dot_product_attention(
                    q, k, v, attn_mask=mask, scale=factor, enable_gqa=True
                ),
                None,
            )  # (B, H, T, d)
        y = y.transpose(1, 2).reshape(B, T, D)  # (B, H, T, d) -> (B, T, H, d) -> (B, T, D)
        y = self.out(y)  # (B, T, D)
        return (y, weights) if return_weights else y


def as_multihead(qkv: nn.Linear, num_heads: int, num_kv_heads: int) -> nn.Linear:
    """A Linear(D, 3D) laid out [q | k | v] for multi-head attention that computes what
    grouped-query attention with `qkv` (a Linear(D, D + 2 H_kv d)) computes: the query rows
    as they are, and each key/value head's rows copied for every query head of its group, so
    that head h gets key/value head h // (H / H_kv) (lesson 13c)."""
    D = qkv.in_features
    d = D // num_heads
    kv_of = torch.arange(num_heads) // (num_heads // num_kv_heads)  # (H,): h -> h // G
    tied = nn.Linear(D, 3 * D, bias=qkv.bias is not None, dtype=qkv.weight.dtype)
    with torch.no_grad():
        for mine, theirs in ((tied.weight, qkv.weight), (tied.bias, qkv.bias)):
            if theirs is None:
                continue
            q, k, v = theirs.split([D, num_kv_heads * d, num_kv_heads * d])  # rows
            k, v = (t.unflatten(0, (num_kv_heads, d))[kv_of].flatten(0, 1) for t in (k, v))
            mine.copy_(torch.cat([q, k, v]))  # (3D, ...): each head's rows in order
    return tied


def kv_cache_bytes(num_layers: int, num_kv_heads: int, T: int, d_head: int, bytes_per_value=4):
    """Bytes a KV cache holds for one sequence of T tokens: 2 (keys and values) x layers x
    kv_heads x T x d x bytes per value (4 for float32) (lesson 13c)."""
    for name, value in (
        ("num_layers", num_layers), ("num_kv_heads", num_kv_heads), ("T", T),
        ("d_head", d_head), ("bytes_per_value", bytes_per_value),
    ):  # fmt: skip
        positive_int(name, value)
    return 2 * num_layers * num_kv_heads * T * d_head * bytes_per_value
