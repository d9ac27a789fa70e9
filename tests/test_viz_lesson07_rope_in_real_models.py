"""Lesson 07's figures draw what they are given: the mean of the seeds with their range shaded,
the trained positions marked, and drifts on log axes without the exact zeros."""

import numpy as np
import pytest
import torch

from course_lib import viz


def test_length_figure_draws_each_mean_and_shades_each_range():
    runs = torch.tensor([[0.0, 1.0, 3.0], [0.0, 2.0, 5.0]])  # (seeds, positions)
    fig = viz.length_figure({"RoPE": runs, "no positions": runs / 2}, 2, title="setting")
    ax = fig.axes[0]
    lines = {line.get_label(): line for line in ax.lines if not line.get_label().startswith("_")}
    np.testing.assert_allclose(lines["RoPE"].get_ydata(), [0.0, 1.5, 4.0])
    np.testing.assert_allclose(lines["no positions"].get_ydata(), [0.0, 0.75, 2.0])
    assert lines["RoPE"].get_color() == viz.COLOURS["RoPE"]
    assert len(ax.collections) == 2  # a band per label
    assert len(ax.patches) == 1  # the shaded trained positions
    assert ax.get_title() == "setting"
    assert any(t.get_text() == "trained\npositions" for t in ax.texts)


def test_length_figure_takes_one_run_without_a_band():
    fig = viz.length_figure({"learned positions": torch.tensor([0.0, 1.0])}, 1)
    assert not fig.axes[0].collections and len(fig.axes[0].patches) == 1  # the shading only


def test_drift_figure_leaves_out_exact_zeros_on_its_log_axes():
    fig = viz.drift_figure([1, 10, 100], {"float32": [1e-6, 0.0, 1e-4]}, title="t")
    (line,) = fig.axes[0].lines
    np.testing.assert_allclose(line.get_xdata(), [1, 100])
    assert fig.axes[0].get_xscale() == fig.axes[0].get_yscale() == "log"
    with pytest.raises(ValueError, match="one per shift"):
        viz.drift_figure([1, 10], {"float32": [1e-6]})
