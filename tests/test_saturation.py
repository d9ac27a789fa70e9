"""course_lib.saturation: lesson 03_scaling's measuring tools, each against torch or a hand
derivation.

The lesson's claims made with them (saturation, the vanishing Jacobian, the training run) are
in tests/test_lesson03_scaling.py.
"""

import math

import pytest
import torch
from torch.testing import assert_close

from course_lib.saturation import (
    linear_scores,
    marked_average_batch,
    random_qkv,
    random_scores,
    softmax_entropy,
    softmax_jacobian,
    typical_jacobian_norm,
)


def test_entropy_matches_torch_and_its_extremes():
    w = torch.softmax(torch.randn(3, 5, 7) * 3, dim=-1)
    assert_close(softmax_entropy(w), torch.distributions.Categorical(probs=w).entropy())
    assert_close(softmax_entropy(torch.full((4, 8), 1 / 8)), torch.full((4,), math.log(8)))
    assert_close(softmax_entropy(torch.eye(5)), torch.zeros(5))  # one-hot: no NaN from 0 log 0


def test_softmax_jacobian_matches_autograd_row_by_row():
    scores = torch.randn(2, 3, 5, dtype=torch.float64) * 3
    scores[0, 0, 3:] = -math.inf  # masked keys: weight 0, a row and column of zeros
    J = softmax_jacobian(scores)  # (2, 3, 5, 5)
    for index in [(0, 0), (0, 2), (1, 1)]:
        row = scores[index]
        expected = torch.autograd.functional.jacobian(lambda s: torch.softmax(s, -1), row)
        assert_close(J[index], expected)
    assert_close(J, J.transpose(-2, -1))  # symmetric
    assert_close(J.sum(-1), torch.zeros(2, 3, 5, dtype=torch.float64))  # weights sum to 1 always
    assert_close(softmax_jacobian(torch.tensor([1.0, 0.0]))[0], torch.tensor([0.1966, -0.1966]),
                 atol=1e-4, rtol=0)  # fmt: skip


def test_typical_jacobian_norm_is_the_median_row_size_and_takes_another_jacobian():
    scores = torch.tensor([[[0.0, 0.0], [50.0, 0.0], [1.0, 0.0]]])  # (1, 3, 2): flat, one-hot
    flat = math.sqrt(4 * 0.25**2)  # every entry +-1/4 for two equal weights
    w = 1 / (1 + math.exp(-1))
    middle = math.sqrt(4 * (w * (1 - w)) ** 2)
    assert math.isclose(typical_jacobian_norm(scores), middle, rel_tol=1e-5)
    assert math.isclose(typical_jacobian_norm(scores[:, :1]), flat, rel_tol=1e-6)
    assert typical_jacobian_norm(scores, lambda s: 2 * softmax_jacobian(s)) == pytest.approx(
        2 * middle
    )


def test_random_scores_are_the_scaled_dot_products_of_random_qkv():
    q, k, _ = random_qkv(5, 4, 16, generator=torch.Generator().manual_seed(3))
    assert_close(random_scores(16, scale=True, n=5, T=4, seed=3), q @ k.transpose(-2, -1) / 4)
    assert_close(random_scores(16, scale=False, n=5, T=4, seed=3), q @ k.transpose(-2, -1))


def test_linear_scores_come_from_default_linear_layers_and_leave_the_global_rng_alone():
    torch.manual_seed(7)
    before = torch.random.get_rng_state()
    scores = linear_scores(8, 4, layers=3, n=5, seed=1)
    assert torch.equal(torch.random.get_rng_state(), before)
    assert scores.shape == (3, 5)
    torch.manual_seed(1)
    with torch.no_grad():
        w_q, w_k = torch.nn.Linear(8, 4), torch.nn.Linear(8, 4)
        x, x_other = torch.randn(2, 5, 8)
        assert_close(scores[0], (w_q(x) * w_k(x_other)).sum(-1))
    assert torch.equal(linear_scores(8, 4, layers=3, n=5, seed=1), scores)
    with pytest.raises(ValueError, match="d_k: expected a positive int"):
        linear_scores(8, 0)


def test_marked_average_batch_targets_the_mean_of_flagged_content():
    x, target = marked_average_batch(4, 6, 5, marked=2, generator=torch.Generator().manual_seed(0))
    assert x.shape == (4, 6, 5) and target.shape == (4, 3)
    assert torch.all(x[..., 0].sum(-1) == 2) and torch.all(x[..., 1] == 1)
    for b in range(4):
        flagged = x[b, x[b, :, 0] == 1, 2:]
        assert_close(target[b], flagged.mean(0))
