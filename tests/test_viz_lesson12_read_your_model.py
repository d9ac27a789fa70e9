"""course_lib.viz.lesson12_read_your_model: what the lesson's figures draw."""

import numpy as np
import torch
from matplotlib.patches import Rectangle

from course_lib import viz


def test_the_detector_figure_boxes_the_scores_three_times_chance():
    scores = {"a": torch.tensor([[0.9, 0.1], [0.2, 0.35]]), "b": torch.tensor([[0.0, 0.5]] * 2)}
    chance = {"a": 0.1, "b": 0.15}  # rows: jobs; columns: L0 H0, L0 H1, L1 H0, L1 H1
    fig = viz.detector_figure(scores, chance, "a title")
    ax = fig.axes[0]
    boxes = [p for p in ax.patches if isinstance(p, Rectangle)]
    centres = sorted((round(b.get_x() + 0.46), round(b.get_y() + 0.44)) for b in boxes)
    assert centres == [(0, 0), (1, 1), (3, 0), (3, 1)]  # 0.9 and 0.35 on a, 0.5 twice on b
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a (chance 0.10)", "b (chance 0.15)"]
    assert "a title" in ax.get_title() and "3 times the chance level" in ax.get_title()
    assert [t.get_text() for t in ax.texts][:2] == ["0.90", "0.10"]


def test_the_knockout_figure_tells_a_rise_of_5_from_a_rise_of_1():
    fig = viz.knockout_figure([(0, 0), (1, 3)], [[5.5, 1.0], [-0.4, 0.0]], ("a", "b"), "t")
    image = fig.axes[0].images[0]
    colours = image.cmap(image.norm(np.array([5.5, 1.0, 0.0, -0.4])))
    assert np.abs(colours[0] - colours[1]).max() > 0.1  # not clipped alike
    assert np.allclose(colours[2][:3], image.cmap(0.5)[:3])  # 0 is the middle, white
    assert image.norm.vmax == 5.5 and image.norm.vmin == -5.5
    assert [t.get_text() for t in fig.axes[0].texts] == ["+5.50", "+1.00", "-0.40", "+0.00"]


def test_the_forming_figure_draws_both_scores_their_chance_and_the_excess():
    fig = viz.forming_figure([50, 100, 150], [0.1, 0.1, 0.3], [0.2, 0.3, 0.7], [2.0, 1.0, 0.1],
                             {"previous": 0.14, "induction": 0.08},
                             {"previous": "L0 H3", "induction": "L1 H3"})  # fmt: skip
    top, bottom = fig.axes
    labels = [line.get_label() for line in top.lines if not line.get_label().startswith("_")]
    assert labels == ["L0 H3: previous score", "L1 H3: induction score"]
    assert [float(line.get_ydata()[0]) for line in top.lines[1::2]] == [0.14, 0.08]
    assert bottom.get_yscale() == "log" and list(bottom.lines[0].get_ydata()) == [2.0, 1.0, 0.1]
