"""Lesson 06's ablation explorers: AblationExplorer with every control swept, and
KnockoutExplorer, whose every setting shows the knock-out it names."""

import math

import numpy as np
import pytest

from benchmarks.explorers import values_to_visit
from course_lib import ablation, data
from course_lib.model import load_pretrained
from course_lib.widgets import AblationExplorer, KnockoutExplorer
from helpers import picture


@pytest.fixture(scope="module")
def explorer():
    return KnockoutExplorer()


def test_every_setting_shows_its_own_knock_out(explorer):
    e = explorer
    seen = set()
    for mode in ("zero", "mean"):
        e.controls["mode"].value = mode
        for head in ["none", *e.heads]:
            e.controls["head"].value = head
            state = e.state()
            seen.add(picture(e))
            rise = [state["rise"][s] for s in e.skills]
            if head == "none":
                assert state["boxed_rows"] == [] and rise == [0.0] * len(e.skills)
            else:
                row = e.heads.index(head)
                assert state["boxed_rows"] == [row]
                assert list(state["table"][row]) == pytest.approx(rise, abs=1e-6)
                assert f"layer {head[0]}, head {head[1]}" in state["readout"]
            for skill, loss in state["losses"].items():
                assert loss == pytest.approx(state["baseline"][skill] + state["rise"][skill])
            for skill, text in state["samples"].items():
                assert text.startswith(e.PROMPTS[skill])  # the prompt, then 8 sampled tokens
                assert len(text.split()) == len(e.PROMPTS[skill].split()) + e.NUM_TOKENS
    assert len(seen) == 2 * (1 + len(e.heads))  # every picture differs
    e.controls["head"].value = "none"
    e.controls["mode"].value = "zero"


def test_the_numbers_are_the_ablation_modules(explorer):
    ids = data.load_split("valid")[:200]
    model = load_pretrained("rope-h4")
    explorer.controls["head"].value = (0, 0)
    expected = ablation.skill_losses(model, ids, knocked_out=[(0, 0)], skills=ablation.ALL_SKILLS)
    assert explorer.state()["losses"] == pytest.approx(expected, abs=1e-6)
    # what the lesson points at: without layer 0, head 0 the closers are lost
    assert explorer.state()["rise"]["brackets"] > 3.0
    explorer.controls["head"].value = "none"


def test_a_revisited_setting_shows_the_same_picture(explorer):
    explorer.controls["head"].value = (1, 3)
    first = picture(explorer)
    explorer.controls["head"].value = "none"
    explorer.controls["head"].value = (1, 3)
    assert picture(explorer) == first
    explorer.controls["head"].value = "none"


def test_a_setting_is_sampled_and_drawn_when_first_shown(explorer):
    """The explorer draws what ablation.knockout_tables measured (here handed in, not measured
    again); each setting's samples and picture are made on its first showing, not before."""
    e = KnockoutExplorer(tables=explorer.tables)
    assert list(e.samples) == [(None, "zero")] and len(e._pictures) == 1
    e.controls["head"].value = (1, 0)
    assert list(e.samples) == [(None, "zero"), ((1, 0), "zero")] and len(e._pictures) == 2
    explorer.controls["head"].value = (1, 0)
    mine, theirs = e.state(), explorer.state()
    assert mine.keys() == theirs.keys() and picture(e) == picture(explorer)
    for key, value in mine.items():
        assert repr(value) == repr(theirs[key]), key  # the same numbers, arrays included
    explorer.controls["head"].value = "none"


def test_ablation_explorer_draws_the_results_it_is_given():
    """AblationExplorer draws ablation.scale_comparison's results: handed in, the same ones
    give the same picture and numbers without measuring again."""
    e = AblationExplorer()
    given = AblationExplorer(results=e.results)
    assert given.results is e.results
    for scale in (True, False):
        for explorer in (e, given):
            explorer.controls["scale"].value = scale
            explorer.controls["setting"].value = "rope-h2"
        assert picture(given) == picture(e)
        assert repr(given.state()) == repr(e.state())


def test_ablation_explorer_sweeps_every_control():
    e = AblationExplorer()
    for name, control in e.controls.items():
        for value in values_to_visit(control, 8):
            if value == control.value:
                continue
            before, heights = picture(e), e.state()["detector_scores"]
            control.value = value
            state = e.state()
            assert picture(e) != before, (name, value)
            assert all(math.isfinite(h) for h in state["detector_scores"].values())
            assert state["detector_scores"] != heights
            # the bars are each detector's best head in the table beside them
            table = state["table"]
            for i, score in enumerate(state["detector_scores"].values()):
                assert score == pytest.approx(np.nanmax(table[2 * i : 2 * i + 2]))
    # no positions: the previous-token job fails; without the scale, the loss rises
    e.controls["scale"].value = True
    e.controls["setting"].value = "none-h4"
    assert e.state()["detector_scores"]["previous"] < 0.5
    e.controls["setting"].value = "rope-h4"
    with_scale = e.state()["val_loss"]
    e.controls["scale"].value = False
    state = e.state()
    assert state["val_loss"] > with_scale + 0.05 and not state["uses_scale"]
    assert "scale flipped: attention without 1/sqrt(d)" in state["readout"]
    # trained without the scale: as good as with it, sharper heads; flipping it hurts too
    e.controls["setting"].value = "rope-h4-noscale"
    state = e.state()
    assert "attention with 1/sqrt(d)" in state["readout"] and state["uses_scale"]
    flipped_loss = state["val_loss"]
    e.controls["scale"].value = True
    state = e.state()
    assert "trained without the scale: attention without 1/sqrt(d)" in state["readout"]
    assert abs(state["val_loss"] - with_scale) < 0.02
    assert flipped_loss > state["val_loss"] + 0.05
    assert all(h >= 0.95 for h in state["detector_scores"].values())
