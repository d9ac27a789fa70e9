"""Lesson 03a_why_scale's figures: curves against the head width, and the short training run of
one head."""

import math

from matplotlib.figure import Figure

from course_lib.viz.style import COLOURS, MARKERS, _markers, _numbers, colour, new_figure

REFERENCE_STYLES = ("--", ":", "-.")  # dashed, dotted, dash-dotted


def curve_panels(x, panels, *, xlabel, logx=True, width=None, height=3.4) -> Figure:
    """Side-by-side line plots sharing one x (lesson 03a).

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
WIDTH_WORDS = {"--": "dashed", "-": "solid"}


def training_figure(runs: dict, one_key_loss: float) -> Figure:
    """Loss, attention entropy, weight on the flagged keys and the median gradient reaching
    the scores against the step, for the short training run of one head (lesson 03a).

    runs: {(d, scale): train_single_head's history}, two widths d, each with scale True and
    False. one_key_loss: the loss of a head that looks at a single flagged key (a dotted line).
    """
    widths = sorted({d for d, _ in runs})
    if len(widths) > len(WIDTH_STYLES) or any((d, s) not in runs for d in widths
                                               for s in (True, False)):  # fmt: skip
        raise ValueError(f"runs: expected scale True and False for at most two widths, got "
                         f"{sorted(runs)}")  # fmt: skip
    fig, axes = new_figure(10.0, 7.2, ncols=2, nrows=2)
    axes = axes.ravel()
    panels = (
        ("loss", "mean squared error (log scale)", "loss"),
        ("entropy", "mean entropy (nats)", "attention entropy"),
        ("flagged", "mean weight on the 3 flagged keys", "weight on the flagged keys"),
        ("grad_scores", "median over rows (log scale)", "gradient reaching the scores, per row"),
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
                        label=f"{name}, d = {d} ({WIDTH_WORDS[style]})")  # fmt: skip
        ax.set(title=title, ylabel=ylabel, xlabel="training step")
        ax.grid(True, alpha=0.3)
    steps = len(runs[(widths[0], True)]["loss"])
    references = (  # each label where the curves leave room for it
        (axes[0], one_key_loss, "one flagged key: 2/3", "top"),
        (axes[1], math.log(3), "3 keys evenly: log 3", "top"),
        (axes[1], math.log(8), "8 keys evenly: log 8", "bottom"),
        (axes[2], 3 / 8, "flag ignored: 3/8", "top"),
    )
    for ax, level, label, side in references:
        ax.axhline(level, color="grey", ls=":", lw=2, zorder=1.5)
        ax.annotate(label, (steps - 1, level), xytext=(-3, 3 if side == "bottom" else -3),
                    textcoords="offset points", ha="right", va=side, fontsize=9,
                    color="0.3")  # fmt: skip
    axes[0].set_yscale("log")
    axes[1].set_ylim(0, 2.35)
    axes[2].set_ylim(0, 1.05)
    axes[3].set_yscale("log")
    for ax in axes:
        ax.set_xlim(0, steps - 1)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=2, fontsize=10,
               handlelength=4.5)  # fmt: skip
    fig.suptitle(f"One head, {steps} steps of SGD on the flagged-average task: widths "
                 f"{' and '.join(str(d) for d in widths)}, with and without the scale",
                 fontsize=11)  # fmt: skip
    return fig
