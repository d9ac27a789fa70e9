"""Lesson 06's figures draw what the lesson says they show: a colour scale that spans the
similarities, the two unit arrows turned without their coordinates written, readable labels."""

import torch

from course_lib import position_demos, viz


def test_cosines_that_are_all_positive_fill_the_colour_scale():
    sim = position_demos.position_similarity(64, 32)  # 0.33..1
    scale = viz.cosine_scale(sim)
    assert scale == {"cmap": "viridis", "vmin": 0.3, "vmax": 1.0}
    (image,) = viz.similarity_figure(sim).axes[0].images
    assert image.norm.vmin == 0.3
    assert viz.cosine_scale(torch.tensor([0.04, 1.0]))["vmin"] == 0.0


def test_the_turned_arrows_carry_no_coordinates_the_exercise_asks_for():
    fig = viz.turned_basis_figure(0.6)
    (ax,) = fig.axes
    texts = [t.get_text() for t in ax.texts]
    assert "(1, 0) turned" in texts and "(0, 1) turned" in texts and texts.count("a") == 2
    assert not any("sin" in t or "cos" in t for t in texts)
    assert ax.get_title() == "(1, 0) and (0, 1) turned by a = 0.6 rad"
    assert all(t.get_fontsize() >= 11 for t in ax.texts)


def test_the_rotated_pair_labels_are_readable():
    fig = viz.rotated_pair_figure(torch.tensor([1.0, 0.4]), range(6))
    labels = fig.axes[0].texts
    assert [t.get_text() for t in labels] == [f"p = {p}" for p in range(6)]
    assert all(t.get_fontsize() >= 11 for t in labels)


def test_the_similarity_rows_legend_covers_no_curve():
    """The legend sits in a band above the peaks (a similarity is at most 1), one row wide."""
    fig = viz.similarity_figure(position_demos.position_similarity(64, 32))
    ax = fig.axes[1]
    fig.canvas.draw()
    box = ax.get_legend().get_window_extent().transformed(ax.transData.inverted())
    curves = [line.get_ydata() for line in ax.get_lines() if len(line.get_ydata()) > 2]
    assert len(curves) == 3 and box.y0 > max(float(y.max()) for y in curves)
    assert max(ax.get_yticks()) <= 1.0
