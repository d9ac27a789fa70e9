"""Lesson 08's figures: the block diagram, per-layer gradient norms and activation scales on
fixed log axes, and trained models' excess loss, one dot per seed (lessons 08 and 09)."""

from matplotlib.figure import Figure
from matplotlib.patches import Circle
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

from course_lib.viz.style import (
    LINE_MARKERS,
    MARKERS,
    PALETTE,
    _arrow,
    _box,
    _markers,
    _numbers,
    colour,
    meaning,
    new_figure,
)

GRAD_LIMITS = (1e-10, 1e5)  # fixed log axes: explorers never rescale, far values pin to an edge
SCALE_LIMITS = (1e-2, 1e2)


def draw_block_diagram(ax, *, prenorm: bool = True, residual: bool = True):
    """Boxes and arrows of one block, input on the left, output on the right (lesson 08)."""
    norm, attn, ff, add = "#f6d55c", "#9ecae1", "#a1d99b", "white"
    if prenorm:
        parts = [
            ("x", None),
            ("LayerNorm", norm),
            ("multi-head\nattention", attn),
            ("+", add),
            ("LayerNorm", norm),
            ("feed-forward\nlayer", ff),
            ("+", add),
            ("out", None),
        ]
        skips = [(0, 3), (3, 6)]  # the residual path jumps from input to its "+"
    else:
        parts = [
            ("x", None),
            ("multi-head\nattention", attn),
            ("+", add),
            ("LayerNorm", norm),
            ("feed-forward\nlayer", ff),
            ("+", add),
            ("LayerNorm", norm),
            ("out", None),
        ]
        skips = [(0, 2), (3, 5)]
    xs = [3.0 * i for i in range(len(parts))]
    width = 2.2  # a box: wide enough for "feed-forward" at 12 pt
    for x, (text, color) in zip(xs, parts, strict=True):
        if color is None:
            ax.text(x, 0, text, ha="center", va="center", fontsize=13, fontweight="bold")
        elif text == "+":
            ax.add_patch(Circle((x, 0), 0.3, facecolor="white", edgecolor="black", lw=1.2))
            ax.text(x, 0, "+", ha="center", va="center", fontsize=15)
        else:
            _box(ax, x, 0, "", color, width=width, height=1.0)
            ax.text(x, 0, text, ha="center", va="center", fontsize=12)
    # each part's half extent along x, the boxes' rounded edge included
    half = [0.3 if c is None else 0.32 if t == "+" else width / 2 + 0.05 for t, c in parts]
    for i in range(len(parts) - 1):
        _arrow(ax, (xs[i] + half[i], 0), (xs[i + 1] - half[i + 1], 0))
    if residual:
        top = 1.05
        for start, end in skips:
            # the copy splits off the arrow that leaves `start`, midway between two parts
            split = (xs[start] + half[start] + xs[start + 1] - half[start + 1]) / 2
            ax.plot([split, split, xs[end]], [0, top, top], color="tab:red", lw=1.6)
            ax.plot([split], [0], "o", color="tab:red", ms=5)
            _arrow(ax, (xs[end], top), (xs[end], 0.32), color="tab:red")
        ax.text(xs[0] + 0.2, 1.45, "residual path (x + ...)", color="tab:red", fontsize=12)
    ax.set_xlim(xs[0] - 0.5, xs[-1] + 0.5)
    ax.set_ylim(-0.7, 1.8)
    ax.set_aspect("equal")
    ax.axis("off")
    return ax


def block_diagram(*, prenorm: bool = True, residual: bool = True, title=None) -> Figure:
    """Figure of one transformer block as boxes and arrows (lesson 08)."""
    fig, ax = new_figure(12.0, 2.6)
    draw_block_diagram(ax, prenorm=prenorm, residual=residual)
    default = "pre-norm block" if prenorm else "post-norm block (the 2017 original)"
    ax.set_title(title or default, fontsize=12)
    return fig


def pin_to_limits(values, limits):
    """Clip values into limits for a fixed log axis, and say which were pinned (lesson 08).

    Returns (clipped, below, above): below marks values under the floor (a gradient that
    underflowed to 0 among them), above those over the ceiling.
    """
    low, high = limits
    values = _numbers("values", values)
    clipped = [min(max(v, low), high) for v in values]
    return clipped, [v < low for v in values], [v > high for v in values]


def pinned_points(layers, ys, mask):
    """The (layers, ys) where mask is True: where to draw the pinned triangles (lesson 08)."""
    picked = [(x, y) for x, y, m in zip(layers, ys, mask, strict=True) if m]
    return ([x for x, _ in picked], [y for _, y in picked])


def setup_depth_axes(ax_grad, ax_scale, max_depth: int):
    """Fixed log axes for per-layer gradient norms and activation scales (lesson 08)."""
    for ax, limits in ((ax_grad, GRAD_LIMITS), (ax_scale, SCALE_LIMITS)):
        ax.set_yscale("log")
        ax.set_ylim(*limits)
        # few ticks, no minor ones: a log axis over 15 decades otherwise lays out hundreds
        # of tick labels, and the first draw takes a second
        ax.yaxis.set_major_locator(LogLocator(base=10, numticks=6))
        ax.yaxis.set_minor_locator(NullLocator())
        ax.set_xlim(0.5, max_depth + 0.5)
        ax.set_xlabel("block (1 = nearest the input)")
        ax.grid(True, which="major", alpha=0.3)
    ax_grad.set_ylabel("gradient norm reaching the block")
    ax_scale.set_ylabel("root-mean-square size of its output")
    ax_grad.set_title("backward: gradient reaching each block")
    ax_scale.set_title("forward: activation scale after each block")


def _around(values, factor: float) -> tuple[float, float]:
    """Log-axis limits around every positive value, a `factor` beyond each end."""
    positive = [v for v in values if v > 0]
    if not positive:
        return GRAD_LIMITS
    return min(positive) / factor, max(positive) * factor


def depth_profile_figure(curves: dict, *, grad_limits=None, scale_limits=None) -> Figure:
    """Per-layer gradient norms and activation scales of several stacks, side by side (lesson 08).

    curves: {label: (grad_norms, act_scales)}, each a 1-D tensor or list over layers. Each log
    axis spans the values drawn, unless limits are given (the explorer's fixed
    ones, say): then values beyond them are pinned to the edge and drawn as triangles, with a
    legend key. As in the explorer, a label that names a norm first ("layer norm, residual
    off") takes its colour and marker, and one that says "residual off" is drawn dashed.
    """
    if not curves:
        raise ValueError("curves: expected at least one (grad_norms, act_scales) pair, got none")
    grads = {label: _numbers(label, pair[0]) for label, pair in curves.items()}
    scales = {label: _numbers(label, pair[1]) for label, pair in curves.items()}
    depth = max(len(g) for g in grads.values())
    fig, (ax_grad, ax_scale) = new_figure(11.0, 4.4, ncols=2)
    setup_depth_axes(ax_grad, ax_scale, depth)
    limits = {
        ax_grad: grad_limits or _around([v for g in grads.values() for v in g], 3.0),
        ax_scale: scale_limits or _around([v for s in scales.values() for v in s], 1.5),
    }
    for ax, (low, high) in limits.items():
        ax.set_ylim(low, high)
        ax.tick_params(labelsize=10)
    if high / low < 1e3:  # the activations span a few decades: mark 1, 2, 5 of each
        ax_scale.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax_scale.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    others = _markers([label for label in curves if meaning(label) not in MARKERS])
    handles, pinned_any = [], False
    for label in curves:
        style = {
            "color": colour(label),
            "marker": MARKERS.get(meaning(label)) or others[label],
            "linestyle": "--" if "residual off" in label else "-",
        }
        for ax, values in ((ax_grad, grads[label]), (ax_scale, scales[label])):
            ys, below, above = pin_to_limits(values, limits[ax])
            layers = list(range(1, len(ys) + 1))
            (line,) = ax.plot(layers, ys, ms=4, label=label, **style)
            ax.plot(*pinned_points(layers, ys, below), "v", ms=7, color=line.get_color())
            ax.plot(*pinned_points(layers, ys, above), "^", ms=7, color=line.get_color())
            pinned_any = pinned_any or any(below) or any(above)
            if ax is ax_grad:
                handles.append(line)
    labels = list(curves)
    if pinned_any:
        handles.append(ax_grad.plot([], [], "v", ms=7, color="0.4")[0])
        labels.append("beyond the axis, pinned to its edge")
    fig.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 3),
               fontsize=10)  # fmt: skip
    return fig


def seed_dots_figure(
    groups: dict,
    *,
    xlabel: str,
    title: str,
    width: float = 7.2,
    log: bool = False,
    panels: bool = False,
) -> Figure:
    """Excess loss of trained models, one dot per seed and a bar at their mean (lessons 08
    and 09).

    groups: {label: {category: [excess of each seed]}}, every group with the same categories
    (the skills, or the depths), drawn side by side at each category with the group's own
    colour and marker; a group's seeds sit a little apart, so none hides another. log=True
    draws the excess on a log axis (every value must then be above 0: the floor itself lies
    below the axis); panels=True gives each category its own axes and range, each group named
    under its dots. On a linear axis the line at 0 is the floor.
    """
    if not groups:
        raise ValueError("groups: expected at least one {category: values} group, got none")
    categories = list(next(iter(groups.values())))
    for label, group in groups.items():
        if list(group) != categories:
            raise ValueError(
                f"groups[{label!r}]: expected the categories {categories}, got {list(group)}"
            )
    values = {
        (label, c): _numbers(f"groups[{label!r}][{c!r}]", group[c])
        for label, group in groups.items()
        for c in categories
    }
    if log and min(min(v) for v in values.values()) <= 0:
        raise ValueError("groups: a log axis needs every excess above 0; use log=False")
    fig, axes = new_figure(width, 4.0, ncols=len(categories) if panels else 1, squeeze=False)
    axes = list(axes.flat)
    count = len(groups)
    handles = []
    # the distance between two groups' dots: a whole unit in a panel of their own, where each
    # group is named under its dots; side by side within 0.8 of a category otherwise
    unit = 1.0 if panels else 0.8 / max(count, 2)
    for i, label in enumerate(groups):
        style = {"color": PALETTE[i % len(PALETTE)], "ms": 7, "alpha": 0.85}
        for j, category in enumerate(categories):
            ax = axes[j] if panels else axes[0]
            centre = (0 if panels else j) + (i - (count - 1) / 2) * unit
            seeds = values[(label, category)]
            spread = [(k - (len(seeds) - 1) / 2) * 0.15 * unit for k in range(len(seeds))]
            (dots,) = ax.plot([centre + d for d in spread], seeds,
                              LINE_MARKERS[i % len(LINE_MARKERS)], linestyle="none",
                              **style)  # fmt: skip
            mean = sum(seeds) / len(seeds)
            half = 0.375 * unit
            ax.plot([centre - half, centre + half], [mean, mean], color=style["color"], lw=2)
            if j == 0:
                handles.append(dots)
    handles.append(axes[0].plot([], [], color="0.3", lw=2)[0])
    labels = [*groups, "mean of the seeds"]
    for j, ax in enumerate(axes):
        if log:
            ax.set_yscale("log")
            ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.yaxis.set_minor_locator(NullLocator())
        else:
            line = ax.axhline(0.0, color="0.4", lw=1.0, linestyle=":")
            if j == 0:
                handles.append(line)
                labels.append("the floor (excess 0)")
        if panels:  # each group named under its own dots, so no colour has to be matched
            centres = [i - (count - 1) / 2 for i in range(count)]
            ax.set_xticks(centres, [str(label).replace(", ", ",\n") for label in groups])
            ax.set_xlim(-count / 2, count / 2)
            ax.set_title(str(categories[j]), fontsize=11)
            ax.set_xlabel(xlabel, fontsize=10)
        else:
            ax.set_xticks(range(len(categories)), [str(c) for c in categories], fontsize=10)
            ax.set_xlim(-0.6, len(categories) - 0.4)
            ax.set_xlabel(xlabel)
        ax.tick_params(axis="y", labelsize=10)
        ax.tick_params(axis="x", labelsize=9 if panels else 10)
        ax.grid(True, axis="y", which="major", alpha=0.3)
    scale = " (log scale)" if log else ""
    axes[0].set_ylabel(f"excess loss over the floor (nats){scale}")
    fig.suptitle(title, fontsize=11)
    fig.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 3),
               fontsize=10)  # fmt: skip
    return fig
