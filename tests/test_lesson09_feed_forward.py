"""Lesson 09's claims, each measured: the feed-forward layer works on each token alone, the
trained model's GELU inputs, its share of a block's parameters, the trained models with and
without it (read from data/variants.json), and what each skill loses when it is taken out of
the three shipped base models.

The shipped models are the variant table's runs (3 seeds); a claim about "every seed" is
checked on each of them. The measured values are the same to the printed digits on the native
(AVX-512) and generic paths; each comment gives what was measured.
"""

import json
from pathlib import Path

import nbformat
import pytest
import torch

from course_lib import corpus, variants
from course_lib.attention import causal_mask
from course_lib.feedforward import gelu_slope, hidden_inputs, sublayer_changes, without_feedforward
from course_lib.train import token_losses
from helpers import lesson_markdown

SEEDS = (0, 1, 2)
NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "09_feed_forward.ipynb"


@pytest.fixture(scope="module")
def models():
    return {seed: variants.load_trained("base", seed) for seed in SEEDS}


@pytest.fixture(scope="module")
def valid():
    return corpus.load_split("valid")


# ---------------------------------------------------------------- one token at a time


@pytest.mark.slow
def test_changing_one_token_moves_the_feed_forward_output_there_only(models, valid, measure):
    # the lesson changes the subject of the first validation line (seed 0's model); here the
    # first five lines and every seed: the feed-forward output moves at position 0 and nowhere
    # else (exactly), attention's at every later position by more than 0.001 (smallest
    # measured 0.0042 on the lesson's line, seed 0)
    cat = corpus.TOKEN_ID["Cat"]
    for seed, model in models.items():
        first = model.blocks[0]
        for row in range(5):
            line = valid[row : row + 1]
            changed = line.clone()
            changed[0, 0] = cat if line[0, 0] != cat else corpus.TOKEN_ID["Dog"]
            with torch.no_grad():
                moved = sublayer_changes(first, model.embed(line), model.embed(changed),
                                         causal_mask(line.shape[1]))  # fmt: skip
            assert moved["feed-forward"][0, 0] > 0.5 and (moved["feed-forward"][0, 1:] == 0).all()
            if (seed, row) == (0, 0):
                smallest = measure(
                    "attention, smallest later change", moved["attention"][0, 1:].min()
                )
                assert smallest > 0.003


# ---------------------------------------------------------------- GELU's inputs


@pytest.mark.slow
def test_about_three_quarters_of_the_gelu_inputs_are_negative_most_still_pass_a_slope(
    models, valid, measure
):
    # measured: 72.9% .. 74.8% negative; of those, 77.7% .. 82.7% with |slope| > 0.05
    for model in models.values():
        for pre in hidden_inputs(model, valid):
            negative = pre < 0
            share = measure("negative share", negative.float().mean())
            alive = measure("alive share", (negative & (gelu_slope(pre).abs() > 0.05)).sum()
                            / negative.sum())  # fmt: skip
            assert 0.70 < share < 0.78 and 0.7 < alive < 0.9


def test_the_feed_forward_layer_holds_two_thirds_of_a_block(models):
    first = models[0].blocks[0]
    total = sum(p.numel() for p in first.parameters())
    ff = sum(p.numel() for p in first.ff.parameters())
    assert (ff, total) == (33_088, 49_984) and f"{ff / total:.0%}" == "66%"
    assert ff == 2 * 64 * 256 + 256 + 64  # 2 D d_ff weights and two biases


# ---------------------------------------------------------------- trained without it


def test_the_trained_rows_say_what_lesson_09_says():
    """The numbers the lesson quotes from data/variants.json."""
    table = json.loads(variants.RESULTS.read_text(encoding="utf-8"))
    excess = {}
    for run in table["runs"]:
        excess.setdefault(run["variant"], []).append(run["valid"])
    objects = [round(s["object"], 3) for s in excess["1-layer-no-feed-forward"]]
    assert sorted(objects) == [1.236, 1.476, 1.749]
    assert round(sum(s["object"] for s in excess["1-layer-heads-4"]) / 3, 3) == 0.005
    assert [round(s["object"], 3) for s in excess["no-feed-forward"]] == [0.019, 0.024, 1.431]
    # with the layer, every seed at two blocks is within 0.0021 of the floor on the object
    assert max(s["object"] for s in excess["base"]) < 0.0021
    rows = {r["name"]: {c["skill"]: c for c in r["claims"]} for r in table["rows"]}
    one, two = rows["the feed-forward layer, at one layer"], rows["the feed-forward layer"]
    assert (round(one["all"]["gap"], 3), round(one["all"]["bar"], 3)) == (0.116, 0.063)
    assert one["all"]["holds"] and not one["object"]["holds"]
    assert (round(one["object"]["gap"], 3), round(one["object"]["bar"], 3)) == (1.482, 1.538)
    assert not two["all"]["holds"] and not two["object"]["holds"]
    # without the layer a model has less than half the parameters
    for full, none in (("1-layer-heads-4", "1-layer-no-feed-forward"), ("base", "no-feed-forward")):
        assert table["parameters"][none] < table["parameters"][full] / 2


# ---------------------------------------------------------------- removed from a trained model


@pytest.fixture(scope="module")
def removed(models, valid):
    out = {"nothing": [], 0: [], 1: []}
    for model in models.values():
        out["nothing"].append(corpus.excess_loss(token_losses(model, valid), "valid"))
        for block in (0, 1):
            with without_feedforward(model, block):
                out[block].append(corpus.excess_loss(token_losses(model, valid), "valid"))
    return out


@pytest.mark.slow
def test_removing_block_1s_layer_breaks_the_object_and_the_mark_not_the_subject(removed):
    # measured: object 1.157 / 1.110 / 1.290, mark 1.295 / 1.066 / 1.718, subject 0.011 /
    # -0.061 / 0.001; intact 0.008 .. 0.012 overall; induction 0.001 intact, 0.704 removed
    intact, gone = removed["nothing"], removed[1]
    assert round(sum(i["mark"] for i in intact) / 3, 3) == 0.045
    assert round(sum(i["induction"] for i in intact) / 3, 3) == 0.001
    assert round(sum(g["induction"] for g in gone) / 3, 3) == 0.704  # "induction rose too"
    assert all(0.008 <= round(r["all"], 3) <= 0.012 for r in intact)
    assert all(g["object"] > g["subject"] + 1 for g in gone)  # on every seed
    assert [round(g["object"], 3) for g in gone] == [1.157, 1.110, 1.290]
    assert [round(g["mark"], 3) for g in gone] == [1.295, 1.066, 1.718]
    assert max(abs(g["subject"]) for g in gone) < 0.062
    assert round(max(i["object"] for i in intact), 3) == 0.002


@pytest.mark.slow
def test_removing_block_0s_layer_breaks_every_skill(removed):
    gone = removed[0]
    means = {s: sum(g[s] for g in gone) / 3 for s in gone[0]}
    assert round(means["all"], 3) == 2.558
    assert min(means.values()) > 1.0  # every skill far above its floor (least: subject 1.439)


@pytest.mark.slow
def test_block_0s_feed_forward_output_is_several_times_the_embeddings(models, valid, measure):
    # measured: 8.5, 7.2, 6.3 times the embeddings (seeds 0, 1, 2); seed 0's sizes are the
    # lesson's 0.13, 0.34 and 1.10
    for model in models.values():
        first = model.blocks[0]
        with torch.no_grad():
            x = model.embed(valid)
            update = first.attn(first.norm1(x), causal_mask(x.shape[1]))
            ff_out = first.ff(first.norm2(x + update))
        size = {name: part.pow(2).mean().sqrt() for name, part in
                (("x", x), ("attn", update), ("ff", ff_out))}  # fmt: skip
        assert measure("FF output / embeddings", size["ff"] / size["x"]) > 4
        # "most of what the stream holds after block 0 was written by it"; measured 1.9 .. 2.3
        assert measure("FF output / (embeddings + attention)",
                       size["ff"] / (size["x"] + size["attn"])) > 1.5  # fmt: skip


def test_without_feedforward_leaves_the_model_as_it_was(models, valid):
    model = models[0]
    ids = valid[:4]
    with torch.no_grad():
        before = model(ids)
        with pytest.raises(RuntimeError), without_feedforward(model, 1):
            raise RuntimeError("the hook must go even when the block fails")
        assert torch.equal(model(ids), before)
    assert not any(m._forward_hooks for m in model.modules())


def test_the_prose_quotes_the_measured_numbers():
    text = lesson_markdown(NOTEBOOK)
    numbers = (
        "1.236 to 1.749", "0.005 with it", "a gap of 0.116 against a bar of 0.063",
        "1.482, is just short of its bar, 1.538", "(0.019 and 0.024 above the floor)", "(1.431)",
        "from 0.002 above its floor to between 1.110 and 1.290", "within 0.061 of its floor",
        "ended 1.066 to 1.718 above its floor, from 0.045", "from 0.001 to 0.704",
        "2.558 nats overall", "within 0.024 nats of the floor",
    )  # fmt: skip
    for quoted in numbers:
        assert quoted in text, quoted


@pytest.mark.slow
def test_the_subject_below_its_floor_is_as_the_prose_says(removed):
    # "Seed 1's subject, and so the mean (-0.016), even ended below it"
    subject = [g["subject"] for g in removed[1]]
    assert [round(s, 3) for s in subject] == [0.011, -0.061, 0.001]
    assert round(sum(subject) / 3, 3) == -0.016
    text = lesson_markdown(NOTEBOOK)
    assert "Seed 1's subject, and so the mean (-0.016), even ended *below* it" in text
    assert "never on average (lesson 03b met this first)" in text


def test_the_object_rule_is_as_the_lesson_says_and_not_linear_in_a_sum():
    """Plural when exactly one noun is; kind moved along by the other's place; either noun
    alone says nothing about the object (so no sum of features with a linear read-out can
    give the number: the exclusive or is not linearly separable)."""
    from course_lib import language

    kinds = language.KINDS
    for s_kind in range(4):
        for s_number in (0, 1):
            objects = set()
            for kind in range(4):
                for number in (0, 1):
                    noun = language.NOUN_FORMS[(s_kind + kind) % 4][s_number ^ number]
                    objects.add(noun)
            assert len(objects) == 8  # every object is possible whatever the subject
    assert kinds == ("dog", "cat", "bird", "fish")
    text = lesson_markdown(NOTEBOOK)
    assert "it is plural when exactly one of the two nouns is" in text
    assert "the object's rule is not a linear function of such a sum" in text


def test_your_layer_takes_the_learners_function_or_says_whose(models):
    from course_lib.exercises.stub import not_written
    from course_lib.feedforward import token_by_token, your_layer

    first = models[0].blocks[0]

    def feed_forward(x, lin1, lin2):
        h = lin1(x)
        return lin2(h * 0.5 * (1 + torch.erf(h / 2**0.5)))

    def stub(x, lin1, lin2):
        raise not_written("feed_forward")

    layer, whose = your_layer(first, feed_forward)
    assert whose == "yours"
    h = torch.randn(2, 5, 64)
    with torch.no_grad():
        torch.testing.assert_close(layer(h), first.ff(h))
        torch.testing.assert_close(token_by_token(layer, h), layer(h))
    layer, whose = your_layer(first, stub)
    assert layer is first.ff and whose == "the course's (yours is not written yet)"


def test_the_prediction_is_read_whatever_its_case_and_spaces(capsys):
    """Issue: "Object" or "object " was judged wrong without a word."""
    cells = nbformat.read(NOTEBOOK, as_version=4).cells
    (source,) = [c.source for c in cells if "my_choice is None" in c.source]
    verdict = source[source.index("if my_choice is None:") :]
    for choice, said in (("Object ", "right."), ("subject", "see below why.")):
        exec(verdict, {"my_choice": choice, "larger": "object"})  # noqa: S102 (the lesson's cell)
        assert capsys.readouterr().out.rstrip().endswith(said), choice
