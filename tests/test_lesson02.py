"""Lesson 02's claims about the 1/sqrt(d_k) scale, with the bars measured when they were written."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from course_lib.attention import (
    attention_gradients,
    marked_average_batch,
    random_qkv,
    sample_scores,
    softmax_entropy,
    train_single_head,
    typical_gradient_norms,
)

D_KS = [1, 4, 16, 64, 256, 1024]


@pytest.mark.parametrize("d_k", D_KS)
def test_score_variance_grows_like_d_k_and_scaling_brings_it_to_one(d_k):
    g = torch.Generator().manual_seed(d_k)
    n = 100_000 if d_k <= 64 else 30_000  # wide scores are near-normal: fewer samples suffice
    raw = sample_scores(d_k, n, generator=g)
    scaled = sample_scores(d_k, n, scale=True, generator=g)
    # measured: var / d_k in 0.983 .. 1.007, scaled var in 0.996 .. 1.016
    assert 0.95 < raw.var().item() / d_k < 1.05
    assert 0.95 < scaled.var().item() < 1.05


def test_entropy_matches_torch_and_its_extremes():
    w = torch.softmax(torch.randn(3, 5, 7) * 3, dim=-1)
    assert_close(softmax_entropy(w), torch.distributions.Categorical(probs=w).entropy())
    assert_close(softmax_entropy(torch.full((4, 8), 1 / 8)), torch.full((4,), math.log(8)))
    assert_close(softmax_entropy(torch.eye(5)), torch.zeros(5))  # one-hot: no NaN from 0 log 0


def saturation(d_k, scale, n=256, T=8):
    g = torch.Generator().manual_seed(0)
    q, k, _ = random_qkv(n, T, d_k, generator=g)
    factor = 1 / math.sqrt(d_k) if scale else 1.0
    w = F.softmax(q @ k.transpose(-2, -1) * factor, dim=-1)  # (n, T, T), torch's own softmax
    return w.amax(-1).mean().item(), softmax_entropy(w).mean().item()


def test_without_scaling_softmax_saturates_with_scaling_it_stays_put():
    top, entropy = saturation(1024, scale=False)
    assert top > 0.95 and entropy < 0.15  # measured 0.966, 0.080
    reference_top, reference_entropy = saturation(1, scale=True)  # 0.304, 1.80 nats
    for d_k in D_KS:
        top, entropy = saturation(d_k, scale=True)
        assert abs(top - reference_top) < 0.1  # measured 0.30 .. 0.36
        assert entropy > 0.9 * reference_entropy  # measured 1.72 .. 1.80


def test_attention_gradients_match_the_softmax_jacobian_by_hand():
    q, k, v = random_qkv(3, 5, 16, 4)
    upstream = torch.randn(3, 5, 4)
    for scale in (True, False):
        f = 1 / 4 if scale else 1.0
        w, grad_scores, grad_q = attention_gradients(q, k, v, scale=scale, upstream=upstream)
        assert_close(w, F.softmax(q @ k.transpose(-2, -1) * f, dim=-1))
        g = upstream @ v.transpose(-2, -1)  # dL/dweights (3, 5, 5)
        by_hand = w * (g - (w * g).sum(-1, keepdim=True))  # softmax backward, row by row
        assert_close(grad_scores, by_hand)
        assert_close(grad_q, by_hand @ k * f)  # (3, 5, 5) @ (3, 5, 16)


def test_unscaled_gradient_collapses_with_d_k_scaled_stays_flat():
    norms = {
        scale: {d: typical_gradient_norms(d, scale=scale)[:2] for d in D_KS}
        for scale in (True, False)
    }
    # w.r.t. scores, measured: unscaled 1.06 at d_k=4 -> 4.3e-6 at 1024; scaled 1.18 .. 1.25
    # w.r.t. q: unscaled 1.64 -> 1.4e-4; scaled 0.97 .. 1.20 for d_k >= 4
    for which in (0, 1):
        assert norms[False][1024][which] < 1e-2 * norms[False][4][which]
        flat = [norms[True][d][which] for d in D_KS[1:]]
        assert max(flat) < 2 * min(flat)


def test_marked_average_batch_targets_the_mean_of_flagged_content():
    x, target = marked_average_batch(4, 6, 5, marked=2, generator=torch.Generator().manual_seed(0))
    assert x.shape == (4, 6, 5) and target.shape == (4, 3)
    assert torch.all(x[..., 0].sum(-1) == 2) and torch.all(x[..., 1] == 1)
    for b in range(4):
        flagged = x[b, x[b, :, 0] == 1, 2:]
        assert_close(target[b], flagged.mean(0))


def test_training_unscaled_head_saturates_before_learning_scaled_head_learns():
    scaled = train_single_head(scale=True)
    unscaled = train_single_head(scale=False)
    # unscaled: near one-hot from step 0 (entropy 0.20 nats; uniform would be log 8 = 2.08)
    # while the loss is still high (1.11), and sharper after 20 steps (0.05)
    assert unscaled["entropy"][0] < 0.3 and unscaled["loss"][0] > 0.9
    assert unscaled["entropy"][20] < 0.1 and unscaled["max_weight"][20] > 0.95
    # the signal through the softmax: 13x smaller at step 0, 3.8e-15 by step 20
    assert scaled["grad_scores"][0] > 5 * unscaled["grad_scores"][0]
    assert unscaled["grad_scores"][20] < 1e-10
    # outcome after 60 steps: scaled loss 0.0049, unscaled 0.78; scaled entropy stays > 1.3
    assert scaled["loss"][-1] < 0.02 and unscaled["loss"][-1] > 0.5
    assert min(scaled["entropy"]) > 1.0
