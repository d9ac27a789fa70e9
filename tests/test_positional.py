import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.testing import assert_close

from course_lib.positional import (
    RotaryEmbedding,
    apply_rope,
    apply_rope_half,
    half_layout_order,
    sinusoidal_encoding,
)


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


# ---------------------------------------------------------------- the rotate-half layout


def rope_half_by_split(x, positions, base=10000.0):
    """Independent: the rotate-half form x cos + rotate_half(x) sin, angles repeated per half."""
    d = x.shape[-1]
    inv_freq = 1.0 / base ** (torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,)
    freqs = positions.double()[:, None] * inv_freq[None, :]  # (T, d/2)
    angles = torch.cat((freqs, freqs), dim=-1)  # (T, d): pair i's angle at i and at i + d/2
    x64 = x.double()
    rotate_half = torch.cat((-x64[..., d // 2 :], x64[..., : d // 2]), dim=-1)  # (..., T, d)
    return (x64 * angles.cos() + rotate_half * angles.sin()).to(x.dtype)


@pytest.mark.parametrize("shape", [(5, 2), (3, 6, 8), (2, 4, 7, 16)])
def test_rope_half_matches_an_independent_half_split(shape):
    x = torch.randn(*shape)
    positions = torch.arange(shape[-2]) * 5 + 2
    assert_close(apply_rope_half(x, positions), rope_half_by_split(x, positions))
    x64 = x.double()
    assert_close(apply_rope_half(x64, positions), rope_half_by_split(x64, positions))


@pytest.mark.parametrize("d", [2, 4, 16, 64])
def test_half_layout_order_puts_even_dimensions_first(d):
    # (d/2, 2) rows are the interleaved pairs; reading it column by column gives evens, then odds
    expected = torch.arange(d).reshape(d // 2, 2).T.reshape(-1)
    assert torch.equal(half_layout_order(d), expected)


@pytest.mark.parametrize("seed", range(5))
def test_the_permutation_maps_one_layout_onto_the_other(seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(3, 9, 16, generator=g)  # (B, T, d)
    positions = torch.randint(0, 2000, (9,), generator=g)
    order = torch.arange(16).reshape(8, 2).T.reshape(-1)  # evens, then odds
    inverse = torch.argsort(order)
    # both references independent of the course: complex numbers vs the half split
    assert_close(
        rope_half_by_split(x[..., order], positions),
        rope_by_complex_numbers(x, positions)[..., order],
    )
    # and the course's two functions obey the same map, both ways
    assert_close(apply_rope_half(x[..., order], positions), apply_rope(x, positions)[..., order])
    assert_close(
        apply_rope(x[..., inverse], positions), apply_rope_half(x, positions)[..., inverse]
    )


@pytest.mark.parametrize("seed", range(10))
def test_scores_agree_once_the_projection_is_permuted_and_differ_when_mixed(seed, measure):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(12, 32, generator=g)  # (T, D)
    w_q, w_k = torch.randn(32, 16, generator=g) / 6, torch.randn(32, 16, generator=g) / 6
    positions = torch.arange(12)
    order = torch.arange(16).reshape(8, 2).T.reshape(-1)

    def scores(rotate, wq, wk):  # (T, T) q_m . k_n
        return rotate(x @ wq, positions) @ rotate(x @ wk, positions).T

    trained = scores(rope_by_complex_numbers, w_q, w_k)  # the interleaved layout
    ported = scores(rope_half_by_split, w_q[:, order], w_k[:, order])  # columns = Linear's rows
    assert_close(ported, trained, atol=1e-5, rtol=1e-5)
    mixed = scores(rope_half_by_split, w_q, w_k)  # the porting bug: layout swapped, no permute
    # offset 0 (the diagonal): no rotation between q and k, so any pairing agrees
    assert_close(mixed.diagonal(), trained.diagonal(), atol=1e-5, rtol=1e-5)
    off = ~torch.eye(12, dtype=torch.bool)
    change = (mixed - trained)[off].abs().mean() / trained[off].abs().mean()
    # mean |change| over mean |score| off the diagonal, seeds 0-9: 0.58 .. 0.96 (float64
    # references, same on every kernel path)
    assert measure("mixed layouts: relative score change", change) > 0.3


def test_rotary_embedding_half_layout():
    x = torch.randn(2, 3, 5, 8)
    assert_close(RotaryEmbedding(8, layout="half")(x), rope_half_by_split(x, torch.arange(5)))
    assert RotaryEmbedding(8).layout == "interleaved"
    assert "layout='half'" in repr(RotaryEmbedding(8, layout="half"))


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
            lambda: RotaryEmbedding(4, layout="halves"),
            ValueError,
            r"layout: expected one of \('interleaved', 'half'\), got 'halves'",
        ),
        (lambda: half_layout_order(5), ValueError, "d: expected an even width"),
        (lambda: apply_rope_half(torch.randn(3, 5), torch.arange(3)), ValueError, "even width"),
        (
            lambda: apply_rope_half(torch.randn(3, 4), torch.arange(2)),
            ValueError,
            r"positions: expected shape \(3,\)",
        ),
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


def test_rotary_tables_are_built_once_sized_by_max_len_and_not_saved():
    rope = RotaryEmbedding(8, max_len=16)
    assert rope.cos.shape == rope.sin.shape == (16, 4)
    assert dict(rope.state_dict()) == {}  # rebuilt from the formula, like the sinusoids
    assert "max_len=16" in repr(rope)
    x = torch.randn(2, 3, 16, 8)
    torch.testing.assert_close(rope(x), apply_rope(x, torch.arange(16)), rtol=0, atol=0)
    with pytest.raises(ValueError, match="x: expected at most max_len = 16 positions, got T = 17"):
        rope(torch.randn(17, 8))
    with pytest.raises(ValueError, match="max_len: expected a positive int, got 0"):
        RotaryEmbedding(8, max_len=0)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_rotate_qk_is_the_module_on_q_and_on_k_bit_for_bit(layout, dtype):
    rope = RotaryEmbedding(8, layout=layout, max_len=32)
    q, k = torch.randn(2, 2, 9, 8, dtype=dtype), torch.randn(2, 2, 9, 8, dtype=dtype)
    rotate = apply_rope if layout == "interleaved" else apply_rope_half
    q_rot, k_rot = rope.rotate_qk(q, k)
    for ours, x in ((q_rot, q), (k_rot, k)):
        assert torch.equal(ours, rope(x))
        assert torch.equal(ours, rotate(x, torch.arange(9)))  # float64: float64 angles, as before


def test_to_rotate_half_reorders_rows_head_by_head_and_checks_its_arguments():
    from course_lib.positional import to_rotate_half

    w = torch.arange(16.0)[:, None].repeat(1, 3)  # row r holds r
    rows = to_rotate_half(w, 2)[:, 0].tolist()
    assert rows == [0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15]
    assert to_rotate_half(torch.arange(8.0), 1).tolist() == [0, 2, 4, 6, 1, 3, 5, 7]
    with pytest.raises(ValueError, match="divisible by num_heads = 3"):
        to_rotate_half(w, 3)
    with pytest.raises(ValueError, match="even width"):
        to_rotate_half(torch.zeros(6, 2), 2)
