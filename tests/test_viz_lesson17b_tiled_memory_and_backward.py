"""course_lib.viz.lesson17b_tiled_memory_and_backward: what no lesson test covers on its own."""

import pytest

from course_lib import viz


def test_memory_figure_draws_a_line_per_label_and_both_guides():
    fig = viz.memory_figure(
        [128, 256], {"a": {"x": [1e6, 4e6], "y": [1e6, 2e6]}, "b": {"x": [1, 2]}}
    )
    left, right = fig.axes
    assert [line.get_label() for line in left.lines] == [
        "x", "y", "grows as T² (at ½)", "grows as T (at ½)",
    ]  # fmt: skip
    assert left.lines[0].get_ydata()[1] == pytest.approx(4e6 / 2**20)
    assert left.lines[0].get_marker() == right.lines[0].get_marker()  # one marker per label
    # the guides start at half the lines they follow ("y" grows as T), so both stay seen
    assert left.lines[3].get_ydata()[0] == pytest.approx(left.lines[1].get_ydata()[0] / 2)
    # each later line drawn smaller and thinner
    assert left.lines[1].get_markersize() < left.lines[0].get_markersize()
    assert left.lines[1].get_linewidth() < left.lines[0].get_linewidth()
    # MiB ticks at powers of 4 spanning the data and the guides: 0.5 MiB to 4e6 bytes
    assert list(left.get_yticks()) == [0.25, 1.0, 4.0]


def test_memory_figure_moves_a_line_of_the_same_bytes_right_and_says_so():
    fig = viz.memory_figure([128, 256], {"a": {"x": [1e6, 2e6], "y": [1e6, 2e6]}})
    x, y = fig.axes[0].lines[:2]
    assert y.get_label() == "y (same bytes as x, drawn right)"
    assert list(y.get_ydata()) == list(x.get_ydata()) and y.get_xdata()[0] > x.get_xdata()[0]


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
