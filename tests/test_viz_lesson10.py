"""course_lib.viz.lesson10: what no lesson test covers on its own."""

import pytest

from course_lib import sampling, viz


def test_tradeoff_figure_draws_one_point_per_setting_of_the_table():
    table = sampling.load_table()
    fig = viz.tradeoff_figure(table)
    (ax,) = fig.axes
    lines = {line.get_label(): line for line in ax.lines if not line.get_label().startswith("_")}
    temperatures = [r for r in table["rows"] if r["top_k"] is None]
    assert len(lines["temperature, every token kept"].get_xdata()) == len(temperatures)
    greedy = next(r for r in temperatures if r["temperature"] == 0)
    assert lines["temperature, every token kept"].get_ydata()[0] == pytest.approx(
        100 * sum(r["kept"] for r in greedy["runs"]) / 3
    )
    with pytest.raises(TypeError, match="table: expected data/sampling.json's dict"):
        viz.tradeoff_figure([1, 2])


def test_tradeoff_figure_labels_every_setting_and_no_two_labels_overlap():
    """Issue: the labels near 15 different starts piled onto each other and their markers."""
    table = sampling.load_table()
    fig = viz.tradeoff_figure(table)
    (ax,) = fig.axes
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text

    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    labels = [t for t in ax.texts if t.get_text()]
    said = {t.get_text().split(" (")[0] for t in labels}
    assert {"temp 0.5", "temp 0.8", "temp 1", "k=5", "k=10", "temp 1.5, k=3"} <= said
    assert len(labels) == len(table["rows"]) - 1  # k=1 shares greedy's point and label
    boxes = [Text.get_window_extent(t, renderer) for t in labels]  # the words, not the lines
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert not a.overlaps(b), (a, b)
    # the points near 15 different starts, a few percent apart, are labelled in a column
    # to the right, each label joined to its own point by a line
    plotted = {tuple(xy) for line in ax.lines for xy in line.get_xydata()}
    crowded = [t for t in labels if t.xy[0] > table["samples"] - 2.5]
    assert {t.get_text() for t in crowded} >= {"temp 0.5", "temp 0.8", "temp 1", "k=5", "k=10"}
    for t in crowded:
        assert t.arrow_patch is not None and tuple(t.xy) in plotted, t.get_text()
        assert t.xyann[0] > table["samples"]  # right of every point


def test_time_figure_draws_each_line_and_a_t_squared_guide():
    fig = viz.time_figure([128, 256], {"a": [1.0, 3.0], "b": [0.5, 1.0]})
    (ax,) = fig.axes
    assert [line.get_label() for line in ax.lines] == ["a", "b", "grows as T²"]
    assert list(ax.lines[2].get_ydata()) == pytest.approx([1.0, 4.0])
    with pytest.raises(ValueError, match="a: expected 2 times"):
        viz.time_figure([128, 256], {"a": [1.0]})
    with pytest.raises(TypeError, match="seconds: expected a non-empty dict"):
        viz.time_figure([128], {})
