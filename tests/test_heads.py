"""The head detectors (course_lib.heads): what they measure, on toy weights and random models."""

import pytest
import torch

import course_lib
from course_lib import corpus, heads
from course_lib.model import ModelConfig, TinyTransformer

# position:  0    1    2   3    4  5  6  7  8 9   10 11   12  13   14
LINE = "Dogs near cat sing la mi la mi [ dog ] .dcd Cat near dog".split()


@pytest.fixture(scope="module")
def valid_ids():
    return corpus.load_split("valid")


def test_the_detectors_are_the_toy_languages():
    assert heads.DETECTORS is corpus.DETECTORS


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_weights_score_low_on_every_detector(valid_ids, seed):
    course_lib.set_seed(seed)
    model = TinyTransformer.from_config(ModelConfig(len(corpus.VOCAB)))
    scores = heads.detector_scores(model, valid_ids[:100])
    assert set(scores) == set(corpus.DETECTORS)
    best = {name: float(table.max()) for name, table in scores.items()}
    # measured for seeds 0, 1, 2: previous 0.15-0.17, subject 0.14-0.16, induction, song and
    # bracket 0.07-0.09 (the keys of the first two are nearer the query: more mass by chance)
    assert all(score < 0.3 for score in best.values()), best


def test_detector_score_is_the_mean_mass_on_the_key():
    ids = corpus.encode(LINE)[None]  # (1, T)
    T = ids.shape[1]
    weights = torch.rand(1, 3, T, T).tril()
    weights = weights / weights.sum(-1, keepdim=True)  # (1, H, T, T), rows sum to 1
    for name, pairs_of in heads.DETECTORS.items():
        pairs = pairs_of(LINE)
        expected = torch.stack([weights[0, :, q, k] for q, k in pairs]).mean(0)  # (H,)
        score = heads.detector_score([weights, weights], ids, name)
        assert score.shape == (2, 3)
        assert torch.allclose(score[1], expected)


def test_bad_detector_and_empty_pairs_raise():
    ids = corpus.encode("Dog sees cat .ccc")[None]
    weights = [torch.ones(1, 1, 4, 4) / 4]
    with pytest.raises(ValueError, match="detector: expected one of .*'previous'.*got 'mark'"):
        heads.detector_score(weights, ids, "mark")
    with pytest.raises(ValueError, match="no 'bracket' pairs"):
        heads.detector_score(weights, ids, "bracket")


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
    ids = corpus.encode(LINE)[None]
    # queries: subject 2 (before "sing"); previous 2 and 14 (nouns after "near"); induction 13
    # (the second "near"); song 6 (the tune of two has come round); bracket 9 (before "]")
    assert heads.chance_score(ids, "subject") == pytest.approx(1 / 3)
    assert heads.chance_score(ids, "previous") == pytest.approx((1 / 3 + 1 / 15) / 2)
    assert heads.chance_score(ids, "induction") == pytest.approx(1 / 14)
    assert heads.chance_score(ids, "song") == pytest.approx(1 / 7)
    assert heads.chance_score(ids, "bracket") == pytest.approx(1 / 10)
    with pytest.raises(ValueError, match="detector: expected one of"):
        heads.chance_score(ids, "mark")
    with pytest.raises(ValueError, match="no 'bracket' pairs"):
        heads.chance_score(corpus.encode("Dog sees cat .ccc")[None], "bracket")


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
