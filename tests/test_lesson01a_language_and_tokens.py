"""Lesson 01a_language_and_tokens's claims, each measured: the exact distributions it shows,
how often one token is possible over the validation split (its prediction), the vocabulary,
and the worked examples of the embedding and the output layer.
"""

from pathlib import Path

import pytest
import torch

from course_lib import corpus, language
from course_lib.exercises.lesson01a_language_and_tokens import (
    output_layer_reference as output_layer,
)
from course_lib.exercises.lesson01a_language_and_tokens import (
    token_embedding_reference as token_embedding,
)
from helpers import lesson_cells, lesson_markdown

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "01a_language_and_tokens.ipynb"


@pytest.fixture(scope="module")
def line():
    return corpus.to_tokens(corpus.load_split("valid")[2])


def _stored(start: str) -> str:
    cells = lesson_cells(NOTEBOOK)
    (cell,) = [c for c in cells if c.cell_type == "code" and c.source.startswith(start)]
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


# ---------------------------------------------------------------- the language


def test_the_lessons_line_asks_for_every_skill_with_the_probabilities_it_says(line):
    dists, _ = language.next_token_distributions(line)
    first = language.first_of_each_skill(line)
    assert list(first) == list(language.SKILLS)  # all seven, in order
    p = {skill: dists[t][line[t + 1]] for skill, t in first.items()}
    # "Three come with probability 1": the copied noun, the object and the mark
    assert [s for s, v in p.items() if v == pytest.approx(1.0)] == ["induction", "object", "mark"]
    assert p["subject"] == pytest.approx(1 / 3) and p["song"] == pytest.approx(1 / 3)
    assert p["bracket"] == pytest.approx(0.5) and p["other"] == pytest.approx(0.5)
    # after '[' each of the eight nouns, 1/8; after 'Birds ... fishes' only birds' plural verbs
    after = dists[line.index("[")]
    assert after == pytest.approx({noun: 1 / 8 for noun in language.NOUNS})
    assert dists[first["subject"]] == pytest.approx({"see": 1 / 3, "chase": 1 / 3, "sing": 1 / 3})


def test_the_vocabulary_is_104_tokens_in_seven_word_classes():
    sizes = {name: len(tokens) for name, tokens in language.WORD_CLASSES.items()}
    assert sizes == {"marks": 64, "subjects": 8, "nouns": 8, "prepositions": 2, "verbs": 10,
                     "syllables": 8, "brackets": 4}  # fmt: skip
    assert sum(sizes.values()) == len(corpus.VOCAB) == 104


def test_the_song_row_says_the_tunes_syllables_are_different():
    # the generator draws each syllable of a tune from those not yet in it
    assert "a tune of two to four different syllables" in lesson_markdown(NOTEBOOK)
    tokens = "Birds near fishes sing fa re fa".split()
    dists, _ = language.next_token_distributions(tokens)  # dists[t]: what follows tokens[t]
    assert "fa" not in dists[4] and len(dists[4]) == 7  # after fa, any syllable but fa
    assert "fa" in dists[5] and "re" not in dists[5]  # the tune comes round, or a new one


# ---------------------------------------------------------------- predict, then measure


def _choices():
    choices, skill_of = [], []
    for row in corpus.load_split("valid"):
        dists, skills = language.next_token_distributions(corpus.to_tokens(row))
        assert all(p > 0 for dist in dists for p in dist.values())  # len(dist): tokens possible
        choices += [len(dist) for dist in dists]
        skill_of += skills
    return choices, skill_of


def test_the_prediction_measures_how_often_one_token_is_possible():
    choices, skill_of = _choices()
    assert len(choices) == 400 * 31
    certain = sum(n == 1 for n in choices) / len(choices)
    assert round(certain, 2) == 0.31 and round(sum(choices) / len(choices), 1) == 3.9
    assert max(choices) == 8
    share = {
        s: sum(n == 1 for n, k in zip(choices, skill_of, strict=True) if k == s) / skill_of.count(s)
        for s in language.SKILLS
    }
    assert share["induction"] == share["object"] == share["mark"] == 1.0
    assert share["subject"] == share["other"] == 0.0
    assert round(share["song"], 2) == 0.67 and round(share["bracket"], 2) == 0.51
    stored = _stored("choices, skill_of = [], []")
    assert "Measured share of predictions with one token possible: 0.31." in stored
    assert "Measured tokens possible on average: 3.9." in stored
    assert "the most tokens possible at one prediction: 8" in stored
    text = lesson_markdown(NOTEBOOK)
    for said in (
        "At 31% of the predictions",
        "two thirds of the song's",
        "half of the bracket's",
        "On average 3.9 of the 104 tokens",
        "never more than eight",
        "at 31% of the predictions, and 3.9 of the 104",
    ):
        assert said in text, said  # fmt: skip


# ---------------------------------------------------------------- the worked examples


def test_the_worked_examples_are_what_the_course_computes():
    E = torch.tensor([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    assert token_embedding(torch.tensor([2, 0]), E).tolist() == [[1.0, 1.0], [1.0, 0.0]]
    W = torch.tensor([[1.0, -1.0], [0.0, 1.0], [2.0, 0.0]])
    logits = output_layer(torch.tensor([1.0, 1.0]), W)
    assert logits.tolist() == [0.0, 1.0, 2.0]
    assert [round(p, 3) for p in torch.softmax(logits, -1).tolist()] == [0.090, 0.245, 0.665]
    assert "(0.090, 0.245, 0.665)" in lesson_markdown(NOTEBOOK)
