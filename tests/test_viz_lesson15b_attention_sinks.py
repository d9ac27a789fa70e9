"""course_lib.viz.lesson15b_attention_sinks: what no lesson test covers on its own."""

import pytest

from course_lib import viz


def test_excess_by_position_draws_a_line_per_label_with_its_own_marker_and_a_band():
    fig = viz.excess_by_position_figure(
        {"a": [0.1, 0.2, 0.3], "b": [0.0, 0.5, 2.0]},
        trained=2,
        spread={"b": ([0, 0.4, 1], [0, 0.6, 3])},
    )
    (ax,) = fig.axes
    lines = [line for line in ax.lines if line.get_label() in ("a", "b")]
    assert [line.get_label() for line in lines] == ["a", "b"]
    assert lines[0].get_marker() != lines[1].get_marker()
    assert lines[1].get_ydata()[0] == pytest.approx(1e-3)  # 0 drawn at the log axis' floor
    assert ax.get_yscale() == "log" and len(ax.collections) == 1  # one band, for "b"
    assert ax.get_title() == ""
    titled = viz.excess_by_position_figure({"a": [0.1, 0.2]}, trained=1, title="mean of 3 seeds")
    assert titled.axes[0].get_title() == "mean of 3 seeds"


@pytest.mark.parametrize(
    "curves,error,message",
    [([1, 2], TypeError, "curves: expected a non-empty dict"),
     ({}, TypeError, "curves: expected a non-empty dict"),
     ({str(n): [1.0] for n in range(7)}, ValueError, "at most 6 lines")],
)  # fmt: skip
def test_excess_by_position_names_a_bad_argument(curves, error, message):
    with pytest.raises(error, match=message):
        viz.excess_by_position_figure(curves)
