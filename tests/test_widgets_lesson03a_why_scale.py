"""ScalingExplorer (lesson 03a_why_scale): every control swept end to end, the learner's
softmax_jacobian drawn and compared, the picture naming its setting."""

import base64
import io

import numpy as np
import pytest
import torch
from PIL import Image

from course_lib.exercises.lesson03a_why_scale import softmax_jacobian_reference
from course_lib.saturation import random_scores, typical_jacobian_norm
from course_lib.widgets import ScalingExplorer
from helpers import picture, stub

PNG = b"\x89PNG\r\n\x1a\n"


def right_jacobian(scores):  # a learner's right answer, written another way
    w = scores.softmax(-1)  # (..., T)
    eye = torch.eye(w.shape[-1], dtype=w.dtype)
    return w.unsqueeze(-1) * (eye - w.unsqueeze(-2))  # (..., T, T)


def test_builds_with_no_arguments_and_shows_a_png():
    explorer = ScalingExplorer()
    assert picture(explorer).startswith(PNG)
    bundle = explorer._repr_mimebundle_()
    assert bundle["text/plain"] == "ScalingExplorer(controls: d_k, scale)"
    assert base64.b64decode(bundle["image/png"]).startswith(PNG)
    for control in explorer.controls.values():
        assert getattr(control, "continuous_update", False) is False
    width, _ = Image.open(io.BytesIO(picture(explorer))).size
    assert width <= 880, f"a {width} px picture"


@pytest.mark.parametrize("scale", [True, False])
def test_d_k_sweep(scale):
    explorer = ScalingExplorer()
    explorer.controls["scale"].value = scale
    control = explorer.controls["d_k"]
    pictures, tops, previous = set(), [], None
    for d_k in control.options:
        control.value = d_k
        state = explorer.state()
        grid, hist, (x, size) = state["weights"], state["histogram"], state["marker"]
        assert np.all(np.isfinite(grid)) and np.all(np.isfinite(hist))
        assert np.isclose(hist.sum(), 1.0)
        assert x == d_k and np.isfinite(size) and size > 0
        assert f"d_k = {d_k}" in state["readout"]
        if previous is not None:
            assert not np.allclose(grid, previous["weights"])
            assert not np.allclose(state["marker"], previous["marker"])
        previous = state
        pictures.add(picture(explorer))
        tops.append(state["largest_weight"])
    assert len(pictures) == len(control.options)
    if scale:
        assert max(tops) - min(tops) < 0.15  # weights stay spread at every d_k
    else:
        assert tops[-1] > 0.95 and size < 1e-3 * state["curves"]["unscaled"][2]


def test_the_picture_names_its_setting():
    explorer = ScalingExplorer()
    assert explorer.state()["title"] == "d_k = 64, scaled by 1/sqrt(d_k)"
    before = picture(explorer)
    explorer.controls["scale"].value = False
    explorer.controls["d_k"].value = 1024
    state = explorer.state()
    assert state["title"] == "d_k = 1024, unscaled"
    assert state["readout"].startswith("d_k = 1024, unscaled: largest weight 0.97")
    assert picture(explorer) != before
    assert "d_k = 1024; scale by 1/sqrt(d_k) = off" in explorer._repr_mimebundle_()["text/html"]


def test_toggle_changes_picture_and_emphasis():
    explorer = ScalingExplorer()
    explorer.controls["d_k"].value = 256
    scaled, scaled_picture = explorer.state(), picture(explorer)
    assert scaled["bold"] == "scaled"
    explorer.controls["scale"].value = False
    state = explorer.state()
    assert state["bold"] == "unscaled"
    assert picture(explorer) != scaled_picture
    # scores spread out 16-fold: the histogram's axis (4 std either side) widens to match
    assert np.isclose(state["edges"][-1], 16 * scaled["edges"][-1])
    assert state["marker"][1] < 0.1 * scaled["marker"][1]  # the Jacobian's size drops
    # the marker is computed live and lands on the curve computed at build time
    index = state["curves"]["d_k"].index(256)
    assert np.isclose(state["marker"][1], state["curves"]["unscaled"][index])


@pytest.mark.parametrize("d_k, scale", [(64, True), (1, False), (1024, False)])
def test_histogram_bins_follow_the_spread(d_k, scale):
    explorer = ScalingExplorer()
    explorer.controls["d_k"].value = d_k
    explorer.controls["scale"].value = scale
    state = explorer.state()
    edges, hist = state["edges"], state["histogram"]
    # the axis spans +-4 std (sqrt(d_k) unscaled, 1 scaled), so a real bell shows at every
    # setting: 1024 scores fill more than a dozen bars, none holding a quarter of them
    spread = 1.0 if scale else d_k**0.5
    assert np.isclose(edges[-1], 4 * spread) and np.isclose(edges[0], -4 * spread)
    assert explorer.ax_hist.get_xlim() == (edges[0], edges[-1])
    assert (hist > 0.01).sum() >= 12 and hist.max() < 0.25
    # an independent count: numpy's histogram of the same scores, clipped into the end bins
    scores = random_scores(d_k, scale=scale, n=explorer.n, T=explorer.T, seed=d_k).numpy().ravel()
    counts, _ = np.histogram(np.clip(scores, edges[0], edges[-1]), bins=edges)
    assert np.allclose(hist, counts / counts.sum(), atol=1e-6)


def test_its_curves_are_the_lessons_jacobian_table():
    """At the table's widths the explorer uses the table's random sets (256 of them, seed d_k),
    so the right panel shows cell 14's numbers, 1.4e-06 unscaled at d_k = 1024 among them."""
    curves = ScalingExplorer().state()["curves"]
    for d_k in (1, 4, 16, 64, 256, 1024):
        for name in ("scaled", "unscaled"):
            scores = random_scores(d_k, scale=name == "scaled", seed=d_k)
            expected = typical_jacobian_norm(scores, softmax_jacobian_reference)
            assert curves[name][curves["d_k"].index(d_k)] == pytest.approx(expected, rel=1e-6)
    assert f"{curves['unscaled'][-1]:.2g}" == "1.4e-06"


def test_the_learners_right_jacobian_agrees_and_draws_the_same_marker():
    course, mine = ScalingExplorer(), ScalingExplorer(softmax_jacobian=right_jacobian)
    for explorer in (course, mine):
        explorer.controls["scale"].value = False
    assert mine.state()["marker"] == pytest.approx(course.state()["marker"], rel=1e-5)
    assert (
        "Your softmax_jacobian agrees with the course's at d_k = 64, unscaled"
        in (mine.state()["readout"])
    )


def test_a_wrong_jacobian_is_drawn_and_named():
    def diagonal_only(scores):
        return torch.diag_embed(scores.softmax(-1))

    explorer = ScalingExplorer(softmax_jacobian=diagonal_only)
    readout = explorer.state()["readout"]
    assert "DIFFERS from the course's softmax_jacobian at d_k = 64, scaled by 1/sqrt(d_k)" in (
        readout
    )
    assert "The picture shows yours." in readout


def test_a_stub_or_a_crash_leaves_the_courses_marker_and_says_so():
    course = ScalingExplorer().state()["marker"]
    stubbed = ScalingExplorer(softmax_jacobian=stub).state()
    assert stubbed["marker"] == course
    assert "Your softmax_jacobian is not written yet" in stubbed["readout"]

    def crashes(scores):
        return torch.diag(scores)  # refuses a 3-D tensor

    crashed = ScalingExplorer(softmax_jacobian=crashes).state()
    assert crashed["marker"] == course and "raised RuntimeError" in crashed["readout"]


def test_map_has_a_colour_bar_whose_label_stands_apart_from_the_histogram_label():
    """The colour bar's "attention weight" and the histogram's "share of scores" face each
    other across the gap between the panels: too close, they read as one two-line label."""
    explorer = ScalingExplorer()
    (bar,) = [ax for ax in explorer.fig.axes if ax.get_label() == "<colorbar>"]
    assert bar.get_ylabel() == "attention weight"
    assert explorer.ax_map.get_xlabel() and explorer.ax_map.get_ylabel()
    renderer = explorer.canvas.get_renderer()
    right_of_bar_label = bar.yaxis.label.get_window_extent(renderer).x1
    left_of_hist_label = explorer.ax_hist.yaxis.label.get_window_extent(renderer).x0
    assert left_of_hist_label - right_of_bar_label >= 16
