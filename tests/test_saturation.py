"""course_lib.saturation: lesson 02's measuring tools, each against torch or a hand derivation.

Lesson 02's claims made with them (saturation, vanishing gradients, the training run) are in
tests/test_lesson02.py.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from course_lib.saturation import (
    attention_gradients,
    marked_average_batch,
    random_qkv,
    softmax_entropy,
    vanishing_gradient_width,
)


def test_entropy_matches_torch_and_its_extremes():
    w = torch.softmax(torch.randn(3, 5, 7) * 3, dim=-1)
    assert_close(softmax_entropy(w), torch.distributions.Categorical(probs=w).entropy())
    assert_close(softmax_entropy(torch.full((4, 8), 1 / 8)), torch.full((4,), math.log(8)))
    assert_close(softmax_entropy(torch.eye(5)), torch.zeros(5))  # one-hot: no NaN from 0 log 0


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


def test_vanishing_gradient_width_returns_a_listed_width_or_none_and_checks_its_arguments():
    widths = [1, 4, 16, 64, 256, 1024]
    # the lesson's worked example, from the table's numbers: 0.58 / 1.25 at d_k = 16
    assert vanishing_gradient_width(widths, threshold=0.5, wrt="scores") == 16
    assert vanishing_gradient_width([1, 4, 16], threshold=0.01) is None
    assert vanishing_gradient_width(range(64, 1025, 64)) in range(64, 1025, 64)
    assert vanishing_gradient_width(widths, seed=2) == vanishing_gradient_width(widths, seed=2)
    for bad, error, words in [
        ({"wrt": "k"}, ValueError, "wrt: expected one of"),
        ({"threshold": 0.0}, ValueError, "threshold: expected a positive number, got 0.0"),
        ({"threshold": "1%"}, TypeError, "threshold: expected a positive number, got str"),
    ]:
        with pytest.raises(error, match=words):
            vanishing_gradient_width(widths, **bad)
    with pytest.raises(ValueError, match="widths: expected at least one width"):
        vanishing_gradient_width([])
    with pytest.raises(ValueError, match="d_k: expected a positive int, got 0"):
        vanishing_gradient_width([0, 4])


def test_marked_average_batch_targets_the_mean_of_flagged_content():
    x, target = marked_average_batch(4, 6, 5, marked=2, generator=torch.Generator().manual_seed(0))
    assert x.shape == (4, 6, 5) and target.shape == (4, 3)
    assert torch.all(x[..., 0].sum(-1) == 2) and torch.all(x[..., 1] == 1)
    for b in range(4):
        flagged = x[b, x[b, :, 0] == 1, 2:]
        assert_close(target[b], flagged.mean(0))
