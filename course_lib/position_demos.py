"""Lesson 04's demonstrations: attention is blind to order, sinusoids at any position, a
rotation, and query-key scores under RoPE and under added encodings (lesson 04).

The position schemes a model uses are course_lib.positional.
"""

import torch

from course_lib._validation import float_tensor
from course_lib.attention import scaled_dot_product_attention
from course_lib.positional import (
    _check_base,
    _check_even,
    apply_rope,
    rope_angles,
    sinusoidal_encoding,
)
from course_lib.toy import project_qkv, toy_embeddings


def _int_positions(name: str, positions) -> torch.Tensor:
    if isinstance(positions, int) and not isinstance(positions, bool):
        positions = torch.tensor([positions])
    if not isinstance(positions, torch.Tensor):
        raise TypeError(
            f"{name}: expected an int or a 1-D integer tensor, got {type(positions).__name__}"
        )
    if positions.is_floating_point() or positions.is_complex() or positions.dtype == torch.bool:
        raise TypeError(f"{name}: expected integer positions, got dtype {positions.dtype}")
    if positions.dim() != 1:
        raise ValueError(f"{name}: expected a 1-D tensor, got shape {tuple(positions.shape)}")
    return positions


def sinusoidal_at(positions, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """(T, D) sinusoidal encodings of any integer positions, negative ones too (lesson 04).

    Row p equals sinusoidal_encoding(...)[p] for p >= 0; sin and cos accept any angle, so
    the same formula gives a row for p < 0 (lesson 04's score-by-offset pictures use them).
    """
    positions = _int_positions("positions", positions)
    _check_even("d_model", d_model)
    base = _check_base(base)
    angles = rope_angles(positions, d_model, base)  # (T, D/2): the same p / base**(2i/D)
    pe = torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)  # (T, D/2, 2) -> (T, D)
    return pe.to(torch.float32)


def position_similarity(seq_len: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """(T, T) cosine similarity between the sinusoidal encodings of every two positions (lesson 04).

    Every row has norm sqrt(D/2) (each pair is a point on the unit circle), so this is the
    plain dot product divided by D/2: 1 on the diagonal, and it depends only on p - q.
    """
    pe = sinusoidal_encoding(seq_len, d_model, base)  # (T, D)
    return pe @ pe.T / (d_model / 2)  # (T, D) @ (D, T) -> (T, T)


def rotate_pair(pair: torch.Tensor, angle) -> torch.Tensor:
    """Rotate 2-vectors pair (..., 2) counter-clockwise by angle radians (lesson 04)."""
    float_tensor("pair", pair)
    if pair.shape[-1] != 2:
        raise ValueError(f"pair: expected a last dimension of 2, got shape {tuple(pair.shape)}")
    angle = torch.as_tensor(angle, dtype=pair.dtype)
    cos, sin = angle.cos(), angle.sin()
    x, y = pair[..., 0], pair[..., 1]
    return torch.stack((x * cos - y * sin, x * sin + y * cos), dim=-1)  # (..., 2)


def rope_scores(q: torch.Tensor, k: torch.Tensor, m, n, base: float = 10000.0) -> torch.Tensor:
    """(P,) scores q_m . k_n: q (d,) rotated to positions m, k (d,) to positions n (lesson 04).

    m and n are ints or (P,) integer tensors (broadcast together).
    """
    float_tensor("q", q)
    float_tensor("k", k)
    if q.dim() != 1 or q.shape != k.shape:
        raise ValueError(
            "q, k: expected two 1-D vectors of one even width, "
            f"got {tuple(q.shape)}, {tuple(k.shape)}"
        )
    m, n = torch.broadcast_tensors(_int_positions("m", m), _int_positions("n", n))  # (P,) each
    # float64: in float32 a score drifts by up to about 1e-4 between shift 0 and shift 1000
    # (tests/test_lesson04.py measures it over seeds and kernel paths; lesson 04 explains it)
    q_rot = apply_rope(q.double().expand(len(m), -1), m, base)  # (P, d)
    k_rot = apply_rope(k.double().expand(len(n), -1), n, base)  # (P, d)
    return (q_rot * k_rot).sum(dim=-1).to(q.dtype)  # (P,)


def additive_scores(x_q, x_k, w_q, w_k, m, n, base: float = 10000.0) -> torch.Tensor:
    """(P,) scores when sinusoidal encodings are added to the embeddings first (lesson 04).

    q = (x_q + PE[m]) W_q and k = (x_k + PE[n]) W_k; x_q, x_k (D,), w_q, w_k (D, d).
    """
    for name, value in (("x_q", x_q), ("x_k", x_k), ("w_q", w_q), ("w_k", w_k)):
        float_tensor(name, value)
    m, n = torch.broadcast_tensors(_int_positions("m", m), _int_positions("n", n))  # (P,) each
    D = x_q.shape[-1]
    q = (x_q + sinusoidal_at(m, D, base)) @ w_q  # (P, D) @ (D, d) -> (P, d)
    k = (x_k + sinusoidal_at(n, D, base)) @ w_k  # (P, D) @ (D, d) -> (P, d)
    return (q * k).sum(dim=-1)  # (P,)


def permutation_demo(words, permutation, D: int = 16, d: int = 8, *, positions=None, seed: int = 0):
    """Attention outputs (T, d) for words and for words reordered by permutation (lesson 04).

    Returns (out, out_permuted). Embeddings and projections are random but fixed
    (course_lib.toy.toy_embeddings, project_qkv); positions = None, "sinusoidal"
    (added to the embeddings) or "rope" (queries and keys rotated). Without positions,
    out_permuted equals out[permutation]: attention only reorders its answers.
    """
    if positions not in (None, "sinusoidal", "rope"):
        raise ValueError(f"positions: expected None, 'sinusoidal' or 'rope', got {positions!r}")
    permutation = _int_positions("permutation", permutation)
    if sorted(permutation.tolist()) != list(range(len(words))):
        raise ValueError(
            f"permutation: expected a reordering of 0..{len(words) - 1}, got {permutation.tolist()}"
        )
    x = toy_embeddings(list(words), D, seed)  # (T, D)
    outputs = []
    for seq in (x, x[permutation]):  # (T, D) each
        where = torch.arange(len(words))  # (T,)
        if positions == "sinusoidal":
            seq = seq + sinusoidal_encoding(len(words), D)  # (T, D)
        q, k, v = project_qkv(seq, d, seed)  # (T, d) each
        if positions == "rope":
            q, k = apply_rope(q, where), apply_rope(k, where)
        outputs.append(scaled_dot_product_attention(q, k, v)[0])  # (T, d)
    return outputs[0], outputs[1]
