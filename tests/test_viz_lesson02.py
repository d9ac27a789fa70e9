"""course_lib.viz.lesson02: what no lesson test covers on its own."""

import pytest

from course_lib import viz


def panel(dashed):
    return {"title": "t", "ylabel": "y", "lines": {"data": [1.0, 2.0, 3.0]}, "dashed": dashed}


def test_curve_panels_reference_lines_are_grey_and_told_apart_by_dash_pattern():
    refs = {"level a": [1.0] * 3, "level b": [2.0] * 3, "level c": [3.0] * 3}
    (ax,) = viz.curve_panels([1, 2, 3], [panel(refs)], xlabel="x").axes
    grey = {
        line.get_label(): line.get_linestyle() for line in ax.lines if line.get_color() == "grey"
    }
    assert list(grey) == list(refs)
    assert len(set(grey.values())) == 3  # a legend can tell each one from the others
    with pytest.raises(ValueError, match="dashed: expected at most 3 reference lines, got 4"):
        viz.curve_panels([1, 2, 3], [panel(refs | {"level d": [4.0] * 3})], xlabel="x")
