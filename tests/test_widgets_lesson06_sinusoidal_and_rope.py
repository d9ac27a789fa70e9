"""PositionExplorer and RopeExplorer (lesson 06): every control swept, the live numbers real."""

import base64
import re

import numpy as np
import pytest
import torch

from course_lib import positional
from course_lib.widgets import PositionExplorer, RopeExplorer
from helpers import picture

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def position():
    return PositionExplorer()


@pytest.fixture(scope="module")
def rope():
    return RopeExplorer()


def test_both_build_with_no_arguments(position, rope):
    for explorer, text in (
        (position, "PositionExplorer(controls: position, width)"),
        (rope, "RopeExplorer(controls: m, n, shift, mode)"),
    ):
        bundle = explorer._repr_mimebundle_()
        assert bundle["text/plain"] == text
        assert base64.b64decode(bundle["image/png"]).startswith(PNG)
        for control in explorer.controls.values():
            assert getattr(control, "continuous_update", False) is False


def check_position(explorer):
    state = explorer.state()
    p, D = state["values"]["position"], state["values"]["width"]
    pe = positional.sinusoidal_encoding(64, D)  # the explorer's T
    np.testing.assert_allclose(state["encoding"], pe[p].numpy(), rtol=1e-6)
    expected = torch.nn.functional.cosine_similarity(pe, pe[p][None], dim=-1)
    ys = state["similarity"]
    assert np.isfinite(ys).all() and np.allclose(ys, expected.numpy(), atol=1e-6)
    assert state["marker"] == (p, pytest.approx(expected[p].item(), abs=1e-6))
    assert len(state["exponents"]) == D // 2 and np.allclose(state["sin"], pe[p, 0::2].numpy())
    assert np.allclose(state["cos"], pe[p, 1::2].numpy())
    assert f"position {p}, D = {D}" in state["readout"]
    assert state["title"] == f"encoding of position {p}, D = {D}"  # a static picture says it
    assert state["similarity_title"].endswith(f"position {p} to every position, D = {D}")


def test_position_explorer_starts_where_the_lesson_says_and_shows_it():
    explorer = PositionExplorer()
    assert explorer.values() == {"position": 20, "width": 8}
    state = explorer.state()
    assert state["title"] == "encoding of position 20, D = 8"
    assert state["similarity_title"] == "similarity of position 20 to every position, D = 8"
    other = PositionExplorer(position=3, width=64)
    assert other.values() == {"position": 3, "width": 64}
    # the similarity axis holds every width's values (all in 0..1 here) at one scale
    low, high = explorer.ax_sim.get_ylim()
    assert low <= 0.0 and high >= 1.0
    for D in PositionExplorer.WIDTHS:
        pe = positional.sinusoidal_encoding(64, D)
        cosines = torch.nn.functional.cosine_similarity(pe[:, None], pe[None], dim=-1)
        assert low <= cosines.min() and cosines.max() <= high
    # the pairs are separate numbers: dots, not a line joining them
    assert explorer.sin_dots.get_linestyle() == "None" == explorer.cos_dots.get_linestyle()


def learner_encoding(first: int = 0, swap: bool = False):
    """A learner's sinusoidal_encoding whose positions start at `first` (0 is right), with
    sin and cos traded when `swap`."""

    def sinusoidal_encoding(seq_len, d_model):
        p = torch.arange(first, first + seq_len, dtype=torch.float32)[:, None]
        angles = p / 10000 ** (torch.arange(0, d_model, 2) / d_model)
        a, b = (angles.cos(), angles.sin()) if swap else (angles.sin(), angles.cos())
        return torch.stack((a, b), dim=-1).flatten(-2)

    return sinusoidal_encoding


def test_a_right_encoding_draws_the_courses_picture_and_says_it_agrees():
    course, mine = PositionExplorer(), PositionExplorer(encoding=learner_encoding())
    for width in (8, 128):
        for explorer in (course, mine):
            explorer.controls["width"].value = width
        ours, theirs = course.state(), mine.state()
        for key in ("encoding", "similarity", "sin", "cos"):
            np.testing.assert_allclose(theirs[key], ours[key], atol=1e-6)
        assert theirs["readout"].endswith(
            f"Your sinusoidal_encoding agrees with the course's at T = 64, D = {width} "
            "(within 0.0001)."
        )
        assert "\n" not in ours["readout"]


def test_a_wrong_encoding_is_drawn_and_flagged_a_stub_is_not():
    mine = PositionExplorer(encoding=learner_encoding(swap=True))
    differs = "DIFFERS from the course's sinusoidal_encoding at T = 64, D = 8"
    assert differs in mine.state()["readout"]
    np.testing.assert_allclose(mine.state()["sin"], PositionExplorer().state()["cos"], atol=1e-6)

    def stub(seq_len, d_model):
        raise NotImplementedError("Exercise sinusoidal_encoding: write your code here")

    unwritten, course = PositionExplorer(encoding=stub), PositionExplorer()
    assert unwritten.state()["readout"].endswith(
        "Your sinusoidal_encoding is not written yet: the picture shows the course's."
    )
    assert picture(unwritten) == picture(course)


def test_position_explorer_sweeps(position):
    pictures = set()
    for width in position.controls["width"].options:
        position.controls["width"].value = width
        for p in (0, 1, 17, 40, 63):
            position.controls["position"].value = p
            check_position(position)
            pictures.add(picture(position))
    assert len(pictures) == 5 * len(position.controls["width"].options)
    position.controls["position"].value = 0
    vector = position.state()["encoding"]
    assert np.allclose(vector[0::2], 0) and np.allclose(vector[1::2], 1)


def check_rope(explorer):
    state = explorer.state()
    v = state["values"]
    m, n, s = v["m"], v["n"], v["shift"]
    for key in ("curve", "reference", "q_pair", "k_pair", "marker"):
        assert np.isfinite(state[key]).all(), key
    assert state["score"] == pytest.approx(explorer.scores(v["mode"], m + s, n + s)[0].item())
    assert state["marker"] == (m - n, pytest.approx(state["score"]))
    i = list(state["offsets"]).index(m - n)
    assert state["curve"][i] == pytest.approx(state["score"], abs=1e-5)
    assert f"offset {m - n}: q . k = {state['score']:.4f}" in state["readout"]
    name = {"rope": "RoPE", "sinusoidal": "sinusoidal added"}[v["mode"]]
    assert state["titles"] == (
        f"{name}: pair 0 of q and k",
        f"circle: m = {m}, n = {n}, shift s = {s}",
    )
    assert picture(explorer).startswith(PNG)
    return state


def test_rope_common_shift_changes_nothing_but_the_arrows(rope):
    rope.controls["mode"].value = "rope"
    rope.controls["m"].value, rope.controls["n"].value = 9, 2
    rope.controls["shift"].value = 0
    base = rope.state()
    pictures = {picture(rope)}
    for s in range(1, 97, 5):
        rope.controls["shift"].value = s
        state = check_rope(rope)
        assert abs(state["score"] - base["score"]) < 1e-5
        assert np.abs(state["curve"] - base["curve"]).max() < 1e-5
        assert np.abs(state["curve"] - state["reference"]).max() < 1e-5
        pictures.add(picture(rope))
    assert len(pictures) > 15  # the arrows turn as the shift moves


def test_rope_offset_changes_the_score(rope):
    rope.controls["mode"].value = "rope"
    rope.controls["shift"].value = 0
    scores = []
    for m in range(0, 32, 3):
        rope.controls["m"].value = m
        scores.append(check_rope(rope)["score"])
    assert len({round(s, 4) for s in scores}) == len(scores)


def test_sinusoidal_mode_changes_under_a_shift(rope):
    rope.controls["mode"].value = "sinusoidal"
    rope.controls["m"].value, rope.controls["n"].value = 9, 2
    rope.controls["shift"].value = 0
    base = rope.state()
    changes = []
    for s in range(1, 97, 5):
        rope.controls["shift"].value = s
        state = check_rope(rope)
        changes.append(abs(state["score"] - base["score"]))
        assert np.abs(state["curve"] - base["curve"]).max() > 0.1
    assert max(changes) > 1.0


@pytest.mark.parametrize("name", ["m", "n", "shift", "mode"])
def test_every_rope_control_sweeps_without_nan(rope, name):
    control = rope.controls[name]
    values = (
        [value for _, value in control.options]
        if hasattr(control, "options")
        else list(range(control.min, control.max + 1, 7)) + [control.max]
    )
    before = picture(rope)
    seen = set()
    for value in values:
        control.value = value
        check_rope(rope)
        seen.add(picture(rope))
    assert len(seen) > 1 and (before in seen or len(seen) == len(values))


def test_rope_explorer_starts_at_the_setting_given_and_fits_each_modes_scores():
    explorer = RopeExplorer(shift=48)
    assert explorer.values() == {"m": 7, "n": 3, "shift": 48, "mode": "rope"}
    keys = torch.arange(0, 128).repeat_interleave(63)
    queries = keys + RopeExplorer.OFFSETS.repeat(128)
    for mode in ("rope", "sinusoidal"):
        explorer.controls["mode"].value = mode
        low, high = explorer.ax_score.get_ylim()
        scores = explorer.scores(mode, queries, keys)
        spread = float(scores.max() - scores.min())
        assert low <= scores.min() and scores.max() <= high  # nothing clipped
        assert high - low < 1.6 * spread  # the differences fill the axis (not +-13 for both)
    explorer.controls["mode"].value = "rope"
    rope_axis = explorer.ax_score.get_ylim()
    explorer.controls["mode"].value = "sinusoidal"
    assert explorer.ax_score.get_ylim() != rope_axis


def test_rope_explorer_legends_name_every_line_and_the_shift_0_line_shows_under_the_other():
    explorer = RopeExplorer()
    labels = [t.get_text() for t in explorer.ax_pair.get_legend().get_texts()]
    assert labels == ["q, before positions", "k, before positions", "q", "k"]
    labels = [t.get_text() for t in explorer.ax_score.get_legend().get_texts()]
    assert labels == ["shift s = 0", "shift s now"]
    # the shift-0 line is wide and pale, the current one dashed and drawn after it
    assert explorer.reference.get_linewidth() > 2 * explorer.curve.get_linewidth()
    assert explorer.curve.get_linestyle() == "--"
    assert explorer.dynamic.index(explorer.reference) < explorer.dynamic.index(explorer.curve)


def test_rope_mode_round_trip_redraws_the_same_picture():
    """The pair title is drawn once per mode and kept: each mode's picture is what a full
    redraw gives, and back in RoPE mode the picture is a fresh explorer's."""
    explorer, fresh = RopeExplorer(), RopeExplorer()
    explorer.controls["mode"].value = "sinusoidal"
    explorer.controls["shift"].value = 40
    assert picture(explorer) != picture(fresh)
    shown = picture(explorer)
    explorer.invalidate()  # a full redraw of the same state draws the same picture
    explorer.redraw()
    assert picture(explorer) == shown
    explorer.controls["mode"].value = "rope"
    explorer.controls["shift"].value = 0
    assert picture(explorer) == picture(fresh)


# ---------------------------------------------------------------- the learner's rope_heads


def learner_rope_heads(first: int):
    """A learner's rope_heads whose positions start at `first` (0 is right)."""

    def rope_heads(x):
        T, d = x.shape[-2:]
        theta = 10000 ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)  # (d/2,)
        angles = torch.arange(first, first + T, dtype=x.dtype)[:, None] * theta  # (T, d/2)
        even, odd = x[..., 0::2], x[..., 1::2]
        turned = (even * angles.cos() - odd * angles.sin(),
                  even * angles.sin() + odd * angles.cos())  # fmt: skip
        return torch.stack(turned, dim=-1).flatten(-2)

    return rope_heads


def note(explorer) -> str:
    readout = explorer.state()["readout"]
    return readout.split("\n", 1)[1] if "\n" in readout else ""


def test_a_right_rope_heads_draws_the_courses_picture_and_says_it_agrees():
    course, mine = RopeExplorer(), RopeExplorer(rope=learner_rope_heads(0))
    for setting in ({"m": 7, "n": 3, "shift": 0}, {"m": 0, "n": 31, "shift": 96}):
        for explorer in (course, mine):
            for name, value in setting.items():
                explorer.controls[name].value = value
        ours, theirs = course.state(), mine.state()
        for key in ("curve", "reference", "q_pair", "k_pair"):
            np.testing.assert_allclose(theirs[key], ours[key], atol=1e-6)
        s = setting
        assert note(mine) == (
            f"Your rope_heads agrees with the course's at m = {s['m']}, n = {s['n']}, "
            f"shift s = {s['shift']} (within 0.0001)."
        )
        assert note(course) == ""


def test_a_wrong_rope_heads_is_drawn_and_flagged_with_the_setting():
    course, mine = RopeExplorer(), RopeExplorer(rope=learner_rope_heads(1))
    assert note(mine).startswith(
        "DIFFERS from the course's rope_heads at m = 7, n = 3, shift s = 0"
    )
    gap = re.search(r"largest difference ([0-9.e+-]+)\. The picture shows yours", note(mine))
    assert gap and float(gap[1]) > 0.1, note(mine)
    # the picture is the learner's: the arrows sit one position further on
    state = mine.state()
    q_at_8 = positional.apply_rope(mine.q[None].double(), torch.tensor([8]))[0, :2]
    np.testing.assert_allclose(state["q_pair"], q_at_8.numpy(), atol=1e-6)
    assert not np.allclose(state["q_pair"], course.state()["q_pair"])
    assert picture(mine) != picture(course)
    mine.controls["shift"].value = 40
    assert note(mine).startswith(
        "DIFFERS from the course's rope_heads at m = 7, n = 3, shift s = 40"
    )
    mine.controls["mode"].value = "sinusoidal"  # the learner's function is not used there
    assert "RoPE picture" in note(mine) and "DIFFERS" not in note(mine)


def test_a_rotate_half_rope_heads_changes_the_score_curve():
    def half(x):
        return positional.apply_rope_half(x, torch.arange(x.shape[-2]))

    course, mine = RopeExplorer(), RopeExplorer(rope=half)
    assert note(mine).startswith("DIFFERS")
    assert np.abs(mine.state()["curve"] - course.state()["curve"]).max() > 0.05


def test_a_stub_shows_the_courses_picture_and_says_it_is_not_written_yet():
    def stub(x):
        raise NotImplementedError("Exercise rope_heads: write your code here")

    course, mine = RopeExplorer(), RopeExplorer(rope=stub)
    assert note(mine) == "Your rope_heads is not written yet: the picture shows the course's."
    assert picture(mine) == picture(course)
    np.testing.assert_array_equal(mine.state()["curve"], course.state()["curve"])


def test_a_rope_heads_that_crashes_or_changes_the_shape_is_reported():
    crashed = RopeExplorer(rope=lambda x: x.unknown())
    assert "raised AttributeError at m = 7, n = 3, shift s = 0" in note(crashed)
    narrowed = RopeExplorer(rope=lambda x: x[..., :4])
    assert note(narrowed).startswith("DIFFERS: your rope_heads returned (2, 35, 4)")
