"""Lesson 07's figures draw what they are given: the mean of the seeds with their range shaded,
the trained positions marked, and drifts on log axes without the exact zeros."""

import numpy as np
import pytest
import torch

from course_lib import viz


def test_length_figure_draws_each_mean_and_shades_each_range_in_both_panels():
    runs = torch.tensor([[0.0, 1.0, 3.0], [0.0, 2.0, 5.0]])  # (seeds, positions)
    fig = viz.length_figure({"RoPE": runs, "no positions": runs / 2}, 2, title="setting",
                            zoom=0.5, zoom_to=1)  # fmt: skip
    near, every = fig.axes
    for ax in (near, every):
        lines = {ln.get_label(): ln for ln in ax.lines if not ln.get_label().startswith("_")}
        np.testing.assert_allclose(lines["RoPE"].get_ydata(), [0.0, 1.5, 4.0])
        np.testing.assert_allclose(lines["no positions"].get_ydata(), [0.0, 0.75, 2.0])
        assert lines["RoPE"].get_color() == viz.COLOURS["RoPE"]
        assert len(ax.patches) == 1  # the shaded trained positions, grey, not a curve's colour
    assert len(near.collections) == 2 and len(every.collections) == 3  # bands (+ legend's)
    for ax in (near, every):  # each band's edges: thin lines in its curve's colour and dashes
        edges = [ln for ln in ax.lines if ln.get_linewidth() == 0.7]
        rope_edges = [ln for ln in edges if ln.get_color() == viz.COLOURS["RoPE"]]
        assert len(edges) == 4 and len(rope_edges) == 2
        np.testing.assert_allclose(rope_edges[0].get_ydata(), [0.0, 1.0, 3.0])
        np.testing.assert_allclose(rope_edges[1].get_ydata(), [0.0, 2.0, 5.0])
        assert {ln.get_linestyle() for ln in rope_edges} == {lines_style(near, "RoPE")}
        assert ax.get_ylabel() == "excess loss (nats above the floor)"  # both panels
    assert every.get_title() == "setting" and near.get_ylim() == (-0.02, 0.5)
    assert near.get_xlim() == (-0.5, 1.5)
    (legend,) = fig.legends  # below the panels, naming the trained positions and the bands
    texts = [t.get_text() for t in legend.get_texts()]
    assert texts[0] == "positions 0-0: trained" and texts[-1] == "range of the seeds (shaded)"


def lines_style(ax, label):
    return next(ln.get_linestyle() for ln in ax.lines if ln.get_label() == label)


def test_length_figure_takes_one_run_without_a_band():
    fig = viz.length_figure({"learned positions": torch.tensor([0.0, 1.0])}, 1)
    for ax in fig.axes:
        assert not ax.collections and len(ax.patches) == 1  # the shading only
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "range of the seeds (shaded)" not in texts


def test_drift_figure_leaves_out_exact_zeros_on_its_log_axes():
    fig = viz.drift_figure([1, 10, 100], {"float32": [1e-6, 0.0, 1e-4]}, title="t")
    (line,) = fig.axes[0].lines
    np.testing.assert_allclose(line.get_xdata(), [1, 100])
    assert fig.axes[0].get_xscale() == fig.axes[0].get_yscale() == "log"
    with pytest.raises(ValueError, match="one per shift"):
        viz.drift_figure([1, 10], {"float32": [1e-6]})
