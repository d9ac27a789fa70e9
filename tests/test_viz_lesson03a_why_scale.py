"""course_lib.viz.lesson03a_why_scale: what no lesson test covers on its own."""

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


def history(loss, entropy, flagged, grad):
    return {"loss": loss, "entropy": entropy, "flagged": flagged, "grad_scores": grad}


RUNS = {
    (16, True): history([0.3, 0.1, 0.005], [1.8, 1.5, 1.2], [0.37, 0.8, 0.99], [1e-3, 8e-4, 5e-4]),
    (16, False): history([0.8, 0.3, 0.01], [0.8, 1.2, 1.4], [0.37, 0.9, 0.92], [1e-3, 9e-4, 6e-4]),
    (256, True): history([0.3, 0.1, 0.005], [1.8, 1.6, 1.4], [0.38, 0.7, 0.93], [1e-3, 8e-4, 5e-4]),
    (256, False): history([1.1, 1.0, 0.9], [0.2, 0.05, 0.03], [0.37, 0.5, 0.8], [1e-5, 0.0, 1e-20]),
}


def test_the_training_figure_shows_every_run_its_end_losses_and_the_weight_on_flagged_keys():
    fig = viz.training_figure(RUNS, one_key_loss=2 / 3)
    loss, entropy, flagged, grad = fig.axes
    # a log axis: end losses of 0.005 and 0.01 stand apart, and 1.1 stays in sight
    assert loss.get_yscale() == "log"
    low, high = loss.get_ylim()
    assert low < 0.005 and high > 1.1
    assert flagged.get_ylim() == (0, 1.05) and "flagged" in flagged.get_title()
    assert any("3/8" in t.get_text() for t in flagged.texts)
    assert grad.get_yscale() == "log" and "median" in grad.get_ylabel()
    assert all(line.get_ydata().min() > 0 for line in grad.lines)  # an exact 0 drawn, not lost
    (legend,) = fig.legends  # one legend for the four runs, outside the panels
    assert [t.get_text() for t in legend.texts] == [
        "scaled, d = 16 (dashed)", "unscaled, d = 16 (dashed)",
        "scaled, d = 256 (solid)", "unscaled, d = 256 (solid)",
    ]  # fmt: skip
    # handles long enough to show a dash pattern, and the pattern the label names
    assert legend.handlelength >= 4
    styles = [h.get_linestyle() for h in legend.legend_handles]
    assert styles == ["--", "--", "-", "-"]
    assert "widths 16 and 256" in fig.get_suptitle()
    assert any("2/3" in t.get_text() for t in loss.texts)
    with pytest.raises(ValueError, match="runs: expected scale True and False"):
        viz.training_figure({(16, True): RUNS[16, True]}, one_key_loss=2 / 3)
