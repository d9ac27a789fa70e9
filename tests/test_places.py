"""Lesson 03's three-places task (course_lib.places) and its claim: several heads beat one.

The claim bars were measured on the native, generic and AVX2 kernel paths; each bar's worst
case and margin is written beside it.
"""

import json
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from course_lib import places
from course_lib.model import CHECKPOINT_DIR, ModelConfig, TinyTransformer, load_pretrained
from course_lib.train import RECIPES, places_run
from helpers import built_checkpoint

V = len(places.VOCAB)


def tiny(heads=2):
    return TinyTransformer(V, 16, heads, 32, 1, places.SEQ_LEN).eval()


def test_every_answer_names_the_three_words_before_its_question_mark():
    ids = places.generate(50, seed=7)
    assert ids.shape == (50, places.SEQ_LEN)
    assert torch.equal(ids, places.generate(50, seed=7))  # the seed fixes the text
    checked = 0
    for line in ids.tolist():
        tokens = [places.VOCAB[i] for i in line]
        for t, token in enumerate(tokens):
            if token == "?" and t + 1 < len(tokens):
                assert tokens[t + 1] == "-".join(tokens[t - 3 : t])
                assert all(w in places.WORDS for w in tokens[t - 3 : t])
                checked += 1
    assert checked == 50 * 6  # six whole sentences of five tokens fit in 32, and a cut seventh


def test_question_positions_leave_out_a_question_mark_whose_answer_was_cut():
    ids = torch.tensor([[0, 1, 2, 4, places.TOKEN_ID["dog-cat-bird"], 3, 3, 3, 4]])
    asked = places.question_positions(ids)
    assert asked[0].nonzero().flatten().tolist() == [3]
    with pytest.raises(ValueError, match="name"):
        places.load_split("test")
    with pytest.raises(ValueError, match="num"):
        places.generate(0, seed=1)


def test_task_scores_match_a_direct_computation():
    model, ids = tiny(), places.generate(20, seed=3)
    with torch.no_grad():
        logits = model(ids)
    rows, cols = [], []
    for b, line in enumerate(ids.tolist()):
        for t in range(len(line) - 1):
            if line[t] == places.TOKEN_ID["?"]:
                rows.append(b)
                cols.append(t)
    picked, truth = logits[rows, cols], ids[rows, [c + 1 for c in cols]]
    scores = places.task_scores(model, ids)
    assert scores["answer_loss"] == pytest.approx(float(F.cross_entropy(picked, truth)), rel=1e-5)
    assert scores["accuracy"] == pytest.approx(float((picked.argmax(-1) == truth).float().mean()))


def test_place_scores_are_the_mass_from_question_to_each_word():
    ids = places.generate(10, seed=4)
    weights = [torch.rand(10, 2, places.SEQ_LEN, places.SEQ_LEN) for _ in range(2)]
    scores = places.place_scores(weights, ids)
    assert list(scores) == ["1 back", "2 back", "3 back"]
    for back in (1, 2, 3):
        for layer in range(2):
            for head in range(2):
                values = [
                    float(weights[layer][b, head, t, t - back])
                    for b in range(10)
                    for t in range(places.SEQ_LEN - 1)
                    if ids[b, t] == places.TOKEN_ID["?"]
                ]
                expected = sum(values) / len(values)
                assert float(scores[f"{back} back"][layer, head]) == pytest.approx(expected)


def test_the_recipes_differ_only_in_the_number_of_heads():
    configs = [RECIPES[f"places-h{h}"][0] for h in (1, 2, 4, 8)]
    assert {c.num_heads for c in configs} == {1, 2, 4, 8}
    assert len({(c.d_model, c.d_ff, c.num_layers, c.vocab_size) for c in configs}) == 1
    counts = {sum(p.numel() for p in TinyTransformer.from_config(c).parameters()) for c in configs}
    assert len(counts) == 1  # equal width and equal parameter count


@pytest.fixture(scope="module")
def shipped():
    valid = places.load_split("valid")
    return {h: places.task_scores(load_pretrained(f"places-h{h}"), valid) for h in (1, 2, 4, 8)}


def test_shipped_checkpoints_score_what_their_cards_say(shipped):
    for h, scores in shipped.items():
        card = json.loads((CHECKPOINT_DIR / f"places-h{h}.json").read_text())
        assert scores["accuracy"] == pytest.approx(card["accuracy"], abs=2e-3)
        assert scores["answer_loss"] == pytest.approx(card["answer_loss"], abs=2e-3)


def test_shipped_four_and_eight_heads_beat_one(shipped, measure):
    # measured (seed 0): gap 0.938 for H=4 and for H=8 on the native (AVX-512), generic and
    # AVX2 paths alike (H=1 0.06, H=4 and H=8 1.00); bar 0.5: margin 0.44
    for h in (4, 8):
        gap = measure(f"accuracy H={h} - H=1", shipped[h]["accuracy"] - shipped[1]["accuracy"])
        assert gap > 0.5


def test_the_sweep_file_holds_every_seed_and_its_claim():
    sweep = json.loads((CHECKPOINT_DIR / "places-sweep.json").read_text())
    runs = sweep["runs"]
    assert {(r["heads"], r["seed"]) for r in runs} == {
        (h, s) for h in sweep["heads"] for s in sweep["seeds"]
    }
    assert len(sweep["seeds"]) >= 3

    def mean(h):
        return sum(r["accuracy"] for r in runs if r["heads"] == h) / len(sweep["seeds"])

    # recorded (5 seeds): mean accuracy H=1 0.34, H=2 0.58, H=4 and H=8 1.00; bar 0.4,
    # margin 0.26 (one lucky one-head seed reached 1.00, so the bar is on the means)
    assert mean(4) - mean(1) > 0.4 and mean(8) - mean(1) > 0.4


@pytest.mark.retrains
def test_retrained_four_heads_beat_one(measure):
    """Seed 0 of the shipped recipes, trained again here (~10 s): the code, not only the
    shipped files, gives several heads the win. Over seeds the claim is asserted on the sweep
    file above (seeds 0-4); retraining seeds 0-2 here gave gaps 0.971 native (AVX-512), 0.977
    generic, 0.971 AVX2, with H = 1 near 0.03 and H = 4 at 1.00 on each path, seed 0 included
    (H = 1: 0.06). Bar 0.5: margin above 0.4 on every path."""
    accuracy = {}
    for h in (1, 4):
        model_config, train_config = RECIPES[f"places-h{h}"]
        accuracy[h] = places_run(model_config, replace(train_config, seed=0))[1]["accuracy"]
    gap = measure("accuracy H=4 - H=1, seed 0", accuracy[4] - accuracy[1])
    assert gap > 0.5


def test_model_config_round_trips():
    config = ModelConfig(**json.loads((CHECKPOINT_DIR / "places-h2.json").read_text())["config"])
    assert config == RECIPES["places-h2"][0]


def test_build_checkpoint_writes_a_places_card(tmp_path, monkeypatch):
    from course_lib import train

    config = ModelConfig(V, d_model=16, num_heads=2, d_ff=32, num_layers=1, max_len=32)
    quick = train.TrainConfig(steps=4, batch_size=4, eval_every=2)
    card, model = built_checkpoint("places-h2", config, quick, tmp_path, monkeypatch)
    assert [step for step, _ in card["accuracy_by_step"]] == [2, 4]
    assert set(card["detectors"]) == {"1 back", "2 back", "3 back"}
    assert 0 <= card["accuracy"] <= 1 and card["parameters"] == sum(
        p.numel() for p in model.parameters()
    )
