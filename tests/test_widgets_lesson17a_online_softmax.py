"""TileExplorer (lesson 17a): each setting shows the state after that tile, checked against the
softmax of the keys read so far, and the note judges the learner's online_attention."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from course_lib.widgets import TileExplorer
from course_lib.widgets.lesson17a_online_softmax import HATCH, SCORES
from helpers import picture, set_controls, stub


@pytest.fixture(scope="module")
def explorer():
    return TileExplorer()


@pytest.mark.parametrize("which", ["none", "front"])
@pytest.mark.parametrize("tile", TileExplorer.TILES)
def test_every_step_is_the_softmax_of_the_keys_read_so_far(explorer, tile, which):
    allowed = [which == "none" or j >= 5 for j in range(len(SCORES))]
    v = explorer.v.double()
    tiles = math.ceil(len(SCORES) / tile)
    for step in range(1, explorer.controls["step"].max + 1):
        state = set_controls(explorer, tile=tile, mask=which, step=step)
        stop = min(min(step, tiles) * tile, len(SCORES))
        seen = [s for j, s in enumerate(SCORES[:stop]) if allowed[j]]
        if not seen:  # nothing the query may see: m = -inf, no terms, no output
            assert math.isnan(state["running_max"]) and not any(state["terms"])
            assert "m = -inf" in state["readout"]
            continue
        m = max(seen)
        assert state["running_max"] == pytest.approx(m, abs=1e-6)
        weights = torch.tensor(
            [math.exp(s - m) if allowed[j] else 0.0 for j, s in enumerate(SCORES[:stop])],
            dtype=torch.float64,
        )
        assert state["terms"][:stop] == pytest.approx(weights.tolist(), abs=1e-6)
        assert not any(state["terms"][stop:])
        expected = (weights / weights.sum()) @ v[:stop]
        assert state["output"] == pytest.approx(expected.tolist(), abs=1e-5)
        assert f"l = {float(weights.sum()):.3f}" in state["readout"]
        assert f"tile size {tile}" in state["setting"] and state["setting"] in state["readout"]


def test_the_final_output_is_torchs_attention(explorer):
    for which in ("none", "front"):
        mask = explorer._mask(which)
        expected = F.scaled_dot_product_attention(explorer.q, explorer.k, explorer.v, mask)[0]
        state = set_controls(explorer, tile=5, mask=which, step=1)
        assert state["final"] == pytest.approx(expected.tolist(), abs=1e-5)
    set_controls(explorer, tile=4, mask="none", step=2)


def test_what_the_lesson_says_to_try(explorer):
    before = set_controls(explorer, tile=4, mask="none", step=1)
    after = set_controls(explorer, tile=4, mask="none", step=2)
    # m rises; every earlier term shrinks by one factor; the output moves (here away from the
    # final one: tile 2's keys pull it elsewhere, and tile 3 brings it back)
    assert after["running_max"] > before["running_max"]
    ratios = np.array(after["terms"][:4]) / np.array(before["terms"][:4])
    assert np.allclose(ratios, math.exp(before["running_max"] - after["running_max"]))
    assert np.allclose(after["before"], before["terms"][:4])  # the black lines: the old terms
    assert not np.allclose(after["output"], before["output"], atol=0.05)
    state = set_controls(explorer, tile=3, step=4)  # the last tile's largest score is below m
    assert "earlier terms x 1.000" in state["readout"] and max(SCORES[9:]) < state["running_max"]
    state = set_controls(explorer, tile=4, mask="front", step=1)
    assert "m = -inf" in state["readout"]
    state = set_controls(explorer, tile=12, mask="none", step=1)  # one tile: the plain softmax
    weights = torch.softmax(torch.tensor(SCORES, dtype=torch.float64), dim=0)
    assert state["terms"] == pytest.approx((weights / weights.max()).tolist(), abs=1e-6)
    set_controls(explorer, tile=4, mask="none", step=2)


def test_the_parts_of_the_tiles_are_told_apart_by_more_than_colour(explorer):
    state = set_controls(explorer, tile=4, mask="none", step=2)
    assert state["hatches"] == [HATCH["earlier"]] * 4 + [HATCH["this"]] * 4 + [HATCH["unread"]] * 4
    assert len(set(HATCH.values())) == 3


def test_steps_past_the_last_tile_show_the_last_and_say_so(explorer):
    last = set_controls(explorer, tile=5, step=3)
    beyond = set_controls(explorer, tile=5, step=6)
    assert (
        beyond["output"] == last["output"]
        and "makes 3 tiles: step 6 shows the last" in (beyond["readout"])
    )
    assert "makes 1 tile:" in set_controls(explorer, tile=12, step=2)["readout"]
    set_controls(explorer, tile=4, step=2)


def _attention(q, k, v, mask=None, tile_size=64):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def test_the_learners_function_is_judged_at_each_setting():
    right = TileExplorer(attention=_attention)
    assert (
        "Your online_attention agrees with the course's at tile size 4" in right.state()["readout"]
    )

    def unscaled_by_tile(q, k, v, mask=None, tile_size=64):
        return _attention(q * (2.0 if tile_size == 3 else 1.0), k, v, mask)

    wrong = TileExplorer(attention=unscaled_by_tile)
    assert "agrees" in wrong.state()["readout"]
    wrong.controls["tile"].value = 3
    state = wrong.state()
    assert "DIFFERS from the course's online_attention at tile size 3" in state["readout"]
    assert "The diamonds show yours." in state["readout"]
    yours = unscaled_by_tile(wrong.q, wrong.k, wrong.v, None, 3)[0]
    assert state["final"] == pytest.approx(yours.tolist(), abs=1e-6)
    missing = TileExplorer(attention=stub)
    assert "not written yet" in missing.state()["readout"]
    before = picture(missing)
    missing.controls["step"].value = 3
    assert picture(missing) != before


def test_a_wrong_argument_is_named():
    with pytest.raises(TypeError, match="attention: expected your online_attention function"):
        TileExplorer(attention=3)
