"""Lesson 02's figures: curves against the head width, and the scale sweep."""

from matplotlib.figure import Figure

from course_lib.viz.style import COLOURS, MARKERS, _markers, _numbers, colour, new_figure

REFERENCE_STYLES = ("--", ":", "-.")  # dashed, dotted, dash-dotted


def curve_panels(x, panels, *, xlabel, logx=True, width=None, height=3.4) -> Figure:
    """Side-by-side line plots sharing one x (lesson 02).

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


def scale_sweep_figure(widths, entropy, loss, *, flat_entropy: float, steps: int) -> Figure:
    """Entropy at step 0 and validation loss after training against head width (lesson 02).

    entropy and loss: {"scaled": [[one value per seed] per width], "unscaled": ...}. Each
    seed is a point; the line joins the means. flat_entropy: evenly spread causal attention.
    """
    xs = _numbers("widths", widths)
    fig, axes = new_figure(8.4, 3.4, ncols=2)
    panels = (
        (axes[0], entropy, "attention entropy at step 0", "mean entropy (nats)"),
        (axes[1], loss, f"validation loss after {steps} steps", "validation loss (nats)"),
    )
    for ax, table, title, ylabel in panels:
        for label in ("scaled", "unscaled"):
            per_seed = [_numbers(label, values) for values in table[label]]
            if len(per_seed) != len(xs):
                raise ValueError(f"{label}: expected {len(xs)} widths, got {len(per_seed)}")
            style = {"color": COLOURS[label], "marker": MARKERS[label]}
            means = [sum(values) / len(values) for values in per_seed]
            ax.plot(xs, means, "-", ms=6, label=f"{label} (mean)", **style)
            for x, values in zip(xs, per_seed, strict=True):
                ax.plot([x] * len(values), values, ls="none", ms=4, alpha=0.5, mfc="none", **style)
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs, [str(int(x)) for x in xs])
        ax.set_xlabel("head width d (same model: 256 wide, 256 / d heads)")
        ax.set_title(title)
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
    axes[0].axhline(flat_entropy, ls="--", color="grey", label="evenly spread (causal)")
    axes[0].set_ylim(0, flat_entropy * 1.15)
    for ax in axes:
        # one legend entry for the per-seed points of both colours
        hollow = {"marker": "o", "ms": 4, "mfc": "none", "color": "grey"}
        ax.plot([], [], ls="none", label="hollow: single seeds", **hollow)
        ax.legend(fontsize=8)
    return fig
