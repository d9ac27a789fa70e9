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


def test_the_knockout_figure_tells_rises_of_1_2_and_4_apart_and_shows_falls():
    fig = viz.knockout_figure([(0, 0), (1, 3)], [[4.4, 1.0], [-0.3, 2.0]], ("a", "b"), "t")
    image = fig.axes[0].images[0]
    colours = image.cmap(image.norm(np.array([4.4, 2.0, 1.0, 0.0, -0.3])))
    assert np.abs(colours[0] - colours[1]).max() > 0.1  # 4 and 2 apart, not clipped alike
    assert np.abs(colours[1] - colours[2]).max() > 0.1  # 2 and 1 apart
    assert np.abs(colours[4] - colours[3]).max() > 0.1  # a fall of 0.3 shows
    assert np.allclose(colours[3][:3], image.cmap(0.5)[:3])  # 0 is the middle, white
    assert image.norm.vmax == 4.4 and image.norm.vmin == -4.4  # symmetric: nothing clipped
    assert [t.get_text() for t in fig.axes[0].texts] == ["+4.40", "+1.00", "-0.30", "+2.00"]


def test_the_forming_figure_draws_each_heads_score_and_the_chance_levels():
    scores = {"L1 H3: induction": [0.2, 0.3, 0.7], "L0 H3: previous": [0.1, 0.1, 0.3],
              "L0 H0: previous": [0.1, 0.2, 0.2]}  # fmt: skip
    fig = viz.forming_figure([50, 100, 150], scores, {"previous": 0.14, "induction": 0.08})
    (top,) = fig.axes  # the copy's excess is lesson 11b's figure, not drawn again
    labels = [line.get_label() for line in top.lines]
    assert labels == [*scores, "chance level, induction (0.08)", "chance level, previous (0.14)"]
    assert [float(line.get_ydata()[0]) for line in top.lines[3:]] == [0.08, 0.14]
    legend = [t.get_text() for t in top.get_legend().get_texts()]
    assert legend == labels  # the chance lines are named in the legend
    assert top.get_xlabel() == "training step"
