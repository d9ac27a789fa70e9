import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.testing import assert_close

from course_lib.positional import RotaryEmbedding, apply_rope, sinusoidal_encoding


def test_sinusoidal_matches_the_formula_entry_by_entry():
    T, D, base = 7, 10, 10000.0
    pe = sinusoidal_encoding(T, D, base)
    for p in range(T):
        for i in range(D // 2):
            angle = p / base ** (2 * i / D)
            assert math.isclose(pe[p, 2 * i].item(), math.sin(angle), abs_tol=1e-6)
            assert math.isclose(pe[p, 2 * i + 1].item(), math.cos(angle), abs_tol=1e-6)


def test_sinusoidal_positions_are_distinct():
    pe = sinusoidal_encoding(64, 32)
    distances = torch.cdist(pe, pe) + torch.eye(64) * 100
    assert distances.min() > 0.1


def rope_by_complex_numbers(x, positions, base=10000.0):
    """Independent formulation: each pair is a complex number times e^{i p theta_j}."""
    d = x.shape[-1]
    pairs = torch.view_as_complex(x.double().reshape(*x.shape[:-1], d // 2, 2).contiguous())
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,)
    rotation = torch.polar(torch.ones_like(theta), positions.double()[:, None] * theta)  # (T, d/2)
    return torch.view_as_real(pairs * rotation).reshape(x.shape).to(x.dtype)


@pytest.mark.parametrize("shape", [(5, 2), (3, 6, 8), (2, 4, 7, 16)])
def test_rope_matches_complex_multiplication(shape):
    x = torch.randn(*shape)
    positions = torch.arange(shape[-2]) * 3 + 1
    assert_close(apply_rope(x, positions), rope_by_complex_numbers(x, positions))


def test_rope_pair_zero_rotates_by_exactly_p_radians():
    x = torch.tensor([[1.0, 0.0, 1.0, 0.0]] * 3)
    out = apply_rope(x, torch.tensor([0, 1, 2]))
    for p in range(3):
        assert math.isclose(out[p, 0].item(), math.cos(p), abs_tol=1e-6)
        assert math.isclose(out[p, 1].item(), math.sin(p), abs_tol=1e-6)


@settings(max_examples=40, deadline=None)
@given(half=st.integers(1, 16), T=st.integers(1, 12), seed=st.integers(0, 10_000))
def test_rope_preserves_norms(half, T, seed):
    x = torch.randn(T, 2 * half, generator=torch.Generator().manual_seed(seed))
    rotated = apply_rope(x, torch.arange(T))
    assert_close(rotated.norm(dim=-1), x.norm(dim=-1))


@settings(max_examples=40, deadline=None)
@given(
    half=st.integers(1, 16),
    m=st.integers(0, 200),
    n=st.integers(0, 200),
    shift=st.integers(0, 500),
    seed=st.integers(0, 10_000),
)
def test_rope_score_depends_only_on_offset(half, m, n, shift, seed):
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(1, 2 * half, generator=g), torch.randn(1, 2 * half, generator=g)

    def score(a, b):
        qa = apply_rope(q.double(), torch.tensor([a]))
        kb = apply_rope(k.double(), torch.tensor([b]))
        return (qa * kb).sum().item()

    assert math.isclose(score(m, n), score(m + shift, n + shift), rel_tol=1e-5, abs_tol=1e-5)


def test_rotary_embedding_uses_positions_0_to_T():
    rope = RotaryEmbedding(8)
    x = torch.randn(2, 3, 5, 8)
    assert_close(rope(x), apply_rope(x, torch.arange(5)))
    assert list(rope.parameters()) == []


@pytest.mark.parametrize(
    "call,error,message",
    [
        (lambda: sinusoidal_encoding(4, 5), ValueError, "d_model: expected an even width"),
        (lambda: sinusoidal_encoding(0, 4), ValueError, "seq_len: expected a positive int, got 0"),
        (lambda: sinusoidal_encoding(4, 4, base=1.0), ValueError, "base: expected a number > 1"),
        (lambda: apply_rope(torch.randn(3, 5), torch.arange(3)), ValueError, "even width"),
        (
            lambda: apply_rope(torch.randn(3, 4), torch.arange(4)),
            ValueError,
            r"positions: expected shape \(3,\)",
        ),
        (
            lambda: apply_rope(torch.randn(3, 4), torch.arange(3.0)),
            TypeError,
            "positions: expected an integer tensor",
        ),
        (lambda: RotaryEmbedding(7), ValueError, "d_head: expected an even width"),
        (
            lambda: RotaryEmbedding(4)(torch.randn(2, 6)),
            ValueError,
            "x: expected last dimension d_head = 4",
        ),
    ],
)
def test_bad_input_is_named(call, error, message):
    with pytest.raises(error, match=message):
        call()
