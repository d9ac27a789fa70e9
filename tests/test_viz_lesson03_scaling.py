"""course_lib.viz.lesson03_scaling: what no lesson test covers on its own."""

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


def history(loss, entropy, grad):
    return {"loss": loss, "entropy": entropy, "grad_scores": grad}


RUNS = {
    (16, True): history([0.3, 0.1, 0.005], [1.8, 1.5, 1.2], [1e-3, 8e-4, 5e-4]),
    (16, False): history([0.8, 0.3, 0.01], [0.8, 1.2, 1.4], [1e-3, 9e-4, 6e-4]),
    (256, True): history([0.3, 0.1, 0.005], [1.8, 1.6, 1.4], [1e-3, 8e-4, 5e-4]),
    (256, False): history([1.1, 1.0, 0.9], [0.2, 0.05, 0.03], [1e-5, 0.0, 1e-20]),
}


def test_the_training_figure_shows_every_run_on_a_linear_loss_axis_with_its_setting():
    fig = viz.training_figure(RUNS, one_key_loss=2 / 3)
    loss, entropy, grad = fig.axes
    assert loss.get_yscale() == "linear" and loss.get_ylim()[0] == 0
    assert loss.get_ylim()[1] >= 1.1  # the unscaled wide head's loss stays in sight
    assert grad.get_yscale() == "log"
    assert all(line.get_ydata().min() > 0 for line in grad.lines)  # an exact 0 drawn, not lost
    (legend,) = fig.legends  # one legend for the four runs, outside the panels
    assert [t.get_text() for t in legend.texts] == [
        "scaled, d = 16", "unscaled, d = 16", "scaled, d = 256", "unscaled, d = 256"
    ]  # fmt: skip
    assert "widths 16 and 256" in fig.get_suptitle()
    assert any("2/3" in t.get_text() for t in loss.texts)
    with pytest.raises(ValueError, match="runs: expected scale True and False"):
        viz.training_figure({(16, True): RUNS[16, True]}, one_key_loss=2 / 3)


def test_the_excess_figure_keeps_every_seed_inside_its_axis():
    rows = [
        {
            "title": "one layer, head width 128: holds",
            "scaled": {"all": [0.09, 0.08, 0.08], "mark": [0.28, 0.31, 0.26]},
            "unscaled": {"all": [0.64, 0.65, 0.67], "mark": [3.3, 4.4, 4.7]},
        },
        {
            "title": "two layers, head width 64: falls short",
            "scaled": {"all": [0.01, 0.06, 0.01], "mark": [0.05, 0.17, -0.05]},
            "unscaled": {"all": [0.4, 0.22, 0.22], "mark": [3.8, 1.9, 0.59]},
        },
    ]
    fig = viz.excess_rows_figure(rows, ("all", "mark"))
    for ax, row in zip(fig.axes, rows, strict=True):
        low, high = ax.get_ylim()
        values = [v for kind in ("scaled", "unscaled") for vs in row[kind].values() for v in vs]
        assert low < min(values) and high > max(values)
        assert ax.get_title() == row["title"]
        assert [t.get_text() for t in ax.get_xticklabels()] == ["all", "mark"]
    assert "3 seeds" in fig.get_suptitle()
