import math
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.testing import assert_close

from course_lib.attention import causal_mask, scaled_dot_product_attention


@pytest.mark.parametrize("shape", [(4, 8), (2, 5, 16), (2, 3, 7, 4), (1, 1, 1, 3)])
def test_matches_torch_without_mask(shape):
    q, k, v = torch.randn(3, *shape).unbind(0)
    out, weights = scaled_dot_product_attention(q, k, v)
    assert_close(out, F.scaled_dot_product_attention(q, k, v))
    assert weights.shape == (*shape[:-1], shape[-2])


@pytest.mark.parametrize("T_q,T_k,d_k,d_v", [(5, 5, 8, 8), (3, 7, 4, 6), (1, 9, 16, 2)])
def test_matches_torch_with_random_mask(T_q, T_k, d_k, d_v):
    q, k, v = torch.randn(2, 3, T_q, d_k), torch.randn(2, 3, T_k, d_k), torch.randn(2, 3, T_k, d_v)
    mask = torch.rand(2, 1, T_q, T_k) > 0.4
    mask[..., 0] = True  # every query may see at least one key
    out, _ = scaled_dot_product_attention(q, k, v, mask)
    assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


def test_causal_mask_matches_torch_is_causal():
    q, k, v = torch.randn(3, 2, 4, 6, 8).unbind(0)
    out, weights = scaled_dot_product_attention(q, k, v, causal_mask(6))
    assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    assert torch.all(weights.triu(1) == 0)


def test_scale_options_match_torch_scale_argument():
    q, k, v = torch.randn(3, 2, 5, 16).unbind(0)
    unscaled, _ = scaled_dot_product_attention(q, k, v, scale=False)
    assert_close(unscaled, F.scaled_dot_product_attention(q, k, v, scale=1.0))
    custom, _ = scaled_dot_product_attention(q, k, v, scale=0.3)
    assert_close(custom, F.scaled_dot_product_attention(q, k, v, scale=0.3))


def test_causal_mask_is_lower_triangular():
    m = causal_mask(4)
    assert m.dtype == torch.bool
    assert m.tolist() == [[i >= j for j in range(4)] for i in range(4)]


@settings(max_examples=40, deadline=None)
@given(
    batch=st.integers(1, 3),
    T_q=st.integers(1, 9),
    T_k=st.integers(1, 9),
    d_k=st.integers(1, 16),
    d_v=st.integers(1, 8),
)
def test_rows_sum_to_one_and_outputs_are_averages_of_values(batch, T_q, T_k, d_k, d_v):
    q, k, v = (
        torch.randn(batch, T_q, d_k),
        torch.randn(batch, T_k, d_k),
        torch.randn(batch, T_k, d_v),
    )
    out, weights = scaled_dot_product_attention(q, k, v)
    assert_close(weights.sum(-1), torch.ones(batch, T_q))
    assert torch.all(weights >= 0)
    # a convex combination stays inside the values' per-feature range
    assert torch.all(out <= v.max(dim=1, keepdim=True).values + 1e-5)
    assert torch.all(out >= v.min(dim=1, keepdim=True).values - 1e-5)


@settings(max_examples=30, deadline=None)
@given(T=st.integers(2, 10), d=st.integers(1, 8), seed=st.integers(0, 10_000))
def test_permuting_inputs_permutes_outputs(T, d, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, d, generator=g)
    perm = torch.randperm(T, generator=g)
    out, _ = scaled_dot_product_attention(x, x, x)
    out_perm, _ = scaled_dot_product_attention(x[perm], x[perm], x[perm])
    assert_close(out_perm, out[perm])


def test_large_scores_stay_finite():
    q = torch.full((1, 3, 4), 1e4)
    k = torch.randn(1, 3, 4) * 1e4
    out, weights = scaled_dot_product_attention(q, k, torch.randn(1, 3, 4), scale=False)
    assert torch.isfinite(out).all() and torch.isfinite(weights).all()
    q, k = torch.randn(2, 4096) * 10, torch.randn(2, 4096) * 10
    out, weights = scaled_dot_product_attention(q, k, torch.randn(2, 3), scale=False)
    assert torch.isfinite(out).all()
    assert_close(weights.sum(-1), torch.ones(2))


def test_unscaled_softmax_saturates_at_large_width():
    q, k = torch.randn(64, 8, 1024), torch.randn(64, 8, 1024)
    v = torch.randn(64, 8, 4)
    _, raw = scaled_dot_product_attention(q, k, v, scale=False)
    _, scaled = scaled_dot_product_attention(q, k, v)
    assert raw.max(-1).values.mean() > 0.9  # near one-hot (measured 0.96)
    assert scaled.max(-1).values.mean() < 0.5  # still spread out (measured 0.36)
    assert math.isclose(scaled.sum().item(), 64 * 8.0, rel_tol=1e-5)


@pytest.mark.parametrize(
    "args,kwargs,error,message",
    [
        (
            (torch.randn(3, 4), torch.randn(3, 5), torch.randn(3, 4)),
            {},
            ValueError,
            "k: expected width d_k = 4",
        ),
        (
            (torch.randn(3, 4), torch.randn(3, 4), torch.randn(2, 4)),
            {},
            ValueError,
            "v: expected length T_k = 3",
        ),
        (
            (torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 4)),
            {"mask": torch.ones(3, 3)},
            TypeError,
            "mask: expected dtype torch.bool",
        ),
        (
            (torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 4)),
            {"mask": torch.ones(2, 3, dtype=torch.bool)},
            ValueError,
            "mask: expected a shape broadcastable",
        ),
        (
            (torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 4)),
            {
                "mask": torch.tensor(
                    [[True, False, False], [False, False, False], [True, True, True]]
                )
            },
            ValueError,
            "query row 1",
        ),
        (
            (torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 4)),
            {"scale": -1.0},
            ValueError,
            "scale: expected a positive finite factor, got -1.0",
        ),
        (
            (torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 4)),
            {"scale": "yes"},
            TypeError,
            "scale: expected True, False or a float",
        ),
        (
            (torch.arange(12).view(3, 4), torch.randn(3, 4), torch.randn(3, 4)),
            {},
            TypeError,
            "q: expected a floating-point tensor, got dtype torch.int64",
        ),
        (
            ([1.0], torch.randn(3, 4), torch.randn(3, 4)),
            {},
            TypeError,
            "q: expected a torch.Tensor, got list",
        ),
        (
            (torch.randn(4), torch.randn(3, 4), torch.randn(3, 4)),
            {},
            ValueError,
            "q: expected at least 2 dimensions",
        ),
    ],
)
def test_bad_input_is_named(args, kwargs, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        scaled_dot_product_attention(*args, **kwargs)


@pytest.mark.parametrize(
    "T,error", [(0, ValueError), (-2, ValueError), (2.5, TypeError), (True, TypeError)]
)
def test_causal_mask_rejects_bad_sizes(T, error):
    with pytest.raises(error, match="T: expected a positive int"):
        causal_mask(T)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.sampled_from([1, 2, 3]), max_size=4), min_size=1, max_size=3))
def test_broadcast_shape_agrees_with_torch(shapes):
    from course_lib._validation import broadcast_shape

    try:
        expected = torch.broadcast_shapes(*shapes)
    except RuntimeError:
        expected = None
    assert broadcast_shape(*shapes) == expected


@pytest.mark.slow  # a fresh Python process: another test may have imported sympy in this one
def test_attention_does_not_import_sympy():
    """torch.broadcast_shapes imports sympy on first use (~0.7 s); the lessons never need it."""
    code = (
        "import sys, torch; from course_lib.attention import scaled_dot_product_attention as a;"
        "from course_lib.attention import causal_mask;"
        "q = torch.randn(2, 3, 4); a(q, q, q, causal_mask(3)); print('sympy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
