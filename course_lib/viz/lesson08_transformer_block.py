"""Lesson 08's figures: the block diagram, per-layer gradient norms and activation scales on
fixed log axes, and trained models' excess loss, one dot per seed (lessons 08 and 09)."""

from matplotlib.figure import Figure
from matplotlib.patches import Circle
from matplotlib.ticker import LogLocator, NullLocator

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
SCALE_LIMITS = (1e-2, 1e3)


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
    xs = [1.6 * i for i in range(len(parts))]
    for x, (text, color) in zip(xs, parts, strict=True):
        if color is None:
            ax.text(x, 0, text, ha="center", va="center", fontsize=12, fontweight="bold")
        elif text == "+":
            ax.add_patch(Circle((x, 0), 0.28, facecolor="white", edgecolor="black", lw=1.2))
            ax.text(x, 0, "+", ha="center", va="center", fontsize=14)
        else:
            _box(ax, x, 0, text, color)
    half = [0.25 if c is None else 0.3 if t == "+" else 0.68 for t, c in parts]  # x extents
    for i in range(len(parts) - 1):
        _arrow(ax, (xs[i] + half[i], 0), (xs[i + 1] - half[i + 1], 0))
    if residual:
        top = 0.95
        for start, end in skips:
            # the copy splits off the arrow that leaves `start`, after everything in that box
            split = (xs[start] + half[start] + xs[start + 1] - half[start + 1]) / 2
            ax.plot([split, split, xs[end]], [0, top, top], color="tab:red", lw=1.4)
            ax.plot([split], [0], "o", color="tab:red", ms=4)
            _arrow(ax, (xs[end], top), (xs[end], 0.3), color="tab:red")
        ax.text(xs[0] + 0.2, 1.35, "residual path (x + ...)", color="tab:red", fontsize=10)
    ax.set_xlim(xs[0] - 0.6, xs[-1] + 0.6)
    ax.set_ylim(-0.9, 1.7)
    ax.set_aspect("equal")
    ax.axis("off")
    return ax


def block_diagram(*, prenorm: bool = True, residual: bool = True, title=None) -> Figure:
    """Figure of one transformer block as boxes and arrows (lesson 08)."""
    fig, ax = new_figure(10.5, 2.6)
    draw_block_diagram(ax, prenorm=prenorm, residual=residual)
    ax.set_title(title or ("pre-norm block" if prenorm else "post-norm block (the 2017 original)"))
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
    ax_scale.set_ylabel("RMS of the block's output")
    ax_grad.set_title("backward: gradient reaching each block")
    ax_scale.set_title("forward: activation scale after each block")


def depth_profile_figure(curves: dict) -> Figure:
    """Per-layer gradient norms and activation scales of several stacks, side by side (lesson 08).

    curves: {label: (grad_norms, act_scales)}, each a 1-D tensor or list over layers.
    Values beyond the fixed axes are pinned to the edge and drawn as triangles. As in the
    explorer, a label that names a norm first ("layer norm, residual off") takes its colour
    and marker, and one that says "residual off" is drawn dashed.
    """
    if not curves:
        raise ValueError("curves: expected at least one (grad_norms, act_scales) pair, got none")
    depth = max(len(_numbers(label, pair[0])) for label, pair in curves.items())
    fig, (ax_grad, ax_scale) = new_figure(11.0, 3.8, ncols=2)
    setup_depth_axes(ax_grad, ax_scale, depth)
    others = _markers([label for label in curves if meaning(label) not in MARKERS])
    for label, (grads, scales) in curves.items():
        style = {
            "color": colour(label),
            "marker": MARKERS.get(meaning(label)) or others[label],
            "linestyle": "--" if "residual off" in label else "-",
        }
        for ax, values, limits in ((ax_grad, grads, GRAD_LIMITS), (ax_scale, scales, SCALE_LIMITS)):
            ys, below, above = pin_to_limits(values, limits)
            layers = list(range(1, len(ys) + 1))
            (line,) = ax.plot(layers, ys, ms=3, label=label, **style)
            ax.plot(*pinned_points(layers, ys, below), "v", ms=7, color=line.get_color())
            ax.plot(*pinned_points(layers, ys, above), "^", ms=7, color=line.get_color())
    # two rows along the top: the lines of lesson 08 stay below 1e2, and the pinned triangles
    # lie on the floor, so a legend at the bottom would hide some of them
    ax_grad.legend(fontsize=9, loc="upper center", ncols=2)
    return fig


def seed_dots_figure(groups: dict, *, xlabel: str, title: str, width: float = 7.2) -> Figure:
    """Excess loss of trained models, one dot per seed (lessons 08 and 09).

    groups: {label: {category: [excess of each seed]}}, every group with the same categories
    (the skills, or the depths), drawn side by side at each category with the group's own
    colour and marker. The line at 0 is the floor.
    """
    if not groups:
        raise ValueError("groups: expected at least one {category: values} group, got none")
    categories = list(next(iter(groups.values())))
    for label, group in groups.items():
        if list(group) != categories:
            raise ValueError(
                f"groups[{label!r}]: expected the categories {categories}, got {list(group)}"
            )
    fig, ax = new_figure(width, 3.8)
    count = len(groups)
    for i, (label, group) in enumerate(groups.items()):
        offset = (i - (count - 1) / 2) * 0.8 / max(count, 2)
        for j, category in enumerate(categories):
            values = _numbers(f"groups[{label!r}][{category!r}]", group[category])
            ax.plot([j + offset] * len(values), values, LINE_MARKERS[i % len(LINE_MARKERS)],
                    ms=7, color=PALETTE[i % len(PALETTE)], alpha=0.85,
                    label=label if j == 0 else None)  # fmt: skip
    ax.axhline(0.0, color="0.4", lw=1.0, label="the floor (excess 0)")
    ax.set_xticks(range(len(categories)), [str(c) for c in categories], fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("excess loss over the floor (nats)")
    ax.set_title(title, fontsize=11)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=9)
    return fig
