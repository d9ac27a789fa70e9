"""Lesson 03_scaling's figures: curves against the head width, the short training run of one
head, and what the scale is worth to a trained model, skill by skill."""

import math

import numpy as np
from matplotlib.figure import Figure

from course_lib.viz.style import COLOURS, MARKERS, _markers, _numbers, colour, new_figure

REFERENCE_STYLES = ("--", ":", "-.")  # dashed, dotted, dash-dotted


def curve_panels(x, panels, *, xlabel, logx=True, width=None, height=3.4) -> Figure:
    """Side-by-side line plots sharing one x (lesson 03).

    panels: list of dicts with "title", "ylabel", "lines" ({label: y values}) and
    optionally "logy" (bool), "ylim" ((low, high)), "legend" (where it goes, as matplotlib's
    `loc`: a place the data leaves free) and "dashed" ({label: y values}, up to
    three grey reference lines: dashed, dotted, dash-dotted). A line whose label names a
    meaning (COLOURS, MARKERS) takes its colour and marker; the others take the next ones.
    """
    xs = _numbers("x", x)
    if not panels:
        raise ValueError("panels: expected at least one panel, got none")
    fig, axes = new_figure(width or 4.2 * len(panels), height, ncols=len(panels))
    axes = [axes] if len(panels) == 1 else list(axes)
    # a long line carries its marker every few points, so the legend can still match it
    markevery = 1 if len(xs) <= 16 else max(1, len(xs) // 12)
    for ax, panel in zip(axes, panels, strict=True):
        markers = _markers(panel["lines"])
        for label, ys in panel["lines"].items():
            ys = _numbers(label, ys)
            if len(ys) != len(xs):
                raise ValueError(f"{label}: expected {len(xs)} values to match x, got {len(ys)}")
            style = {"marker": markers[label], "markevery": markevery, "color": colour(label)}
            ax.plot(xs, ys, "-", ms=4, label=label, **style)
        # grey reference lines, each with its own dash pattern so the legend tells them apart
        dashed = panel.get("dashed", {})
        if len(dashed) > len(REFERENCE_STYLES):
            raise ValueError(
                f"dashed: expected at most {len(REFERENCE_STYLES)} reference lines, "
                f"got {len(dashed)}"
            )
        # wide and under the curves: one that follows a reference exactly (the variance of
        # q . k on y = d_k) leaves the grey dashes in sight on both sides of it
        under = {"color": "grey", "lw": 3.5, "alpha": 0.75, "zorder": 1.8}
        for (label, ys), style in zip(dashed.items(), REFERENCE_STYLES, strict=False):
            ax.plot(xs, _numbers(label, ys), style, label=label, **under)
        if logx:
            ax.set_xscale("log", base=2)
        if panel.get("logy"):
            ax.set_yscale("log")
        if "ylim" in panel:
            ax.set_ylim(*panel["ylim"])
        ax.set_title(panel["title"])
        ax.set_ylabel(panel["ylabel"])
        ax.set_xlabel(xlabel)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=9, loc=panel.get("legend", "best"))
    return fig


WIDTH_STYLES = ("--", "-")  # the narrow head dashed, the wide one solid


def training_figure(runs: dict, one_key_loss: float) -> Figure:
    """Loss, attention entropy and the gradient reaching the scores against the step, for the
    short training run of one head (lesson 03).

    runs: {(d, scale): train_single_head's history}, two widths d, each with scale True and
    False. one_key_loss: the loss of a head that looks at a single flagged key (a dotted line).
    """
    widths = sorted({d for d, _ in runs})
    if len(widths) > len(WIDTH_STYLES) or any((d, s) not in runs for d in widths
                                               for s in (True, False)):  # fmt: skip
        raise ValueError(f"runs: expected scale True and False for at most two widths, got "
                         f"{sorted(runs)}")  # fmt: skip
    fig, axes = new_figure(12.0, 4.3, ncols=3)
    panels = (
        ("loss", "mean squared error", "loss"),
        ("entropy", "mean entropy (nats)", "attention entropy"),
        ("grad_scores", "typical gradient norm (log scale)", "gradient reaching the scores"),
    )
    for ax, (key, ylabel, title) in zip(axes, panels, strict=True):
        for d, style in zip(widths, WIDTH_STYLES, strict=False):
            for scale in (True, False):
                name = "scaled" if scale else "unscaled"
                ys = runs[(d, scale)][key]
                if key == "grad_scores":
                    ys = [max(y, 1e-30) for y in ys]  # an exact 0 drawn at the axis' floor
                ax.plot(range(len(ys)), ys, style, color=COLOURS[name], lw=2,
                        marker=MARKERS[name], ms=5, markevery=10,
                        label=f"{name}, d = {d}")  # fmt: skip
        ax.set(title=title, ylabel=ylabel, xlabel="training step")
        ax.grid(True, alpha=0.3)
    steps = len(runs[(widths[0], True)]["loss"])
    references = (  # each label where the curves leave room for it
        (axes[0], one_key_loss, "one flagged key: 2/3", "bottom"),
        (axes[1], math.log(3), "3 keys evenly: log 3", "top"),
        (axes[1], math.log(8), "8 keys evenly: log 8", "bottom"),
    )
    for ax, level, label, side in references:
        ax.axhline(level, color="grey", ls=":", lw=2, zorder=1.5)
        ax.annotate(label, (steps - 1, level), xytext=(-3, 3 if side == "bottom" else -3),
                    textcoords="offset points", ha="right", va=side, fontsize=9,
                    color="0.3")  # fmt: skip
    axes[0].set_ylim(0, 1.3)
    axes[1].set_ylim(0, 2.35)
    axes[2].set_yscale("log")
    for ax in axes:
        ax.set_xlim(0, steps - 1)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=len(labels), fontsize=10)
    fig.suptitle(f"One head, {steps} steps of SGD on the flagged-average task: widths "
                 f"{' and '.join(str(d) for d in widths)}, with and without the scale",
                 fontsize=11)  # fmt: skip
    return fig


def excess_rows_figure(rows: list[dict], skills) -> Figure:
    """Excess over the floor per skill, with and without the scale, one panel per row of the
    variant table (lesson 03).

    rows: [{"title": str, "scaled": {skill: [one value per seed]}, "unscaled": ...}]. A bar is
    the mean over seeds, each seed a black dot on it.
    """
    skills = list(skills)
    fig, axes = new_figure(6.2 * len(rows), 3.8, ncols=len(rows))
    axes = np.atleast_1d(axes)
    values = [v for row in rows for k in ("scaled", "unscaled") for s in skills for v in row[k][s]]
    top, bottom = max(values), min(values)
    x = np.arange(len(skills))
    for ax, row in zip(axes, rows, strict=True):
        for offset, name in ((-0.2, "scaled"), (0.2, "unscaled")):
            seeds = [row[name][s] for s in skills]
            means = [sum(v) / len(v) for v in seeds]
            hatch = "" if name == "scaled" else "//"
            ax.bar(x + offset, means, width=0.4, color=COLOURS[name], hatch=hatch,
                   label=f"{name} (mean of seeds)")  # fmt: skip
            for i, values in enumerate(seeds):
                ax.plot([x[i] + offset] * len(values), values, "o", ms=3.5, color="black",
                        mfc="white", mew=1.0)  # fmt: skip
        ax.plot([], [], "o", ms=3.5, color="black", mfc="white", ls="none", label="each seed")
        ax.axhline(0, color="0.3", lw=0.8)
        ax.set_xticks(x, skills, fontsize=9, rotation=30)
        ax.set_ylim(min(-0.25, 1.1 * bottom), top * 1.08)
        ax.set_ylabel("excess over the floor (nats)")
        ax.set_title(row["title"], fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=9, loc="upper left")
    fig.suptitle("Excess over the floor on the validation split, per skill, 3 seeds each, with "
                 "and without the 1/sqrt(d) scale", fontsize=11)  # fmt: skip
    return fig
