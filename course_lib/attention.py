"""Scaled dot-product attention and the causal mask (lessons 02a, 02b and 03)."""

import math

import torch

from course_lib._validation import broadcast_shape, float_tensor, positive_int


def causal_mask(T: int, device=None) -> torch.Tensor:
    """(T, T) bool, True on and below the diagonal: query t may look at keys 0..t (lesson 02a)."""
    positive_int("T", T)
    return torch.ones(T, T, dtype=torch.bool, device=device).tril()  # (T, T)


def scale_factor(scale, d_k: int) -> float:
    """Factor for the scores: 1/sqrt(d_k) for True, 1 for False, or a given float (lesson 02a)."""
    if isinstance(scale, bool):
        return 1.0 / math.sqrt(d_k) if scale else 1.0
    if isinstance(scale, int | float):
        if not math.isfinite(scale) or scale <= 0:
            raise ValueError(f"scale: expected a positive finite factor, got {scale}")
        return float(scale)
    raise TypeError(f"scale: expected True, False or a float factor, got {type(scale).__name__}")


def check_mask(mask, scores_shape: torch.Size) -> None:
    """Raise unless mask is a bool tensor broadcastable to scores_shape with no empty query row
    (lesson 02a)."""
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"mask: expected a bool torch.Tensor, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(
            f"mask: expected dtype torch.bool (True = may attend), got {mask.dtype}; "
            "an additive float mask is not accepted"
        )
    if broadcast_shape(mask.shape, scores_shape) != scores_shape:
        raise ValueError(
            f"mask: expected a shape broadcastable to (..., T_q, T_k) = {tuple(scores_shape)}, "
            f"got {tuple(mask.shape)}"
        )
    empty = ~mask.any(dim=-1)  # (..., T_q or 1)
    if empty.any():
        row = empty.nonzero()[0].tolist()
        raise ValueError(
            f"mask: query row {row[-1]} (index {tuple(row)}) may attend to no key at all; "
            "its softmax would be 0/0 = NaN. Every row needs at least one True."
        )


def check_qkv(q, k, v) -> torch.Size:
    """Validate q, k, v for attention and return the shape of the score matrix (..., T_q, T_k)
    (lesson 02a)."""
    float_tensor("q", q, min_dim=2)
    float_tensor("k", k, min_dim=2)
    float_tensor("v", v, min_dim=2)
    if k.shape[-1] != q.shape[-1]:
        raise ValueError(
            f"k: expected width d_k = {q.shape[-1]} to match q (..., T_q, d_k), "
            f"got k of shape {tuple(k.shape)}"
        )
    if v.shape[-2] != k.shape[-2]:
        raise ValueError(
            f"v: expected length T_k = {k.shape[-2]} to match k (..., T_k, d_k), "
            f"got v of shape {tuple(v.shape)}"
        )
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k, v: expected one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    batch = broadcast_shape(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    if batch is None:
        raise ValueError(
            "q, k, v: expected batch dimensions that broadcast, got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    return torch.Size((*batch, q.shape[-2], k.shape[-2]))


def scaled_dot_product_attention(q, k, v, mask=None, *, scale=True):
    """softmax(q k^T * factor) v, returning (output, weights) (lesson 02a; the scale in lesson 03a).

    q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v); mask is bool, True where a
    query may attend, broadcastable to (..., T_q, T_k). Weights rows sum to 1.
    """
    scores_shape = check_qkv(q, k, v)
    factor = scale_factor(scale, q.shape[-1])
    if mask is not None:
        check_mask(mask, scores_shape)
    return attend(q, k, v, mask, factor)


def attend(q, k, v, mask, factor: float):
    """The arithmetic of scaled_dot_product_attention without its checks, for a caller whose
    q, k, v and mask are right by construction, as inside a model's layers (lesson 02a)."""
    scores = (
        q @ k.transpose(-2, -1)
    ) * factor  # (..., T_q, d_k) @ (..., d_k, T_k) -> (..., T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    # softmax subtracts each row's max first, so scores of 1e4 never overflow to inf
    weights = torch.softmax(scores, dim=-1)  # (..., T_q, T_k)
    return weights @ v, weights  # (..., T_q, T_k) @ (..., T_k, d_v) -> (..., T_q, d_v)
