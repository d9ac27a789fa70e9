"""BlockExplorer (lesson 08): every control swept end to end; the live numbers are the real ones;
the legend names the setting drawn; a learner's block function drawn when it agrees, flagged
(DIFFERS, setting, how far) when not."""

import base64
import re

import numpy as np
import pytest
import torch
from matplotlib.colors import same_color

from course_lib import viz
from course_lib.deep_stack import build_stack, stack_profile
from course_lib.widgets import BlockExplorer
from helpers import picture

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def explorer():
    return BlockExplorer()


def lines(explorer):
    state = explorer.state()
    return state["layers"], state["grad_line"], state["scale_line"]


def check_state(explorer):
    state = explorer.state()
    depth = state["values"]["depth"]
    assert state["grad_norms"].shape == (depth,) and state["act_scales"].shape == (depth,)
    assert np.isfinite(state["grad_norms"]).all() and np.isfinite(state["act_scales"]).all()
    assert state["layers"] == list(range(1, depth + 1))
    assert np.isfinite(state["grad_line"]).all() and np.isfinite(state["scale_line"]).all()
    assert picture(explorer).startswith(PNG)
    assert f"{depth} block(s)" in state["readout"]


def test_builds_with_no_arguments_and_shows_a_png(explorer):
    assert picture(explorer).startswith(PNG)
    bundle = explorer._repr_mimebundle_()
    assert bundle["text/plain"] == "BlockExplorer(controls: depth, residual, norm, prenorm)"
    assert base64.b64decode(bundle["image/png"]).startswith(PNG)
    assert explorer.controls["depth"].min == 1 and explorer.controls["depth"].max == 48
    assert explorer.controls["depth"].continuous_update is False
    check_state(explorer)


def test_depth_sweeps_1_to_48_every_step_redraws(explorer):
    control = explorer.controls["depth"]
    pictures, previous = set(), lines(explorer)
    for depth in [*range(1, 49), 24]:
        control.value = depth
        check_state(explorer)
        now = lines(explorer)
        if depth != 24 or len(previous[0]) != 24:
            assert len(now[0]) != len(previous[0]) or not np.array_equal(now[1], previous[1])
        pictures.add(picture(explorer))
        previous = now
    assert len(pictures) == 48


@pytest.mark.parametrize(
    "name,values",
    [
        ("residual", [False, True]),
        ("norm", ["batch", "none", "layer"]),
        ("prenorm", [False, True]),
    ],
)
@pytest.mark.parametrize("depth", [1, 24, 48])
def test_each_switch_changes_the_figure(explorer, name, values, depth):
    explorer.controls["depth"].value = depth
    for value in values:
        before_picture, before = picture(explorer), lines(explorer)
        explorer.controls[name].value = value
        check_state(explorer)
        after = lines(explorer)
        # with no norm, pre and post placement are the same network: same numbers, new marker
        same_network = name == "prenorm" and explorer.values()["norm"] == "none"
        assert picture(explorer) != before_picture, (name, value, depth)
        if not same_network:
            assert not (np.array_equal(after[1], before[1]) and np.array_equal(after[2], before[2]))


def test_every_combination_matches_a_fresh_stack_profile(explorer):
    # the explorer reuses one 48-block forward pass per setting; a fresh stack of the chosen
    # depth, run from scratch, must give the same numbers (its input and probe: seed 0)
    g = torch.Generator().manual_seed(0)
    x, probe = torch.randn(2, 8, 16, generator=g), torch.randn(2, 8, 16, generator=g)
    for norm in ("layer", "batch", "none"):
        for prenorm in (True, False):
            for residual in (True, False):
                for depth in (3, 48):
                    explorer.controls["depth"].value = depth
                    explorer.controls["norm"].value = norm
                    explorer.controls["prenorm"].value = prenorm
                    explorer.controls["residual"].value = residual
                    fresh = stack_profile(
                        build_stack(
                            depth, 16, 2, 64, norm=norm, prenorm=prenorm, residual=residual
                        ),
                        x,
                        probe,
                    )
                    state = explorer.state()
                    np.testing.assert_allclose(
                        state["grad_norms"], fresh.grad_norms.numpy(), rtol=1e-4, atol=0
                    )
                    np.testing.assert_allclose(
                        state["act_scales"], fresh.act_scales.numpy(), rtol=1.3e-6, atol=1e-5
                    )


def test_values_off_the_axis_are_pinned_and_marked(explorer):
    explorer.controls["norm"].value = "none"
    explorer.controls["residual"].value = False
    explorer.controls["depth"].value = 48
    state = explorer.state()
    assert len(state["grad_pinned_below"]) > 10  # the gradient falls far below 1e-10
    assert state["grad_norms"][0] < 1e-10 and 1 in state["grad_pinned_below"]
    # the triangles are the line's own colour (as in viz.depth_profile_figure), not a fourth one
    style = state["style"]
    assert len(style["pinned_colors"]) == 4
    assert all(same_color(c, viz.COLOURS["no norm"]) for c in style["pinned_colors"])
    explorer.controls["norm"].value = "batch"
    assert all(
        same_color(c, viz.COLOURS["batch norm"]) for c in explorer.state()["style"]["pinned_colors"]
    )
    explorer.controls["norm"].value = "none"
    explorer.controls["residual"].value = True
    assert explorer.state()["grad_pinned_below"] == []


# ---------------------------------------------------------------- BlockExplorer(block=...)


def course_block(x, attn, ff, norm1, norm2):  # the lesson's prenorm_block, written out
    h = x + attn(norm1(x))
    return h + ff(norm2(h))


def postnorm_order(x, attn, ff, norm1, norm2):  # a learner's mistake: the 2017 order
    h = norm1(x + attn(x))
    return norm2(h + ff(h))


def test_a_right_block_function_is_drawn_and_agrees():
    explorer = BlockExplorer(block=course_block)
    course = BlockExplorer()
    for norm in ("layer", "batch", "none"):
        for ex in (explorer, course):
            ex.controls["norm"].value = norm
            ex.controls["depth"].value = 12
        state = explorer.state()
        assert state["drawn_from"] == "yours"
        assert "course_block agrees with the course's at depth 12" in state["readout"]
        assert "DIFFERS" not in state["readout"]
        np.testing.assert_allclose(state["grad_norms"], course.state()["grad_norms"], rtol=1e-5)


def test_a_wrong_block_function_differs_names_the_setting_and_is_drawn():
    explorer = BlockExplorer(block=postnorm_order)
    course = BlockExplorer()
    explorer.controls["depth"].value = course.controls["depth"].value = 8
    state = explorer.state()
    note = state["readout"].splitlines()[-1]
    assert note.startswith("DIFFERS")
    assert "depth 8, layer norm, pre-norm, residual on" in note
    gap = float(re.search(r"largest difference (\S+?)\. ", note).group(1))
    assert gap > 1  # the post-norm stream is normalised, the pre-norm one grows
    assert state["drawn_from"] == "yours"
    # the picture is the learner's stack: post-norm pins every layer's RMS at 1
    np.testing.assert_allclose(state["act_scales"], 1.0, rtol=1e-4)
    assert not np.allclose(course.state()["act_scales"], 1.0, rtol=1e-2)
    # the settings it cannot compute show the course's blocks and say so
    explorer.controls["residual"].value = False
    state = explorer.state()
    assert state["drawn_from"] == "course" and "shows the course's blocks" in state["readout"]


def test_a_stub_shows_the_course_picture_and_says_not_written_yet():
    def prenorm_block(x, attn, ff, norm1, norm2):
        raise NotImplementedError("Exercise: write your code here")

    explorer = BlockExplorer(block=prenorm_block)
    course = BlockExplorer()
    for name, value in (("depth", 5), ("prenorm", False), ("prenorm", True)):
        explorer.controls[name].value = course.controls[name].value = value
        state = explorer.state()
        assert state["drawn_from"] == "course"
        assert "Your prenorm_block is not written yet" in state["readout"]
        np.testing.assert_array_equal(state["grad_norms"], course.state()["grad_norms"])
    assert picture(explorer).startswith(PNG)


def test_a_block_function_that_fails_or_detaches_falls_back_to_the_course_picture():
    def crashes(x, attn, ff, norm1, norm2):
        return x + attn(norm1(x), "mask")

    def detached(x, attn, ff, norm1, norm2):
        return course_block(x, attn, ff, norm1, norm2).detach()

    state = BlockExplorer(block=crashes).state()
    assert state["drawn_from"] == "course" and "raised" in state["readout"]
    state = BlockExplorer(block=detached).state()
    assert state["drawn_from"] == "course" and "no gradient" in state["readout"]


def test_the_legend_names_the_setting_drawn_and_whose_blocks_draw_it():
    # issue 25: lesson 05's stored explorer picture had no legend; the picture now says what
    # it shows, in the legend's text and in its key's look, which follows the line's
    explorer = BlockExplorer(block=course_block)
    for depth, norm, prenorm, residual, whose in (
        (24, "layer", True, True, "your course_block (agrees with the course's)"),
        (7, "batch", False, True, "the course's blocks"),
        (48, "none", True, False, "the course's blocks"),
    ):
        explorer.controls["depth"].value = depth
        explorer.controls["norm"].value = norm
        explorer.controls["prenorm"].value = prenorm
        explorer.controls["residual"].value = residual
        label = dict((n, lab) for lab, n in BlockExplorer.NORMS)[norm]
        place = "pre" if prenorm else "post"
        text = explorer.legend.get_texts()[0].get_text()
        grads = explorer.state()["grad_norms"]
        assert text == (
            f"{depth} block(s), {place}-norm, {label}, residual {'on' if residual else 'off'}: "
            f"{whose}\ngradient at block 1 / at block {depth}: {grads[0] / grads[-1]:.3g}"
        )
        # the x axis runs to the depth drawn, not to 48
        assert explorer.ax_grad.get_xlim() == explorer.ax_scale.get_xlim() == (0.5, depth + 0.5)
        key, line = explorer.legend.legend_handles[0], explorer.artists["grad"][0]
        assert same_color(key.get_color(), line.get_color())
        assert key.get_linestyle() == line.get_linestyle()
        assert key.get_marker() == line.get_marker()
        assert key.get_markerfacecolor() == line.get_markerfacecolor()
        assert explorer.describe().split(". ", 1)[1].startswith(text.split(":")[0])  # readout
    assert explorer.legend in explorer.dynamic  # redrawn with every change


def test_block_must_be_a_function():
    with pytest.raises(TypeError, match="block: expected a function"):
        BlockExplorer(block="prenorm_block")


def test_a_differing_block_says_so_in_the_stored_picture():
    def scaled(x, attn, ff, norm1, norm2):
        return 1.5 * course_block(x, attn, ff, norm1, norm2)

    explorer = BlockExplorer(block=scaled)
    text = explorer.legend.get_texts()[0].get_text()
    assert "your scaled (DIFFERS from the course's)" in text


def test_post_norm_at_48_blocks_hands_block_1_less_than_the_top():
    # the lesson's thing to try: depth 48, residual on, layer norm; pre-norm 2.47, post 0.408
    explorer = BlockExplorer()
    explorer.controls["depth"].value = 48
    ratios = {}
    for prenorm in (True, False):
        explorer.controls["prenorm"].value = prenorm
        grads = explorer.state()["grad_norms"]
        ratios[prenorm] = grads[0] / grads[-1]
    assert ratios[True] > 1 > ratios[False]
