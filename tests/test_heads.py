"""The head detectors (course_lib.heads): what they measure, on toy weights and random models."""

import pytest
import torch

import course_lib
from course_lib import data, heads
from course_lib.model import PRETRAINED, ModelConfig, TinyTransformer, load_card


@pytest.fixture(scope="module")
def valid_ids():
    return data.load_split("valid")


# The shipped rope-h4's scores (best heads, the card's numbers) are lesson 03's claims:
# tests/test_lesson03.py checks them, from one computation of its attention weights.


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_weights_score_low_on_every_detector(valid_ids, seed):
    course_lib.set_seed(seed)
    model = TinyTransformer.from_config(ModelConfig(len(data.VOCAB)))
    best = heads.best_heads(heads.detector_scores(model, valid_ids[:100]))
    # measured for seeds 0, 1, 2: previous <= 0.08, bracket <= 0.07, subject <= 0.14
    assert all(score < 0.3 for _, _, score in best.values()), best


def test_detector_score_is_the_mean_mass_on_the_key():
    tokens = 'Dogs near the cat sing bone run bone run ( the bird " the boys " ) .'
    ids = data.encode(tokens)[None]  # (1, T)
    T = ids.shape[1]
    weights = torch.rand(1, 3, T, T).tril()
    weights = weights / weights.sum(-1, keepdim=True)  # (1, H, T, T), rows sum to 1
    for name, pairs_of in heads.DETECTORS.items():
        pairs = pairs_of(tokens.split())
        expected = torch.stack([weights[0, :, q, k] for q, k in pairs]).mean(0)  # (H,)
        score = heads.detector_score([weights, weights], ids, name)
        assert score.shape == (2, 3)
        assert torch.allclose(score[1], expected)


def test_a_perfect_previous_token_head_scores_one_everywhere():
    T = 12
    weights = torch.zeros(2, 1, T, T)
    weights[:, :, 0, 0] = 1
    weights[:, :, torch.arange(1, T), torch.arange(T - 1)] = 1  # each row on t - 1
    assert heads.offset_score([weights]).item() == 1.0
    assert heads.offset_score([weights], offset=2).item() == 0.0


def test_bad_detector_and_empty_pairs_raise():
    ids = data.encode("Dog runs .")[None]
    weights = [torch.ones(1, 1, 3, 3) / 3]
    with pytest.raises(ValueError, match="previous"):
        heads.detector_score(weights, ids, "induction")
    with pytest.raises(ValueError, match="no 'bracket' pairs"):
        heads.detector_score(weights, ids, "bracket")


def test_every_card_records_its_best_heads():
    for name in PRETRAINED:
        card = load_card(name)
        for detector, (layer, head, score) in card["best_heads"].items():
            assert card["detectors"][detector][layer][head] == pytest.approx(score, abs=1e-3)


def test_chance_score_is_what_an_even_head_scores(valid_ids):
    ids = valid_ids[:50]
    N, T = ids.shape
    # a head that spreads evenly over the keys the causal mask lets it see
    even = torch.ones(T, T).tril()
    even = (even / even.sum(-1, keepdim=True)).expand(N, 2, T, T)  # (N, H, T, T)
    for name in heads.DETECTORS:
        chance = heads.chance_score(ids, name)
        scored = heads.detector_score([even], ids, name)  # (1, 2)
        assert torch.allclose(scored, torch.full_like(scored, chance), atol=1e-6), name
    assert heads.chance_scores(ids) == {n: heads.chance_score(ids, n) for n in heads.DETECTORS}


def test_chance_score_by_hand():
    tokens = 'Dogs near the cat sing bone run bone run ( the bird " the boys " ) .'.split()
    ids = data.encode(tokens)[None]
    # previous: queries 6 and 7; bracket: 14 and 15; subject: 3
    assert heads.chance_score(ids, "previous") == pytest.approx((1 / 7 + 1 / 8) / 2)
    assert heads.chance_score(ids, "bracket") == pytest.approx((1 / 15 + 1 / 16) / 2)
    assert heads.chance_score(ids, "subject") == pytest.approx(1 / 4)
    with pytest.raises(ValueError, match="detector: expected one of"):
        heads.chance_score(ids, "induction")
    with pytest.raises(ValueError, match="no 'bracket' pairs"):
        heads.chance_score(data.encode("Dog runs .")[None], "bracket")


def test_repeat_induction_score_reads_attention_from_the_second_copy_to_the_next_token():
    ids = heads.repeated_tokens(7, num=3, half=5, seed=1)
    assert torch.equal(ids[:, :5], ids[:, 5:])

    class Perfect(torch.nn.Module):  # attends from position t >= 5 to t - 4, else to 0
        def forward(self, idx, return_weights=False):
            B, T = idx.shape
            w = torch.zeros(B, 1, T, T)
            w[:, :, :5, 0] = 1
            w[:, :, torch.arange(5, T), torch.arange(1, T - 4)] = 1
            return torch.zeros(B, T, 3), [w, torch.zeros(B, 1, T, T)]

    score = heads.repeat_induction_score(Perfect(), ids)
    assert score.tolist() == [[1.0], [0.0]]
    assert heads.repeat_induction_chance(5) == pytest.approx((1 / 6 + 1 / 7 + 1 / 8 + 1 / 9) / 4)
