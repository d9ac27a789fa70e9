"""ActivationExplorer (lesson 09): torch's GELU and ReLU, value and slope at every setting; GELU
drawn through a learner's feed_forward when it agrees, flagged when not, the course's while it
is a stub; the title names the input drawn."""

import math
import re

import pytest
import torch
import torch.nn.functional as F

from course_lib.widgets import ActivationExplorer
from helpers import picture

PNG = b"\x89PNG\r\n\x1a\n"


def gelu_by_hand(x, lin1, lin2):  # the lesson's feed_forward, written another way
    h = lin1(x)
    return lin2(h * torch.special.ndtr(h))


def check_torchs_curves(explorer):
    control = explorer.controls["x"]
    pictures = set()
    for x0 in explorer.settings()["x"]:
        control.value = x0
        state = explorer.state()
        x = torch.tensor([x0], dtype=torch.float64, requires_grad=True)
        for name, fn in (("GELU", F.gelu), ("ReLU", F.relu)):
            (slope,) = torch.autograd.grad(fn(x).sum(), x)
            expected = (fn(x).item(), slope.item())
            assert state["numbers"][name] == pytest.approx(expected, abs=1e-5), (name, x0)
            assert state["drawn"][name] == pytest.approx(expected, abs=1e-5), (name, x0)
        assert f"x = {x0:g}:" in state["readout"]
        assert explorer.title.get_text() == f"the activation at x = {x0:g} (dotted: its tangent)"
        pictures.add(picture(explorer))
    assert len(pictures) == len(explorer.settings()["x"])  # every setting its own picture
    control.value = -0.5
    # the lesson's point: at a negative input GELU still passes a slope, ReLU passes none
    numbers = explorer.state()["numbers"]
    assert numbers["ReLU"][1] == 0 and numbers["GELU"][1] > 0.1


def test_activation_explorer_draws_torchs_gelu_and_relu_and_their_slopes():
    explorer = ActivationExplorer()
    control = explorer.controls["x"]
    assert control.continuous_update is False and (control.min, control.max) == (-4.0, 4.0)
    assert explorer.state()["drawn_from"] == "torch"
    assert picture(explorer).startswith(PNG)
    check_torchs_curves(explorer)


def test_a_right_feed_forward_draws_gelu_and_agrees():
    explorer = ActivationExplorer(feed_forward=gelu_by_hand)
    state = explorer.state()
    assert state["drawn_from"] == "yours"
    assert "gelu_by_hand agrees with the course's" in state["readout"]
    assert "GELU (your feed_forward)" in [
        t.get_text() for t in explorer.ax_value.get_legend().texts
    ]
    check_torchs_curves(explorer)


def test_a_wrong_feed_forward_is_drawn_and_flagged():
    def relu_layer(x, lin1, lin2):  # a learner's ReLU where GELU belongs
        return lin2(torch.relu(lin1(x)))

    explorer = ActivationExplorer(feed_forward=relu_layer)
    state = explorer.state()
    assert state["drawn_from"] == "yours"
    note = state["readout"].splitlines()[-1]
    assert note.startswith("DIFFERS from the course's relu_layer")
    gap = float(re.search(r"largest difference (\S+?)\. ", note).group(1))
    # values and slopes are compared: at x = 0 ReLU's slope is 0 (torch's choice), GELU's 0.5
    assert gap == pytest.approx(0.5, abs=1e-6)
    explorer.controls["x"].value = -1.0
    assert explorer.state()["numbers"]["GELU"] == (0.0, 0.0)  # the learner's curve, drawn


def test_a_stub_or_a_failing_feed_forward_shows_torchs_gelu_and_says_why():
    def feed_forward(x, lin1, lin2):
        raise NotImplementedError("Exercise: write your code here")

    def detached(x, lin1, lin2):
        return gelu_by_hand(x, lin1, lin2).detach()

    state = ActivationExplorer(feed_forward=feed_forward).state()
    assert state["drawn_from"] == "torch" and "not written yet" in state["readout"]
    state = ActivationExplorer(feed_forward=detached).state()
    assert state["drawn_from"] == "torch" and "raised RuntimeError" in state["readout"]
    with pytest.raises(TypeError, match="feed_forward: expected a function"):
        ActivationExplorer(feed_forward="feed_forward")


def test_the_curves_grid_holds_every_slider_position():
    explorer_cls = ActivationExplorer
    steps = round(2 * explorer_cls.LIMIT / explorer_cls.STEP)
    for i in range(-16, 17):
        x0 = i * 0.25
        at = (x0 + explorer_cls.LIMIT) / explorer_cls.STEP
        assert at == pytest.approx(round(at)) and 0 <= round(at) <= steps
    assert math.isclose(-explorer_cls.LIMIT + steps * explorer_cls.STEP, explorer_cls.LIMIT)


def test_the_enlarged_view_shows_gelus_dip_and_the_chosen_x_has_a_legend_key():
    """Issue: on an axis reaching 4, GELU's dip (at least -0.17) took 4% of the height."""
    explorer = ActivationExplorer()
    low, high = explorer.ax_zoom.get_ylim()
    assert 0.17 / (high - low) > 0.2 and low < -0.17  # the dip fills a fifth and more
    left, right = explorer.ax_zoom.get_xlim()
    assert left <= -0.752 <= right  # GELU's lowest point lies in view
    explorer.controls["x"].value = -1.0
    assert explorer.zoom_points["GELU"].get_ydata()[0] == explorer.state()["numbers"]["GELU"][0]
    labels = [t.get_text() for t in explorer.ax_slope.get_legend().texts]
    assert "the chosen x" in labels
