"""AttentionExplorer (lesson 02b_attention_in_batches): every control swept end to end, the
learner's function drawn and compared, the setting named in the picture."""

import base64

import numpy as np
import pytest

from course_lib.attention import causal_mask
from course_lib.attention_demos import lesson_line
from course_lib.widgets import AttentionExplorer
from helpers import picture, stub

PNG = b"\x89PNG\r\n\x1a\n"
WORDS = lesson_line()
START = AttentionExplorer.START_QUERY  # the verb, 'eats'


def test_builds_with_no_arguments_and_shows_a_png():
    explorer = AttentionExplorer()
    assert picture(explorer).startswith(PNG)
    bundle = explorer._repr_mimebundle_()
    assert bundle["text/plain"] == "AttentionExplorer(controls: query, width, seed, causal)"
    assert base64.b64decode(bundle["image/png"]).startswith(PNG)
    for control in explorer.controls.values():
        assert getattr(control, "continuous_update", False) is False


def test_the_picture_names_its_setting_and_follows_every_control():
    explorer = AttentionExplorer()
    said = "untrained embedding, random projections: d = 8, projection seed 0, no mask"
    assert explorer.setting_title.get_text() == f"{said}\nweights of the course's attention"
    assert explorer.controls["width"].description == "width d = d_k = d_v"
    explorer.controls["width"].value = 64
    explorer.controls["seed"].value = 3
    explorer.controls["causal"].value = True
    first = explorer.setting_title.get_text().split("\n")[0]
    assert first.endswith("d = 64, projection seed 3, causal mask")
    assert explorer.setting_title in explorer.dynamic  # redrawn on every change
    assert len(explorer.words) == 12 and explorer.words[START] == "eats"
    assert np.prod([len(v) for v in explorer.settings().values()]) == 216


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
        assert f"query {value} '{WORDS[value]}'" in state["readout"]
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
    assert np.all(grid[~causal_mask(12).numpy()] == 0) and np.allclose(grid.sum(-1), 1.0)
    assert np.any(open_grid[~causal_mask(12).numpy()] > 0.01)
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
            title = mine.setting_title.get_text()  # a still picture says it too
            assert title.endswith("weights of your attention, which agrees with the course's")
    assert "agrees" not in course.state()["readout"]  # no learner's function, no note


def test_attention_explorer_draws_a_wrong_function_and_says_where_it_differs():
    wrong = learners_attention(softmax_dim=-2)  # over the queries: columns sum to 1
    explorer = AttentionExplorer(attention=wrong)
    state = explorer.state()
    note = state["readout"].split("\n", 1)[1]
    assert note.startswith("DIFFERS") and "d = 8, seed 0, no mask" in note
    assert explorer.setting_title.get_text().endswith("which DIFFERS from the course's")
    assert f"query {START} 'eats'" in note and "The picture shows yours" in note
    assert np.allclose(state["weights"].sum(axis=0), 1.0)  # the learner's map is drawn
    assert not np.allclose(state["weights"].sum(axis=1), 1.0)
    assert np.allclose(state["bars"], state["weights"][START])
    explorer.controls["query"].value = 2
    assert "query 2 'dogs'" in explorer.state()["readout"].split("\n", 1)[1]


def test_attention_explorer_flags_a_function_that_ignores_the_mask_only_under_the_mask():
    explorer = AttentionExplorer(attention=learners_attention(use_mask=False))
    assert "agrees" in explorer.state()["readout"]
    explorer.controls["causal"].value = True
    note = explorer.state()["readout"].split("\n", 1)[1]
    assert note.startswith("DIFFERS") and "causal mask" in note
    assert np.any(explorer.state()["weights"][~causal_mask(12).numpy()] > 0.01)  # yours, drawn


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
    assert note.startswith("DIFFERS") and "NaN in the rows of queries [11]" in note
    assert np.isnan(explorer.state()["weights"][11]).all()


def test_attention_explorer_with_a_stub_shows_the_courses_picture_and_says_so():
    course = AttentionExplorer()
    explorer = AttentionExplorer(attention=stub)
    state = explorer.state()
    assert "Your attention is not written yet: the picture shows the course's." in state["readout"]
    assert explorer.setting_title.get_text().endswith("the course's attention (yours: see the "
                                                      "line above the picture)")  # fmt: skip
    assert np.array_equal(state["weights"], course.state()["weights"])
    assert state["bars"] == course.state()["bars"]


def test_attention_explorer_reports_a_crash_or_a_wrong_shape_and_keeps_the_courses_picture():
    course = AttentionExplorer().state()["weights"]
    crashing = AttentionExplorer(attention=lambda q, k, v, mask=None: q @ k)  # (12, 8) @ (12, 8)
    assert "raised RuntimeError at d = 8, seed 0, no mask" in crashing.state()["readout"]
    only_output = AttentionExplorer(attention=lambda q, k, v, mask=None: v)  # no weights
    assert "DIFFERS: your attention returned (12, 8)" in only_output.state()["readout"]
    for explorer in (crashing, only_output):
        assert np.array_equal(explorer.state()["weights"], course)


def test_the_colour_scale_spreads_untrained_weights_and_clips_nothing():
    explorer = AttentionExplorer()
    weights = explorer.state()["weights"]
    assert np.quantile(weights, 0.9) < 0.3 and weights.max() < 0.6  # untrained, no mask
    norm = explorer.mesh.norm
    assert (norm.vmin, norm.vmax) == (0.0, 1.0)
    # on the square-root scale, 0.05 and 0.25 lie 0.22 and 0.5 along the colours, not 0.05 and 0.25
    assert np.allclose(norm(np.array([0.05, 0.25, 1.0])), [0.05**0.5, 0.5, 1.0])
    explorer.controls["causal"].value = True
    assert explorer.state()["weights"].max() == 1.0  # row 0 under the mask: still on the scale


def test_attention_explorer_leaves_settings_alone_and_refuses_a_non_function():
    explorer = AttentionExplorer(attention=learners_attention())
    assert explorer.settings() == AttentionExplorer().settings()
    with pytest.raises(TypeError, match="attention: expected your attention function"):
        AttentionExplorer(attention="attention")
