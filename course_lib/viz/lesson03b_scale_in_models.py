"""Lesson 03b_scale_in_models's figure: what the scale is worth to a trained model, skill by
skill."""

import numpy as np
from matplotlib.figure import Figure

from course_lib.viz.style import COLOURS, DPI


def _claim_bar(ax, x, base, bar):
    """The bar a claim must clear, drawn from the better variant's mean: the claim holds when
    the other variant's mean is above its top."""
    style = {"color": "0.2", "lw": 1.6}
    ax.plot([x, x], [base, base + bar], **style)
    ax.plot([x - 0.12, x + 0.12], [base + bar] * 2, **style)


def excess_rows_figure(rows: list[dict]) -> Figure:
    """Excess over the floor with and without the scale, one row of panels per row of the
    variant table and one panel per skill, each with its own y axis (lesson 03b).

    rows: saturation.scale_rows()'s dicts. A bar is the mean over seeds, each seed a dot on
    it; where the row makes a claim, a black bracket rises from the scaled mean by the claim's
    bar (three times the larger seed range): the claim holds when the unscaled mean is above
    it.
    """
    skills = list(rows[0]["scaled"])
    fig = Figure(figsize=(1.4 * len(skills) + 0.6, 2.9 * len(rows) + 0.5), dpi=DPI,
                 layout="constrained")  # fmt: skip
    spread = (-0.12, 0.0, 0.12)  # the seeds side by side on their bar, never on each other
    for row, sub in zip(rows, np.atleast_1d(fig.subfigures(len(rows), 1)), strict=True):
        claims = {c["skill"]: c for c in row["claims"]}
        axes = sub.subplots(1, len(skills))
        for ax, skill in zip(axes, skills, strict=True):
            for x, name in ((0, "scaled"), (1, "unscaled")):
                seeds = row[name][skill]
                ax.bar(x, sum(seeds) / len(seeds), width=0.7, color=COLOURS[name],
                       hatch="" if x == 0 else "//", label=f"{name} (mean of seeds)")  # fmt: skip
                ax.plot([x + dx for dx in spread[: len(seeds)]], seeds, "o", ms=3.5,
                        color="black", mfc="white", mew=1.0)  # fmt: skip
            if skill in claims:
                scaled = row["scaled"][skill]
                claim = claims[skill]
                _claim_bar(ax, 1.55, sum(scaled) / len(scaled), claim["bar"])
            ax.axhline(0, color="0.3", lw=0.8)
            ax.set_xlim(-0.55, 1.9)
            ax.set_xticks([])
            ax.margins(y=0.12)
            verdict = skill in claims and ("holds" if claims[skill]["holds"] else "short")
            ax.set_title(f"{skill}: {verdict}" if verdict else skill, fontsize=10)
            ax.tick_params(axis="y", labelsize=9)
            ax.grid(True, axis="y", alpha=0.3)
        axes[0].set_ylabel("excess (nats)", fontsize=10)
        verdict = "the row holds" if row["holds"] else "the row falls short"
        sub.suptitle(f"{row['title']}: {verdict}", fontsize=11)
    first = fig.axes[0]
    first.plot([], [], "o", ms=3.5, color="black", mfc="white", ls="none", label="each seed")
    first.plot(
        [],
        [],
        "-",
        color="0.2",
        lw=1.6,
        label="a claim's bar, from the scaled mean (title: holds or short)",
    )
    handles, labels = first.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=4, fontsize=10)
    fig.suptitle("Excess over the floor on the validation split, per skill (each panel its own "
                 "axis), seeds 0, 1, 2, with and without the 1/sqrt(d_k) scale",
                 fontsize=11)  # fmt: skip
    return fig
