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


def test_time_figure_draws_each_line_and_a_t_squared_guide():
    fig = viz.time_figure([128, 256], {"a": [1.0, 3.0], "b": [0.5, 1.0]})
    (ax,) = fig.axes
    assert [line.get_label() for line in ax.lines] == ["a", "b", "grows as T²"]
    assert list(ax.lines[2].get_ydata()) == pytest.approx([1.0, 4.0])
    with pytest.raises(ValueError, match="a: expected 2 times"):
        viz.time_figure([128, 256], {"a": [1.0]})
    with pytest.raises(TypeError, match="seconds: expected a non-empty dict"):
        viz.time_figure([128], {})
