"""course_lib.viz.lesson14: what no lesson test covers on its own."""

import pytest

from course_lib import viz


def test_bends_figure_marks_gelus_and_silus_minima_on_the_zoomed_side():
    fig = viz.bends_figure()
    whole, near = fig.axes
    assert [line.get_label() for line in whole.lines[:3]] == [
        "GELU",
        "SiLU",
        "sigmoid (GLU's gate)",
    ]
    marks = sorted(text.get_text() for text in near.texts)
    assert marks == ["GELU lowest: -0.17", "SiLU lowest: -0.28"]
    assert near.get_ylim() == (-0.4, 1.0)


def test_bends_figure_names_a_bad_range():
    with pytest.raises(ValueError, match="lo, hi"):
        viz.bends_figure(-1.0, 5.0)
