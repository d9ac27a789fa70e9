"""ScalingExplorer (lesson 02): every control swept end to end."""

import base64

import numpy as np
import pytest

from course_lib.widgets import ScalingExplorer
from helpers import picture

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("cls", [ScalingExplorer])
def test_builds_with_no_arguments_and_shows_a_png(cls):
    explorer = cls()
    assert picture(explorer).startswith(PNG)
    bundle = explorer._repr_mimebundle_()
    assert bundle["text/plain"] == f"{cls.__name__}(controls: {', '.join(explorer.controls)})"
    assert base64.b64decode(bundle["image/png"]).startswith(PNG)
    for control in explorer.controls.values():
        assert getattr(control, "continuous_update", False) is False


# ---------------------------------------------------------------- lesson 02


@pytest.mark.parametrize("scale", [True, False])
def test_scaling_explorer_d_k_sweep(scale):
    explorer = ScalingExplorer()
    explorer.controls["scale"].value = scale
    control = explorer.controls["d_k"]
    pictures, tops, previous = set(), [], None
    for d_k in control.options:
        control.value = d_k
        state = explorer.state()
        grid, hist, (x, grad) = state["weights"], state["histogram"], state["marker"]
        assert np.all(np.isfinite(grid)) and np.all(np.isfinite(hist))
        assert np.isclose(hist.sum(), 1.0)
        assert x == d_k and np.isfinite(grad) and grad > 0
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
        assert tops[-1] > 0.95 and grad < 1e-3 * state["curves"]["unscaled"][2]


def test_scaling_explorer_toggle_changes_picture_and_emphasis():
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
    assert state["marker"][1] < 0.1 * scaled["marker"][1]  # gradient marker drops
    # the marker is computed live and lands on the curve computed at build time
    index = state["curves"]["d_k"].index(256)
    assert np.isclose(state["marker"][1], state["curves"]["unscaled"][index])
    assert np.isfinite(state["weights"]).all()


@pytest.mark.parametrize("d_k, scale", [(64, True), (1, False), (1024, False)])
def test_scaling_explorer_histogram_bins_follow_the_spread(d_k, scale):
    explorer = ScalingExplorer()
    explorer.controls["d_k"].value = d_k
    explorer.controls["scale"].value = scale
    state = explorer.state()
    edges, hist = state["edges"], state["histogram"]
    # the axis spans +-4 std (sqrt(d_k) unscaled, 1 scaled), so a real bell shows at every
    # setting: 1024 scores fill more than a dozen bars, none holding a quarter of them (bins
    # 3 wide once left two bars at 0.5 each); d_k = 1 is the most peaked, at 0.22
    spread = 1.0 if scale else d_k**0.5
    assert np.isclose(edges[-1], 4 * spread) and np.isclose(edges[0], -4 * spread)
    assert explorer.ax_hist.get_xlim() == (edges[0], edges[-1])
    assert (hist > 0.01).sum() >= 12 and hist.max() < 0.25
    # an independent count: numpy's histogram of the same scores, clipped into the end bins
    scores = explorer_scores(explorer, d_k, scale)
    counts, _ = np.histogram(np.clip(scores, edges[0], edges[-1]), bins=edges)
    assert np.allclose(hist, counts / counts.sum(), atol=1e-6)


def explorer_scores(explorer, d_k, scale):
    from course_lib.saturation import typical_gradient_norms

    scores = typical_gradient_norms(d_k, scale=scale, T=explorer.T, n=explorer.n, seed=0)[3]
    return scores.numpy().ravel()


def test_scaling_explorer_map_has_a_colour_bar():
    explorer = ScalingExplorer()
    bars = [ax for ax in explorer.fig.axes if ax.get_label() == "<colorbar>"]
    assert len(bars) == 1 and bars[0].get_ylabel() == "attention weight"
    assert explorer.ax_map.get_xlabel() and explorer.ax_map.get_ylabel()


def test_scaling_explorer_colour_bar_label_stands_apart_from_the_histogram_label():
    """The colour bar's "attention weight" and the histogram's "share of scores" face each
    other across the gap between the panels: too close, they read as one two-line label.
    Gap measured: 7 px with constrained layout's default spacing, 24 px with wspace 0.08."""
    explorer = ScalingExplorer()
    renderer = explorer.canvas.get_renderer()
    (bar,) = [ax for ax in explorer.fig.axes if ax.get_label() == "<colorbar>"]
    right_of_bar_label = bar.yaxis.label.get_window_extent(renderer).x1
    left_of_hist_label = explorer.ax_hist.yaxis.label.get_window_extent(renderer).x0
    assert left_of_hist_label - right_of_bar_label >= 16
