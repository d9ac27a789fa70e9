"""WindowExplorer (lesson 15a): the mask drawn is the course's, the reach is the mask composed
layer by layer, the readout says L x (W - 1), and the note judges the learner's mask."""

import numpy as np
import pytest
import torch

from course_lib.sliding_window import window_mask
from course_lib.widgets import WindowExplorer
from course_lib.widgets.lesson15a_sliding_window import T
from helpers import picture, set_controls, stub


@pytest.fixture(scope="module")
def explorer():
    return WindowExplorer()


@pytest.mark.parametrize("window", [1, 3, 8, 16])
@pytest.mark.parametrize("layers", [1, 2, 4])
def test_the_reach_grows_by_window_minus_one_a_layer(explorer, window, layers):
    state = set_controls(explorer, window=window, layers=layers, sinks=0, query=T - 1)
    assert np.array_equal(np.asarray(state["mask"]), window_mask(T, window).float().numpy())
    reach = np.asarray(state["reach"])  # (4, T), -1 for the layers not shown
    for layer in range(layers):
        first = int(np.nonzero(reach[layer] == 1)[0].min())
        assert T - 1 - first == min(T - 1, (layer + 1) * (window - 1))
    assert (reach[layers:] == -1).all()
    assert f"L x (W - 1) = {layers * (window - 1)}" in state["readout"]


def test_a_sink_reaches_every_query_directly(explorer):
    state = set_controls(explorer, window=4, layers=1, sinks=1, query=30)
    reach = np.asarray(state["reach"])
    assert reach[0, 0] == 1 and reach[0, 1:27].sum() == 0 and reach[0, 27:31].all()
    assert "the sink (position 0) reaches it directly" in state["readout"]


def test_the_learners_mask_is_drawn_and_judged():
    def wrong(T, window, sinks=0):  # one key too many
        i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
        return (j <= i) & (i - j <= window)

    right = WindowExplorer(mask=lambda T, w, s=0: window_mask(T, w, s))
    assert "agrees with the course's" in right.state()["readout"]
    shown = WindowExplorer(mask=wrong).state()
    assert "DIFFERS" in shown["readout"]
    assert np.asarray(shown["mask"]).sum() > window_mask(T, 8).sum()
    assert "not written yet" in WindowExplorer(mask=stub).state()["readout"]


def test_a_bad_mask_argument_is_named():
    with pytest.raises(TypeError, match="mask: expected your sliding_window_mask"):
        WindowExplorer(mask=3)


def test_each_setting_draws_a_new_picture(explorer):
    before = picture(explorer)
    set_controls(explorer, window=2)
    assert picture(explorer) != before


def test_a_query_near_the_start_says_where_its_reach_stops(explorer):
    state = set_controls(explorer, window=8, layers=4, sinks=0, query=20)
    assert "reaches back 20 positions" in state["readout"]
    assert "it stops at position 0" in state["readout"]
    assert "stops" not in set_controls(explorer, query=T - 1)["readout"]


def test_the_blank_rows_say_why_they_are_blank(explorer):
    set_controls(explorer, window=8, layers=2, sinks=0, query=T - 1)
    assert explorer.blank_note.get_text() == "L = 2: layers 3 to 4 not drawn"
    set_controls(explorer, layers=4)
    assert explorer.blank_note.get_text() == ""
