"""A toy sentence's random vectors: fixed random embeddings, one per distinct word, and
untrained q/k/v projections (lesson 06)."""

import math

import torch

from course_lib._validation import float_tensor, positive_int


def toy_embeddings(words, D: int = 16, seed: int = 0) -> torch.Tensor:
    """(T, D) random embeddings, one fixed vector per distinct word: repeats match (lesson 06)."""
    if isinstance(words, str) or not all(isinstance(w, str) for w in words) or not words:
        raise TypeError(f"words: expected a non-empty list of strings, got {words!r}")
    positive_int("D", D)
    vocabulary = sorted(set(words))
    table = torch.randn(len(vocabulary), D, generator=torch.Generator().manual_seed(seed))
    return table[[vocabulary.index(w) for w in words]]  # (T, D)


def project_qkv(x, d: int, seed: int = 0):
    """Random (untrained) projections of x (..., T, D) to q, k, v of width d (lesson 06).

    Weights are N(0, 1/D), so q, k and v components have about the variance of x's.
    """
    float_tensor("x", x, min_dim=2)
    positive_int("d", d)
    D = x.shape[-1]
    g = torch.Generator().manual_seed(seed)
    w_q, w_k, w_v = (torch.randn(D, d, generator=g) / math.sqrt(D) for _ in range(3))
    return x @ w_q, x @ w_k, x @ w_v  # (..., T, D) @ (D, d) -> (..., T, d)
