"""course_lib.saturation: lessons 03a and 03b's measuring tools, each against torch or a hand
derivation.

The lessons' claims made with them (saturation, the vanishing Jacobian, the training run) are
in tests/test_lesson03a_why_scale.py and tests/test_lesson03b_scale_in_models.py.
"""

import math

import pytest
import torch
from torch.testing import assert_close

from course_lib import saturation
from course_lib.exercises.lesson03a_why_scale import softmax_jacobian_reference
from course_lib.exercises.lesson03b_scale_in_models import score_variance_reference
from course_lib.saturation import (
    first_scores_std,
    jacobian_sizes,
    linear_scores,
    marked_average_batch,
    random_qkv,
    random_scores,
    scale_row_text,
    scale_rows,
    score_variances,
    softmax_entropy,
    typical_jacobian_norm,
)
from helpers import stub


def test_entropy_matches_torch_and_its_extremes():
    w = torch.softmax(torch.randn(3, 5, 7) * 3, dim=-1)
    assert_close(softmax_entropy(w), torch.distributions.Categorical(probs=w).entropy())
    assert_close(softmax_entropy(torch.full((4, 8), 1 / 8)), torch.full((4,), math.log(8)))
    assert_close(softmax_entropy(torch.eye(5)), torch.zeros(5))  # one-hot: no NaN from 0 log 0


def test_the_course_keeps_no_hand_written_softmax_jacobian():
    """The lesson's exercise is the only place the formula is written: the course's Jacobian is
    autograd's (the exercise's reference), which the check refuses when a learner calls it."""
    assert not hasattr(saturation, "softmax_jacobian")


def formula(scores):  # the derivation, written here independently of the lesson
    w = torch.softmax(scores, -1)
    return torch.diag_embed(w) - w.unsqueeze(-1) * w.unsqueeze(-2)


def test_typical_jacobian_norm_is_the_median_row_size_of_the_jacobian_it_is_given():
    scores = torch.tensor([[[0.0, 0.0], [50.0, 0.0], [1.0, 0.0]]])  # (1, 3, 2): flat, one-hot
    flat = math.sqrt(4 * 0.25**2)  # every entry +-1/4 for two equal weights
    w = 1 / (1 + math.exp(-1))
    middle = math.sqrt(4 * (w * (1 - w)) ** 2)
    course = softmax_jacobian_reference
    assert math.isclose(typical_jacobian_norm(scores, course), middle, rel_tol=1e-5)
    assert math.isclose(typical_jacobian_norm(scores[:, :1], course), flat, rel_tol=1e-6)
    assert typical_jacobian_norm(scores, lambda s: 2 * formula(s)) == pytest.approx(2 * middle)


def test_jacobian_sizes_use_the_learners_function_where_it_passes_and_the_courses_otherwise():
    d_ks = [1, 64]
    mine, whose = jacobian_sizes(formula, d_ks)
    assert whose == "yours"
    course, why = jacobian_sizes(stub, d_ks)
    assert why == "the course's (yours is not written yet)"
    assert all(course[k] == pytest.approx(mine[k], rel=1e-5) for k in mine)
    wrong, why = jacobian_sizes(lambda s: -formula(s), d_ks)
    assert why == "the course's (yours does not pass its check)" and wrong == course
    for name in ("scaled", "unscaled"):
        for d, size in zip(d_ks, course[name], strict=True):
            scores = random_scores(d, scale=name == "scaled", seed=d)
            assert size == typical_jacobian_norm(scores, softmax_jacobian_reference)


def test_score_variances_derive_with_the_learners_function_and_measure_with_linear_layers():
    def mine(d_model, d_k, bias=True):
        return d_k * ((d_model + bias) / (3 * d_model)) ** 2

    found, whose = score_variances(mine, (8,))
    assert whose == "yours" and found[8][0] == pytest.approx(score_variance_reference(8, 8))
    assert found[8][1] == linear_scores(8, 8).var().item()
    course, why = score_variances(stub, (8,))
    assert why.startswith("the course's") and course == found


def test_first_scores_std_is_the_untrained_models_first_head_and_leaves_the_rng_alone():
    torch.manual_seed(5)
    before = torch.random.get_rng_state()
    std = first_scores_std("heads-1-no-scale", 0, lines=4)
    assert torch.equal(torch.random.get_rng_state(), before)
    assert first_scores_std("heads-1-no-scale", 0, lines=4) == std
    assert first_scores_std("heads-1-no-scale", 1, lines=4) != std
    assert 1.5 < std < 4  # near the derivation's 2.71, far from unit-variance entries' 8


def test_scale_rows_read_the_variant_tables_two_rows_seed_by_seed():
    rows = scale_rows()
    assert [r["title"] for r in rows] == list(saturation.SCALE_ROWS.values())
    assert [r["holds"] for r in rows] == [True, False]
    assert [c["skill"] for c in rows[0]["claims"]] == ["object", "all"]
    for row in rows:
        for kind in ("scaled", "unscaled"):
            assert list(row[kind]) == list(saturation.SKILLS)
            assert all(len(v) == 3 for v in row[kind].values())
    text = scale_row_text(rows[1])
    assert "seeds 0, 1, 2" in text and "113,408 parameters" in text
    assert "  mark: gap 2.00, bar 9.62: falls short" in text


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
