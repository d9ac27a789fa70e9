"""AttentionExplorer (lesson 01) and ScalingExplorer (lesson 02): every control swept end to end."""

import base64

import numpy as np
import pytest
import torch

from course_lib.attention import causal_mask
from course_lib.widgets import AttentionExplorer, ScalingExplorer
from helpers import picture

PNG = b"\x89PNG\r\n\x1a\n"


def mesh(explorer) -> np.ndarray:
    return np.asarray(explorer.mesh.get_array(), dtype=float).copy()


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


def attention_state(explorer):
    return mesh(explorer), [bar.get_height() for bar in explorer.bars], explorer.row_box.get_y()


def test_attention_explorer_query_moves_bars_and_box_not_the_map():
    explorer = AttentionExplorer()
    control = explorer.controls["query"]
    values = [value for _, value in control.options]
    pictures = set()
    for value in values:
        before = attention_state(explorer)
        control.value = value
        grid, heights, row = attention_state(explorer)
        if value != before[2]:
            assert heights != before[1] and row == value
        assert np.array_equal(grid, before[0])  # same projections, same map
        assert np.allclose(heights, explorer.weights[value].numpy())
        assert np.isclose(sum(heights), 1.0) and all(np.isfinite(heights))
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
        grid = mesh(explorer)
        assert np.all(np.isfinite(grid)) and np.allclose(grid.reshape(9, 9).sum(-1), 1.0)
        grids.append(grid)
        pictures.add(picture(explorer))
    assert len(pictures) == len(values)
    assert all(not np.allclose(a, b) for a, b in zip(grids, grids[1:], strict=False))


def test_attention_explorer_causal_toggle_zeroes_the_future():
    explorer = AttentionExplorer()
    open_grid, open_picture = mesh(explorer).reshape(9, 9), picture(explorer)
    explorer.controls["causal"].value = True
    grid = mesh(explorer).reshape(9, 9)
    assert np.all(grid[~causal_mask(9).numpy()] == 0) and np.allclose(grid.sum(-1), 1.0)
    assert np.any(open_grid[~causal_mask(9).numpy()] > 0.01)
    assert picture(explorer) != open_picture
    explorer.controls["causal"].value = False
    assert np.allclose(mesh(explorer).reshape(9, 9), open_grid)


# ---------------------------------------------------------------- lesson 02


def scaling_state(explorer):
    return (
        mesh(explorer),
        np.asarray(explorer.steps.get_data().values).copy(),
        explorer.marker.get_xydata().copy(),
        explorer.readout.value,
    )


@pytest.mark.parametrize("scale", [True, False])
def test_scaling_explorer_d_k_sweep(scale):
    explorer = ScalingExplorer()
    explorer.controls["scale"].value = scale
    control = explorer.controls["d_k"]
    pictures, tops, previous = set(), [], None
    for d_k in control.options:
        control.value = d_k
        state = scaling_state(explorer)
        grid, hist, marker, readout = state
        assert np.all(np.isfinite(grid)) and np.all(np.isfinite(hist))
        assert np.isclose(hist.sum(), 1.0)
        assert marker[0, 0] == d_k and np.isfinite(marker[0, 1]) and marker[0, 1] > 0
        assert f"d_k = {d_k}" in readout
        if previous is not None:
            assert not np.allclose(grid, previous[0]) and not np.allclose(marker, previous[2])
        previous = state
        pictures.add(picture(explorer))
        tops.append(explorer.weights.amax(-1).mean().item())
    assert len(pictures) == len(control.options)
    if scale:
        assert max(tops) - min(tops) < 0.15  # weights stay spread at every d_k
    else:
        assert tops[-1] > 0.95 and explorer.grad_norm < 1e-3 * explorer.curves[False][2]


def test_scaling_explorer_toggle_changes_picture_and_emphasis():
    explorer = ScalingExplorer()
    explorer.controls["d_k"].value = 256
    scaled_state, scaled_picture = scaling_state(explorer), picture(explorer)
    assert explorer.lines[True].get_linewidth() > explorer.lines[False].get_linewidth()
    explorer.controls["scale"].value = False
    state = scaling_state(explorer)
    assert explorer.lines[False].get_linewidth() > explorer.lines[True].get_linewidth()
    assert picture(explorer) != scaled_picture
    assert not np.allclose(state[1], scaled_state[1])  # scores spread out
    assert state[2][0, 1] < 0.1 * scaled_state[2][0, 1]  # gradient marker drops
    # the marker is computed live and lands on the curve computed at build time
    index = explorer.D_KS.index(256)
    assert np.isclose(state[2][0, 1], explorer.curves[False][index])
    assert torch.isfinite(explorer.weights).all()
