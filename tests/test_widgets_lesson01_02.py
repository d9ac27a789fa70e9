"""AttentionExplorer (lesson 01) and ScalingExplorer (lesson 02): every control swept end to end."""

import base64

import numpy as np
import pytest

from course_lib.attention import causal_mask
from course_lib.widgets import TOY_SENTENCE, AttentionExplorer, ScalingExplorer
from helpers import picture, stub

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("cls", [AttentionExplorer, ScalingExplorer])
def test_builds_with_no_arguments_and_shows_a_png(cls):
    explorer = cls()
    assert picture(explorer).startswith(PNG)
    bundle = explorer._repr_mimebundle_()
    assert bundle["text/plain"] == f"{cls.__name__}(controls: {', '.join(explorer.controls)})"
    assert base64.b64decode(bundle["image/png"]).startswith(PNG)
    for control in explorer.controls.values():
        assert getattr(control, "continuous_update", False) is False


# ---------------------------------------------------------------- lesson 01


def test_attention_explorer_query_moves_bars_and_box_not_the_map():
    explorer = AttentionExplorer()
    control = explorer.controls["query"]
    values = [value for _, value in control.options]
    pictures = set()
    for value in values:
        before = explorer.state()
        control.value = value
        state = explorer.state()
        heights, row = state["bars"], state["outlined_row"]
        if value != before["outlined_row"]:
            assert heights != before["bars"] and row == value
        assert np.array_equal(state["weights"], before["weights"])  # same projections, same map
        assert np.allclose(heights, state["weights"][value])
        assert np.isclose(sum(heights), 1.0) and all(np.isfinite(heights))
        assert f"query {value} '{TOY_SENTENCE[value]}'" in state["readout"]
        pictures.add(picture(explorer))
    assert len(pictures) == len(values)


@pytest.mark.parametrize("name", ["width", "seed"])
def test_attention_explorer_projection_controls_change_the_map(name):
    explorer = AttentionExplorer()
    control = explorer.controls[name]
    values = list(control.options) if name == "width" else range(control.min, control.max + 1)
    pictures, grids = set(), []
    for value in values:
        control.value = value
        grid = explorer.state()["weights"]
        assert np.all(np.isfinite(grid)) and np.allclose(grid.sum(-1), 1.0)
        grids.append(grid)
        pictures.add(picture(explorer))
    assert len(pictures) == len(values)
    assert all(not np.allclose(a, b) for a, b in zip(grids, grids[1:], strict=False))


def test_attention_explorer_causal_toggle_zeroes_the_future():
    explorer = AttentionExplorer()
    open_grid, open_picture = explorer.state()["weights"], picture(explorer)
    explorer.controls["causal"].value = True
    grid = explorer.state()["weights"]
    assert np.all(grid[~causal_mask(9).numpy()] == 0) and np.allclose(grid.sum(-1), 1.0)
    assert np.any(open_grid[~causal_mask(9).numpy()] > 0.01)
    assert picture(explorer) != open_picture
    assert "causal mask" in explorer.state()["readout"]
    explorer.controls["causal"].value = False
    assert np.allclose(explorer.state()["weights"], open_grid)


def learners_attention(softmax_dim=-1, use_mask=True):
    def attention(q, k, v, mask=None):
        scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5  # (..., T_q, T_k)
        if mask is not None and use_mask:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(dim=softmax_dim)
        return weights @ v, weights

    return attention


def test_attention_explorer_with_the_learners_right_function_agrees_everywhere():
    course = AttentionExplorer()
    mine = AttentionExplorer(attention=learners_attention())
    for causal in (False, True):
        for width in (1, 8, 64):
            for explorer in (course, mine):
                explorer.controls["causal"].value = causal
                explorer.controls["width"].value = width
            state = mine.state()
            assert np.allclose(state["weights"], course.state()["weights"], atol=1e-6)
            said = "causal mask" if causal else "no mask"
            assert (
                f"Your attention agrees with the course's at d = {width}, seed 0, {said}"
                in (state["readout"])
            )
    assert "agrees" not in course.state()["readout"]  # no learner's function, no note


def test_attention_explorer_draws_a_wrong_function_and_says_where_it_differs():
    wrong = learners_attention(softmax_dim=-2)  # over the queries: columns sum to 1
    explorer = AttentionExplorer(attention=wrong)
    state = explorer.state()
    note = state["readout"].split("\n", 1)[1]
    assert note.startswith("DIFFERS") and "d = 8, seed 0, no mask" in note
    assert "query 6 'it'" in note and "The picture shows yours" in note
    assert np.allclose(state["weights"].sum(axis=0), 1.0)  # the learner's map is drawn
    assert not np.allclose(state["weights"].sum(axis=1), 1.0)
    assert np.allclose(state["bars"], state["weights"][6])
    explorer.controls["query"].value = 2
    assert "query 2 'chased'" in explorer.state()["readout"].split("\n", 1)[1]


def test_attention_explorer_flags_a_function_that_ignores_the_mask_only_under_the_mask():
    explorer = AttentionExplorer(attention=learners_attention(use_mask=False))
    assert "agrees" in explorer.state()["readout"]
    explorer.controls["causal"].value = True
    note = explorer.state()["readout"].split("\n", 1)[1]
    assert note.startswith("DIFFERS") and "causal mask" in note
    assert np.any(explorer.state()["weights"][~causal_mask(9).numpy()] > 0.01)  # yours, drawn


def test_attention_explorer_names_the_rows_an_inverted_mask_turns_to_nan():
    def inverted(q, k, v, mask=None):
        scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))  # blocks the allowed keys
        weights = scores.softmax(dim=-1)
        return weights @ v, weights

    explorer = AttentionExplorer(attention=inverted)
    explorer.controls["causal"].value = True
    note = explorer.state()["readout"].split("\n", 1)[1]
    # the last query may see every key, so the inverted mask blocks them all: 0/0
    assert note.startswith("DIFFERS") and "NaN in the rows of queries [8]" in note
    assert np.isnan(explorer.state()["weights"][8]).all()


def test_attention_explorer_with_a_stub_shows_the_courses_picture_and_says_so():
    course = AttentionExplorer()
    explorer = AttentionExplorer(attention=stub)
    state = explorer.state()
    assert "Your attention is not written yet: the picture shows the course's." in state["readout"]
    assert np.array_equal(state["weights"], course.state()["weights"])
    assert picture(explorer) == picture(course)


def test_attention_explorer_reports_a_crash_or_a_wrong_shape_and_keeps_the_courses_picture():
    course = AttentionExplorer().state()["weights"]
    crashing = AttentionExplorer(attention=lambda q, k, v, mask=None: q @ k)  # (9, 8) @ (9, 8)
    assert "raised RuntimeError at d = 8, seed 0, no mask" in crashing.state()["readout"]
    only_output = AttentionExplorer(attention=lambda q, k, v, mask=None: v)  # no weights
    assert "DIFFERS: your attention returned (9, 8)" in only_output.state()["readout"]
    for explorer in (crashing, only_output):
        assert np.array_equal(explorer.state()["weights"], course)


def test_attention_explorer_leaves_settings_alone_and_refuses_a_non_function():
    explorer = AttentionExplorer(attention=learners_attention())
    assert explorer.settings() == AttentionExplorer().settings()
    with pytest.raises(TypeError, match="attention: expected your attention function"):
        AttentionExplorer(attention="attention")


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
