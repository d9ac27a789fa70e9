"""course_lib.viz.lesson17: what no lesson test covers on its own."""

import pytest

from course_lib import viz


def test_memory_figure_draws_a_line_per_label_and_both_guides():
    fig = viz.memory_figure(
        [128, 256], {"a": {"x": [1e6, 4e6], "y": [1e6, 2e6]}, "b": {"x": [1, 2]}}
    )
    left, right = fig.axes
    assert [line.get_label() for line in left.lines] == ["x", "y", "grows as T^2", "grows as T"]
    assert left.lines[0].get_ydata()[1] == pytest.approx(4e6 / 2**20)
    assert left.lines[0].get_marker() == right.lines[0].get_marker()  # one marker per label


@pytest.mark.parametrize(
    "panels,error,message",
    [
        ([1, 2], TypeError, "panels: expected a dict"),
        ({}, ValueError, "panels: expected at least one"),
        ({"a": {"x": [1.0]}}, ValueError, "x: expected 2 sizes"),
    ],
)
def test_memory_figure_names_a_bad_argument(panels, error, message):
    with pytest.raises(error, match=message):
        viz.memory_figure([128, 256], panels)
