"""NextTokenExplorer (lesson 01b_loss_and_floor): every position draws the exact and the
model's probabilities of the tokens it names, its readout says what the model pays there
against the floor, and a static page holds every position."""

import math

import pytest
import torch

from course_lib import bigram, corpus, language
from course_lib.widgets import NextTokenExplorer
from course_lib.widgets.base import STATIC_BUDGET
from course_lib.widgets.lesson01b_loss_and_floor import ROWS
from helpers import picture


@pytest.fixture(scope="module")
def explorer(built_explorer):
    return built_explorer(NextTokenExplorer)  # a bigram of the course's pieces, seed 0


def test_it_starts_at_the_mark_of_the_lessons_line(explorer):
    state = explorer.state()
    assert state["values"] == {"position": 16}
    assert explorer.tokens == corpus.to_tokens(corpus.load_split("valid")[2])
    assert state["next"] == ".fff" and state["p"] == 1.0 and state["floor"] == 0.0
    assert state["readout"].startswith("position 16: '.fff' comes next (mark): exact p 1.000")
    assert "where the floor is 0.00" in state["readout"]
    assert repr(explorer) == "NextTokenExplorer(controls: position)"


def test_every_position_draws_both_distributions_of_the_tokens_it_names(explorer):
    start = explorer.values()
    dists, skills = language.next_token_distributions(explorer.tokens)
    try:
        for t in range(len(dists)):
            explorer.controls["position"].value = t
            state = explorer.state()
            tokens = state["tokens"]
            assert len(tokens) == len(set(tokens)) == ROWS
            assert explorer.tokens[t + 1] in tokens  # the line's own next token is shown
            # every token the program may write here is drawn when there is room for it
            likely = sorted(dists[t], key=lambda k: (-dists[t][k], k))[:ROWS]
            assert set(likely) - {explorer.tokens[t + 1]} <= set(tokens)
            assert state["exact"] == [dists[t].get(tok, 0.0) for tok in tokens]
            assert state["drawn_exact"] == pytest.approx(state["exact"])
            assert all(0 < q < 1 for q in state["model"])
            # the readout's numbers: the true token's exact and model probability, the loss
            # each means, and KL(exact || model) >= 0, 0 only where the two agree
            assert state["loss"] == pytest.approx(-math.log(state["q"]))
            assert state["floor"] == pytest.approx(-math.log(state["p"]), abs=1e-12)
            assert state["kl"] >= 0
            assert f"({skills[t]})" in state["readout"]
    finally:
        explorer.controls["position"].value = start["position"]


def test_the_model_matches_the_floor_at_free_choices_and_not_where_a_skill_is_needed(explorer):
    start = explorer.values()
    try:
        seen = {}
        for t in (0, 14, 6, 16):
            explorer.controls["position"].value = t
            seen[t] = explorer.state()["kl"]
        # after 'Birds' and after '[': free choice, which one token tells; the verb and the
        # mark need tokens further back (seed 0: 0.00, 0.00, 2.48, 4.67)
        assert seen[0] < 0.02 and seen[14] < 0.02
        assert seen[6] > 1.5 and seen[16] > 4.0
    finally:
        explorer.controls["position"].value = start["position"]


def test_the_picture_changes_with_the_position(explorer):
    start = explorer.values()
    try:
        before = picture(explorer)
        explorer.controls["position"].value = 6
        assert picture(explorer) != before
        assert "position 6, after" in explorer.ax.get_title()
    finally:
        explorer.controls["position"].value = start["position"]


def test_a_static_page_holds_every_position():
    settings = NextTokenExplorer.settings(_built_quietly())
    assert settings == {"position": list(range(31))}
    assert len(settings["position"]) <= STATIC_BUDGET


def _built_quietly():
    course = bigram.Bigram()  # untrained: enough to list the settings
    return NextTokenExplorer(course, line=0)


def test_the_lessons_model_is_shown_as_given():
    torch.manual_seed(3)
    untrained = bigram.Bigram()
    explorer = NextTokenExplorer(untrained, line=5)
    ids = corpus.load_split("valid")[5:6]
    with torch.no_grad():
        expected = torch.softmax(untrained(ids)[0, :-1].double(), dim=-1)
    assert torch.equal(explorer.model_probs, expected)


def test_building_the_default_model_leaves_the_random_state_alone():
    torch.manual_seed(11)
    before = torch.random.get_rng_state()
    NextTokenExplorer()
    assert torch.equal(torch.random.get_rng_state(), before)


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        ({"line": 400}, ValueError, r"line: expected a line number in \[0, 400\), got 400"),
        ({"line": True}, ValueError, "line: expected a line number"),
        ({"model": "bigram"}, TypeError, "model: expected a callable model, got str"),
    ],
)
def test_bad_arguments_are_named(kwargs, error, words):
    with pytest.raises(error, match=words):
        NextTokenExplorer(**kwargs)
