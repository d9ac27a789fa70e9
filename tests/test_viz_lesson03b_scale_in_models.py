"""course_lib.viz.lesson03b_scale_in_models: what no lesson test covers on its own."""

import pytest

from course_lib import viz


def row(title, holds, scaled, unscaled, claims):
    return {"title": title, "holds": holds, "scaled": scaled, "unscaled": unscaled,
            "claims": claims, "parameters": 1}  # fmt: skip


ROWS = [
    row("one head of width 128", True,
        {"all": [0.09, 0.08, 0.08], "subject": [-0.01, -0.01, 0.035], "mark": [0.28, 0.31, 0.26]},
        {"all": [0.64, 0.65, 0.67], "subject": [0.033, 0.03, 0.071], "mark": [3.3, 4.4, 4.7]},
        [{"skill": "mark", "gap": 3.8, "bar": 1.4, "holds": True},
         {"skill": "all", "gap": 0.57, "bar": 0.1, "holds": True}]),
    row("two heads of width 64", False,
        {"all": [0.01, 0.06, 0.01], "subject": [0.002, 0.01, 0.003], "mark": [0.05, 0.17, -0.05]},
        {"all": [0.4, 0.22, 0.22], "subject": [0.03, 0.01, 0.04], "mark": [3.8, 1.9, 0.59]},
        [{"skill": "mark", "gap": 2.0, "bar": 9.6, "holds": False}]),
]  # fmt: skip


def test_the_excess_figure_gives_each_skill_its_own_axis_and_draws_each_claims_bar():
    fig = viz.excess_rows_figure(ROWS)
    axes = fig.axes
    assert len(axes) == 6
    panels = [(each, skill) for each in ROWS for skill in each["scaled"]]
    for ax, (r, skill) in zip(axes, panels, strict=True):
        low, high = ax.get_ylim()
        values = r["scaled"][skill] + r["unscaled"][skill]
        assert low < min(values) and high > max(values)  # every seed inside its own axis
        claim = {c["skill"]: c for c in r["claims"]}.get(skill)
        title = ax.get_title()
        if claim is None:
            assert title == skill
            continue
        assert title == f"{skill}: {'holds' if claim['holds'] else 'short'}"
        scaled_mean = sum(r["scaled"][skill]) / 3
        tops = [
            max(line.get_ydata())
            for line in ax.lines
            if line.get_color() == "0.2" and len(line.get_ydata())
        ]
        assert max(tops) == pytest.approx(scaled_mean + claim["bar"])  # the bar, from the mean
        assert high > scaled_mean + claim["bar"]
    # the subject panel's axis is its own: its 0.07 is not a sliver under 4.7
    subject = axes[1]
    assert subject.get_ylim()[1] < 0.1
    # seeds side by side, never drawn on one another
    dots = [line for line in axes[0].lines if line.get_marker() == "o" and len(line.get_xdata())]
    assert all(len(set(line.get_xdata())) == 3 for line in dots)
    assert [s.get_suptitle() for s in fig.subfigs] == [
        "one head of width 128: the row holds", "two heads of width 64: the row falls short"
    ]  # fmt: skip
    assert "seeds 0, 1, 2" in fig.get_suptitle() and "1/sqrt(d_k)" in fig.get_suptitle()
