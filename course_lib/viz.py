"""Pictures: tensors in, matplotlib Figures out. Nothing here changes a tensor.

Figures are made with matplotlib.figure.Figure, not pyplot, so they are never shown twice
and never pile up in pyplot's list of open figures; a notebook shows one by ending a cell
with it.
"""

import io

import numpy as np
import seaborn as sns
import torch
from matplotlib import rcParams
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.cm import ScalarMappable
from matplotlib.collections import LineCollection
from matplotlib.colors import Normalize, SymLogNorm
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.patches import Circle, FancyBboxPatch
from matplotlib.ticker import LogLocator, NullLocator
from matplotlib.transforms import IdentityTransform
from PIL import Image

DPI = 80  # small PNGs keep explorers fast; still sharp at notebook width

# Colour that everyone can read. Lines and bars take the Okabe-Ito palette, which stays
# distinct with the common colour-vision deficiencies (matplotlib's default puts red and
# green side by side); every figure's axes cycle through it. Maps of values in 0..1 use
# viridis, and signed values a diverging map centred on 0 (RdBu_r, -1..1).
PALETTE = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#D55E00",  # vermillion
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
    "#F0E442",  # yellow
    "#000000",  # black
)
BLUE, ORANGE, GREEN, VERMILLION, PURPLE = PALETTE[:5]
VIRIDIS_DARK = "#440154"  # viridis at 0: the background of an attention map

# one colour per meaning, in every lesson (a label names its meaning, see `meaning`)
COLOURS = {
    "scaled": BLUE,  # lesson 02: scores divided by sqrt(d_k)
    "q . k / sqrt(d_k)": BLUE,
    "unscaled": VERMILLION,
    "q . k": VERMILLION,
    "RoPE": BLUE,  # lesson 04: how position gets in
    "sinusoidal added": ORANGE,
    "no positions": GREEN,
    "q": BLUE,  # lesson 04: a query and a key
    "k": ORANGE,
    "layer norm": BLUE,  # lesson 05: the norm in a block
    "batch norm": ORANGE,
    "no norm": PURPLE,
    "GELU": BLUE,  # lesson 05: the feed-forward layer's activation
    "ReLU": VERMILLION,
    "training": BLUE,  # lesson 06: loss curves
    "validation": ORANGE,
}
# never meaning by colour alone: meanings drawn as lines in more than one picture also keep
# one marker (lesson 05's explorer draws pre-norm filled, post-norm hollow)
MARKERS = {
    "scaled": "o",
    "q . k / sqrt(d_k)": "o",
    "unscaled": "s",
    "q . k": "s",
    "layer norm": "o",
    "batch norm": "s",
    "no norm": "D",
    "GELU": "o",
    "ReLU": "s",
}
LINE_STYLES = ("-", "--", "-.", ":")  # for lines told apart by dash pattern
LINE_MARKERS = ("o", "s", "^", "D", "v", "P")  # for lines told apart by marker


def meaning(label: str) -> str | None:
    """The meaning a legend label names, if COLOURS has one: the label itself, or its part
    before ", " or " (" ("layer norm, residual off" -> "layer norm") (lessons 02-06)."""
    for name in (label, label.split(", ")[0], label.split(" (")[0]):
        if name in COLOURS:
            return name
    return None


def colour(label: str):
    """The course's colour for what a label names; None (the axes' next colour) otherwise."""
    return COLOURS.get(meaning(label))


def new_figure(width: float = 6.4, height: float = 4.0, ncols: int = 1, nrows: int = 1, **kw):
    """A constrained-layout Figure and its axes, which cycle through PALETTE (lesson 00)."""
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    kw.setdefault("squeeze", True)
    axes = fig.subplots(nrows, ncols, **kw)
    for ax in np.atleast_1d(axes).flat:
        ax.set_prop_cycle(color=PALETTE)
    return fig, axes


def to_png(fig: Figure) -> bytes:
    """Render a Figure to PNG bytes, as the notebook's inline display would (lesson 00)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def canvas_png(canvas, height: int | None = None) -> bytes:
    """PNG bytes of what an Agg canvas holds now, at fast compression (explorers, lesson 00);
    only its top `height` pixel rows where given.

    Colour without alpha: every figure is opaque, and three bytes a pixel instead of four
    make the PNG about 10% smaller and its encoding (and the browser's decoding) faster, with
    not one pixel changed. A 256-colour palette would halve the size again, but it moves
    colours: Pillow's fast quantiser turned the white background off-white and merged close
    heatmap shades (up to 14/255 per channel), and the exact ones took longer than this whole
    encoding (measured for issue 18)."""
    width, full = canvas.get_width_height()
    picture = Image.frombuffer("RGBA", (width, full), canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
    if height is not None and height < full:
        picture = picture.crop((0, 0, width, height))
    picture = picture.convert("RGB")
    buffer = io.BytesIO()
    picture.save(buffer, format="png", compress_level=1)
    return buffer.getvalue()


def _as_array(weights):
    if isinstance(weights, torch.Tensor):
        weights = weights.detach().cpu().numpy()
    if weights.ndim != 2:
        raise ValueError(f"weights: expected a 2-D (T_q, T_k) matrix, got shape {weights.shape}")
    return weights


def draw_attention(ax, weights, query_labels=None, key_labels=None, *, annot=False, cbar=True):
    """Draw a (T_q, T_k) weight matrix as a labelled seaborn heatmap on ax (lesson 01)."""
    data = _as_array(weights)
    sns.heatmap(
        data,
        ax=ax,
        vmin=0.0,
        vmax=1.0,
        cmap="viridis",
        square=True,
        annot=annot,
        fmt=".2f",
        annot_kws={"fontsize": 8},
        cbar=cbar,
        cbar_kws={"shrink": 0.8, "label": "attention weight"},
        xticklabels=key_labels if key_labels is not None else "auto",
        yticklabels=query_labels if query_labels is not None else "auto",
    )
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    ax.tick_params(axis="x", labelrotation=90)
    ax.tick_params(axis="y", labelrotation=0)
    return ax


def attention_heatmap(
    weights, query_labels=None, key_labels=None, *, title=None, annot=None
) -> Figure:
    """Figure of one attention weight matrix, rows = queries, columns = keys (lesson 01)."""
    data = _as_array(weights)
    size = max(3.5, 0.45 * data.shape[1] + 2.0)
    fig, ax = new_figure(size, max(3.0, 0.45 * data.shape[0] + 1.2))
    if annot is None:
        annot = max(data.shape) <= 8
    draw_attention(ax, data, query_labels, key_labels, annot=annot)
    if title:
        ax.set_title(title)
    return fig


# ---------------------------------------------------------------- lesson 01


def _numbers(name, values):
    if isinstance(values, torch.Tensor):
        values = values.detach().cpu().tolist()
    values = list(values)
    if not values:
        raise ValueError(f"{name}: expected a non-empty sequence of numbers, got {values!r}")
    return values


def draw_weight_bars(ax, weights_row, key_labels, color="tab:blue"):
    """Bars of one query's attention weights over the keys, on a fixed 0..1 axis (lesson 01)."""
    heights = _numbers("weights_row", weights_row)
    if len(heights) != len(key_labels):
        raise ValueError(
            f"key_labels: expected one label per weight ({len(heights)}), got {len(key_labels)}"
        )
    bars = ax.bar(range(len(heights)), heights, color=color)
    ax.set_xticks(range(len(heights)), key_labels, rotation=90)
    ax.set_ylim(0, 1)
    ax.set_ylabel("attention weight")
    ax.set_xlabel("key (attended to)")
    return bars


def influence_figure(rnn_influence, attention_influence) -> Figure:
    """Log-scale plot: how much the last output depends on an input d steps back (lesson 01)."""
    rnn = _numbers("rnn_influence", rnn_influence)
    attn = _numbers("attention_influence", attention_influence)
    if len(rnn) != len(attn):
        raise ValueError(f"attention_influence: expected {len(rnn)} values, got {len(attn)}")
    back = list(range(len(rnn) - 1, -1, -1))  # input t sits T-1-t steps before the last
    fig, ax = new_figure(6.4, 3.6)
    ax.semilogy(back, rnn, "o-", ms=3, label="recurrent network (RNN)")
    ax.semilogy(back, attn, "s-", ms=3, label="one attention layer")
    ax.set_xlabel("how many steps back the input sits")
    ax.set_ylabel("influence on the last output\n(gradient norm)")
    ax.legend()
    ax.grid(True, which="major", alpha=0.3)
    return fig


# ---------------------------------------------------------------- lesson 02


REFERENCE_STYLES = ("--", ":", "-.")  # dashed, dotted, dash-dotted


def _markers(labels) -> dict:
    """A marker for each label, all different (up to six): its meaning's own (MARKERS) where
    no other label took it first, else the next one free."""
    chosen = {}
    for label in labels:
        own = MARKERS.get(meaning(label))
        if own is not None and own not in chosen.values():
            chosen[label] = own
    free = [m for m in LINE_MARKERS if m not in chosen.values()]
    rest = [label for label in labels if label not in chosen]
    return {label: chosen.get(label) or free[rest.index(label) % len(free)] for label in labels}


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


# ---------------------------------------------------------------- lesson 03


def set_token_ticks(ax, labels, *, x: bool = True, y: bool = True, fontsize: int = 8):
    """Token labels on a map's key axis (x) and query axis (y); blank where False (lesson 03)."""
    positions = list(range(len(labels)))
    # no ticks at all where unlabelled: an empty tick label still costs a text layout
    ax.set_xticks(positions if x else [], list(labels) if x else [], rotation=90, fontsize=fontsize)
    ax.set_yticks(positions if y else [], list(labels) if y else [], fontsize=fontsize)


def draw_head_map(ax, weights, labels=None, *, x_labels: bool = True, y_labels: bool = True):
    """One head's (T, T) attention as an image, queries down, keys across (lesson 03)."""
    data = _as_array(weights)
    image = ax.imshow(data, vmin=0.0, vmax=1.0, cmap="viridis", interpolation="nearest")
    ax.tick_params(length=0)
    if labels is not None:
        if len(labels) != data.shape[1]:
            raise ValueError(f"labels: expected one per token ({data.shape[1]}), got {len(labels)}")
        set_token_ticks(ax, labels, x=x_labels, y=y_labels)
    return image


def head_grid(
    weights, labels, *, titles=None, ncols: int = 4, cell: float = 2.5, title=None
) -> Figure:
    """Figure: one attention map per head from (n, T, T) weights, ncols to a row (lesson 03).

    Token labels sit on the outer axes only: keys under the last row, queries left of the
    first column. For a model's layers x heads, pass weights.flatten(0, 1) and ncols=H.
    """
    if isinstance(weights, torch.Tensor):
        weights = weights.detach().cpu()
    if weights.ndim != 3:
        raise ValueError(f"weights: expected (n, T, T) maps, got shape {tuple(weights.shape)}")
    n = weights.shape[0]
    if titles is not None and len(titles) != n:
        raise ValueError(f"titles: expected one per map ({n}), got {len(titles)}")
    ncols = min(ncols, n)
    nrows = -(-n // ncols)
    fig, axes = new_figure(cell * ncols + 1.2, cell * nrows + 0.7, ncols=ncols, nrows=nrows,
                           squeeze=False)  # fmt: skip
    for i, ax in enumerate(axes.flat):
        if i >= n:
            ax.set_visible(False)
            continue
        image = draw_head_map(
            ax, weights[i], labels, x_labels=i + ncols >= n, y_labels=i % ncols == 0
        )
        ax.set_title(titles[i] if titles is not None else f"head {i}", fontsize=10)
    fig.colorbar(image, ax=axes, shrink=0.6, label="attention weight")
    fig.supxlabel("key: the token looked at", fontsize=9)
    fig.supylabel("query: the token looking", fontsize=9)
    if title:
        fig.suptitle(title)
    return fig


def detector_heatmap(scores: dict, *, title=None) -> Figure:
    """Figure: each detector's score per (layer, head), one annotated panel each (lesson 03).

    scores: {detector name: (layers, H) tensor or nested list}, e.g. a card's "detectors".
    """
    if not scores:
        raise ValueError("scores: expected at least one detector, got none")
    tables = {name: torch.as_tensor(table, dtype=torch.float32) for name, table in scores.items()}
    for name, table in tables.items():
        if table.dim() != 2:
            raise ValueError(
                f"{name}: expected a (layers, H) table, got shape {tuple(table.shape)}"
            )
    layers, heads = next(iter(tables.values())).shape
    fig, axes = new_figure(
        min(4.6, 1.0 + 0.75 * heads) * len(tables), 1.2 + 0.55 * layers, ncols=len(tables)
    )
    axes = [axes] if len(tables) == 1 else list(axes)
    for i, (ax, (name, table)) in enumerate(zip(axes, tables.items(), strict=True)):
        sns.heatmap(
            table.numpy(), ax=ax, vmin=0.0, vmax=1.0, cmap="viridis", annot=True, fmt=".2f",
            annot_kws={"fontsize": 9}, cbar=i == len(tables) - 1,
            cbar_kws={"label": "mean attention\non the target"},
            xticklabels=range(heads), yticklabels=range(layers),
        )  # fmt: skip
        ax.set_title(name)
        ax.set_xlabel("head")
        ax.set_ylabel("layer" if i == 0 else "")
        ax.tick_params(axis="y", labelrotation=0)
    if title:
        fig.suptitle(title)
    return fig


HEAD_MARKERS = ("o", "s", "D", "^")  # 1, 2, 4, 8 heads: told apart by marker as well as colour


def heads_sweep_figure(runs, *, chance=None) -> Figure:
    """Figure: answer accuracy by number of heads, one point per seed, and during training
    (lesson 03). runs: dicts with "heads", "seed", "accuracy" and "accuracy_by_step"
    ([step, accuracy] pairs), e.g. the "runs" of data/checkpoints/places-sweep.json."""
    counts = sorted({run["heads"] for run in runs})
    if not counts or len(counts) > len(HEAD_MARKERS):
        raise ValueError(f"runs: expected 1 to {len(HEAD_MARKERS)} head counts, got {counts}")
    fig, (ax_end, ax_steps) = new_figure(10.0, 3.6, ncols=2, width_ratios=(1, 1.5))
    for i, H in enumerate(counts):
        mine = [run for run in runs if run["heads"] == H]
        colour, marker = PALETTE[i], HEAD_MARKERS[i]
        ends = np.array([run["accuracy"] for run in mine])
        spread = np.linspace(-0.15, 0.15, len(ends))  # side by side, so equal results show
        ax_end.scatter(i + spread, ends, s=36, marker=marker, facecolors="none",
                       edgecolors=colour, linewidths=1.3)  # fmt: skip
        ax_end.plot([i - 0.25, i + 0.25], [ends.mean()] * 2, color="black", lw=2)
        curves = np.array([[acc for _, acc in run["accuracy_by_step"]] for run in mine])
        steps = [step for step, _ in mine[0]["accuracy_by_step"]]
        for curve in curves:
            ax_steps.plot(steps, curve, color=colour, lw=0.8, alpha=0.45)
        ax_steps.plot(steps, curves.mean(axis=0), color=colour, marker=marker, lw=2,
                      label=f"H = {H}: mean of {len(curves)} seeds")  # fmt: skip
    ax_end.plot([], [], color="black", lw=2, label="mean over seeds")
    ax_end.set_xticks(range(len(counts)), [str(H) for H in counts])
    ax_end.set_xlabel("heads H (same width D, same parameters)")
    ax_end.set_ylabel("accuracy of the answers")
    ax_end.set_title("after training: one point per seed", fontsize=10)
    ax_steps.set_xlabel("training step")
    ax_steps.set_title("during training: thin lines are single seeds", fontsize=10)
    for ax in (ax_end, ax_steps):
        ax.set_ylim(-0.03, 1.03)
        if chance is not None:
            ax.axhline(chance, color="grey", ls=":", lw=1.2, label=f"chance ({chance:.2f})")
        ax.grid(alpha=0.3)
    ax_end.legend(fontsize=8, loc="center left")
    # beside the panel, not on it: every corner of it holds a curve
    ax_steps.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    return fig


# ---------------------------------------------------------------- lesson 05

GRAD_LIMITS = (1e-10, 1e5)  # fixed log axes: explorers never rescale, far values pin to an edge
SCALE_LIMITS = (1e-2, 1e3)


def _box(ax, x, y, text, color, width=1.25, height=0.9):
    ax.add_patch(
        FancyBboxPatch(
            (x - width / 2, y - height / 2),
            width,
            height,
            boxstyle="round,pad=0.04",
            facecolor=color,
            edgecolor="black",
            linewidth=1.2,
        )
    )
    ax.text(x, y, text, ha="center", va="center", fontsize=10)


def _arrow(ax, start, end, **kw):
    ax.annotate("", xy=end, xytext=start, arrowprops={"arrowstyle": "-|>", "lw": 1.4, **kw})


def draw_block_diagram(ax, *, prenorm: bool = True, residual: bool = True):
    """Boxes and arrows of one block, input on the left, output on the right (lesson 05)."""
    norm, attn, ff, add = "#f6d55c", "#9ecae1", "#a1d99b", "white"
    if prenorm:
        parts = [
            ("x", None),
            ("LayerNorm", norm),
            ("multi-head\nattention", attn),
            ("+", add),
            ("LayerNorm", norm),
            ("feed-forward\nLinear, GELU,\nLinear", ff),
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
            ("feed-forward\nLinear, GELU,\nLinear", ff),
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
    """Figure of one transformer block as boxes and arrows (lesson 05)."""
    fig, ax = new_figure(10.5, 2.6)
    draw_block_diagram(ax, prenorm=prenorm, residual=residual)
    ax.set_title(title or ("pre-norm block" if prenorm else "post-norm block (the 2017 original)"))
    return fig


def pin_to_limits(values, limits):
    """Clip values into limits for a fixed log axis, and say which were pinned (lesson 05).

    Returns (clipped, below, above): below marks values under the floor (a gradient that
    underflowed to 0 among them), above those over the ceiling.
    """
    low, high = limits
    values = _numbers("values", values)
    clipped = [min(max(v, low), high) for v in values]
    return clipped, [v < low for v in values], [v > high for v in values]


def pinned_points(layers, ys, mask):
    """The (layers, ys) where mask is True: where to draw the pinned triangles (lesson 05)."""
    picked = [(x, y) for x, y, m in zip(layers, ys, mask, strict=True) if m]
    return ([x for x, _ in picked], [y for _, y in picked])


def setup_depth_axes(ax_grad, ax_scale, max_depth: int):
    """Fixed log axes for per-layer gradient norms and activation scales (lesson 05)."""
    for ax, limits in ((ax_grad, GRAD_LIMITS), (ax_scale, SCALE_LIMITS)):
        ax.set_yscale("log")
        ax.set_ylim(*limits)
        # few ticks, no minor ones: a log axis over 15 decades otherwise lays out hundreds
        # of tick labels, and the first draw takes a second
        ax.yaxis.set_major_locator(LogLocator(base=10, numticks=6))
        ax.yaxis.set_minor_locator(NullLocator())
        ax.set_xlim(0.5, max_depth + 0.5)
        ax.set_xlabel("layer (1 = nearest the input)")
        ax.grid(True, which="major", alpha=0.3)
    ax_grad.set_ylabel("gradient norm reaching the layer")
    ax_scale.set_ylabel("RMS of the layer's output")
    ax_grad.set_title("backward: gradient reaching each layer")
    ax_scale.set_title("forward: activation scale after each layer")


def depth_profile_figure(curves: dict) -> Figure:
    """Per-layer gradient norms and activation scales of several stacks, side by side (lesson 05).

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
    # two rows along the top: the lines of lesson 05 stay below 1e2, and the pinned triangles
    # lie on the floor, so a legend at the bottom would hide some of them
    ax_grad.legend(fontsize=9, loc="upper center", ncols=2)
    return fig


def ffn_width_figure(curves: dict, losses: dict, d_model: int) -> Figure:
    """The feed-forward width sweep (lesson 05). Left, validation loss during training, the
    mean over seeds, one line per width; right, the final loss of each seed and their mean
    against the width. curves: {d_ff: (steps, mean losses)}; losses: {d_ff: [final loss of
    each seed]}; d_ff = 0 means no feed-forward sub-layer at all."""
    if not losses or set(curves) != set(losses):
        raise ValueError(
            f"curves, losses: expected the same widths, at least one, got {sorted(curves)} "
            f"and {sorted(losses)}"
        )
    widths = sorted(losses)
    fig, (ax_curve, ax_final) = new_figure(11.0, 3.9, ncols=2)
    for i, width in enumerate(widths):
        steps, mean = curves[width]
        ax_curve.plot(
            steps, _numbers(f"curves[{width}]", mean), marker=LINE_MARKERS[i % len(LINE_MARKERS)],
            linestyle=LINE_STYLES[i // len(LINE_MARKERS)], ms=5,
            label=_width_label(width, d_model).replace("\n", " "),
        )  # fmt: skip
    ax_curve.set_xlabel("training step")
    ax_curve.set_ylabel("validation loss (mean of seeds)")
    ax_curve.set_title("during training: same steps, batches and schedule")
    ax_curve.grid(True, alpha=0.3)
    ax_curve.legend(title="d_ff", fontsize=9, ncols=2)
    where = range(len(widths))
    for i, width in zip(where, widths, strict=True):
        ys = _numbers(f"losses[{width}]", losses[width])
        label = "one seed" if i == 0 else None
        ax_final.plot([i] * len(ys), ys, "o", ms=6, color=ORANGE, alpha=0.8, label=label)
    means = [float(np.mean(losses[w])) for w in widths]
    seeds = len(losses[widths[0]])
    ax_final.plot(where, means, "D-", color=BLUE, lw=1.5, ms=6, label=f"mean of {seeds} seeds")
    ax_final.set_xticks(list(where), [_width_label(w, d_model) for w in widths], fontsize=10)
    ax_final.set_xlabel("feed-forward hidden width d_ff")
    ax_final.set_ylabel("validation loss at the end")
    ax_final.set_title("after the last step (note the scale)")
    ax_final.grid(True, axis="y", alpha=0.3)
    ax_final.legend(fontsize=10)
    return fig


def _width_label(width: int, d_model: int) -> str:
    if width == 0:
        return "0\n(none)"
    ratio = width / d_model
    return f"{width}\n({'D' if ratio == 1 else f'{ratio:g}D' if ratio > 1 else f'D/{1 / ratio:g}'})"


# ---------------------------------------------------------------- lesson 06


def plot_history(history, *, smooth: int = 25) -> Figure:
    """Loss curves and per-block gradient norms of a training run (lesson 06).

    history: what course_lib.train.train returns (step, train_loss, val_step, val_loss,
    grad_norm: per step, one norm per block). Training loss is drawn faint per step and as
    a running mean over `smooth` steps.
    """
    if not history.step:
        raise ValueError("history: expected at least one recorded step, got an empty history")
    steps = torch.tensor(history.step, dtype=torch.float32)
    loss = torch.tensor(history.train_loss)
    window = max(1, min(int(smooth), len(loss)))
    running = loss.unfold(0, window, 1).mean(dim=1)  # (steps - window + 1,)
    fig, (ax_loss, ax_grad) = new_figure(11.0, 3.8, ncols=2)
    ax_loss.plot(steps, loss, color=COLOURS["training"], alpha=0.25, lw=0.8)
    training = {"color": COLOURS["training"], "label": f"training (mean of {window})"}
    ax_loss.plot(steps[window - 1 :], running, **training)
    validation = {"color": COLOURS["validation"], "label": "validation"}
    ax_loss.plot(history.val_step, history.val_loss, "o-", ms=4, **validation)
    ax_loss.set_xlabel("step")
    ax_loss.set_ylabel("cross-entropy loss (nats)")
    ax_loss.set_title("loss")
    ax_loss.legend(fontsize=9)
    ax_loss.grid(True, alpha=0.3)
    norms = torch.tensor(history.grad_norm)  # (steps, blocks)
    for block in range(norms.shape[1]):
        style = LINE_STYLES[block % len(LINE_STYLES)]  # blocks told apart without colour too
        ax_grad.plot(steps, norms[:, block], style, lw=0.8, label=f"block {block}")
    ax_grad.set_yscale("log")
    ax_grad.set_xlabel("step")
    ax_grad.set_ylabel("gradient norm (before clipping)")
    ax_grad.set_title("gradient norm of each block")
    ax_grad.legend(fontsize=9)
    ax_grad.grid(True, alpha=0.3)
    return fig


# ---------------------------------------------------------------- lesson 04


def encoding_heatmap(pe, *, title="sinusoidal encoding") -> Figure:
    """Heatmap of a (T, D) positional encoding: rows positions, columns dimensions (lesson 04)."""
    data = pe.detach().cpu().numpy() if isinstance(pe, torch.Tensor) else pe
    if data.ndim != 2:
        raise ValueError(f"pe: expected a 2-D (T, D) encoding, got shape {data.shape}")
    fig, ax = new_figure(6.4, 4.2)
    image = ax.imshow(data, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    fig.colorbar(image, ax=ax, shrink=0.85, label="value")
    ax.set_xlabel("dimension (even: sin, odd: cos)")
    ax.set_ylabel("position")
    ax.set_title(title)
    return fig


def cosine_scale(values) -> dict:
    """How to colour cosines: viridis on 0..1 when none is negative, else a diverging map
    centred on 0 (RdBu_r, -1..1), so that white means 0 (lesson 04)."""
    if float(torch.as_tensor(values).min()) >= 0:
        return {"cmap": "viridis", "vmin": 0.0, "vmax": 1.0}
    return {"cmap": "RdBu_r", "vmin": -1.0, "vmax": 1.0}


def similarity_figure(sim, rows=(0, 16, 40)) -> Figure:
    """The (T, T) position similarity as a heatmap, and a few of its rows as curves (lesson 04)."""
    data = sim.detach().cpu() if isinstance(sim, torch.Tensor) else torch.as_tensor(sim)
    fig, (ax_map, ax_rows) = new_figure(11.0, 4.0, ncols=2, width_ratios=[1, 1.3])
    scale = cosine_scale(data)
    image = ax_map.imshow(data.numpy(), interpolation="nearest", **scale)
    fig.colorbar(image, ax=ax_map, shrink=0.85, label="cosine similarity")
    ax_map.set_xlabel("position")
    ax_map.set_ylabel("position")
    ax_map.set_title("every pair of positions")
    for i, row in enumerate(rows):  # each row its own colour and dash pattern
        style = LINE_STYLES[i % len(LINE_STYLES)]
        ax_rows.plot(data[row].numpy(), style, label=f"position {row}")
        ax_rows.axvline(row, color=ax_rows.lines[-1].get_color(), lw=0.8, ls=":")
    ax_rows.set_ylim(scale["vmin"] - 0.05, scale["vmax"] + 0.05)
    ax_rows.set_xlabel("other position")
    ax_rows.set_ylabel("cosine similarity")
    ax_rows.set_title("one row each: the peak is the position itself")
    ax_rows.legend(fontsize=9, loc="lower right")
    ax_rows.grid(True, alpha=0.3)
    return fig


def setup_pair_axes(ax, limit: float, title="pair 0 of q and k"):
    """Square axes centred on 0 for drawing 2-vectors as arrows from the origin (lesson 04)."""
    ax.set_xlim(-limit, limit)
    ax.set_ylim(-limit, limit)
    ax.set_aspect("equal")
    ax.axhline(0, color="0.8", lw=0.8)
    ax.axvline(0, color="0.8", lw=0.8)
    ax.set_xlabel("dimension 2i")
    ax.set_ylabel("dimension 2i+1")
    ax.set_title(title)


def pair_arrow(ax, xy, **kw):
    """A line from the origin to xy with a dot (or another marker) at its tip: a cheap,
    movable arrow (lesson 04)."""
    kw.setdefault("linestyle", "-")
    kw.setdefault("marker", "o")
    (line,) = ax.plot([0, float(xy[0])], [0, float(xy[1])], markevery=[1], **kw)
    return line


def rotated_pair_figure(pair, positions, theta: float = 1.0) -> Figure:
    """One 2-D pair rotated by position * theta for a few positions, arrows from 0 (lesson 04)."""
    from course_lib.position_demos import rotate_pair

    pair = torch.as_tensor(pair, dtype=torch.float32)
    positions = list(positions)
    fig, ax = new_figure(4.6, 4.4)
    setup_pair_axes(ax, 1.25 * float(pair.norm()), title=f"one pair rotated by p x {theta:g} rad")
    # viridis without its palest end: every arrow stands out on white
    colors = sns.color_palette("viridis", len(positions) + 1)[: len(positions)]
    for p, color in zip(positions, colors, strict=True):
        xy = rotate_pair(pair, p * theta)
        pair_arrow(ax, xy, color=color, lw=2)
        ax.annotate(f"p={p}", xy.tolist(), textcoords="offset points", xytext=(4, 4), fontsize=9)
    return fig


def length_generalisation_figure(curves: dict, train_len: int, *, smooth: int = 4) -> Figure:
    """Loss by position for several models, trained length shaded (lesson 04).

    curves: label -> (T-1,) mean loss of the prediction made at each position. Each curve
    is drawn as a running mean over `smooth` positions (single positions are noisy).
    """
    fig, ax = new_figure(8.5, 3.8)
    ax.axvspan(-0.5, train_len - 0.5, color="0.92", label=f"trained length (t < {train_len})")
    for i, (label, values) in enumerate(curves.items()):
        style = LINE_STYLES[i % len(LINE_STYLES)]  # told apart by dash pattern and colour
        values = torch.as_tensor(values, dtype=torch.float32)
        window = max(1, min(int(smooth), len(values)))
        running = values.unfold(0, window, 1).mean(dim=1)  # (T - window,)
        at = torch.arange(window - 1, len(values))  # (T - window + 1,)
        ax.plot(at.numpy(), running.numpy(), style, color=colour(label), label=label)
    ax.set_xlabel("position t of the prediction")
    ax.set_ylabel(f"loss (nats, mean of {smooth} positions)")
    ax.set_title("loss by position on sequences 4x longer than in training")
    ax.legend(fontsize=9, loc="upper left")
    ax.grid(True, alpha=0.3)
    return fig


# ---------------------------------------------------------------- lesson 06 (capstone)

# one look per head detector (names as in course_lib.heads.DETECTORS) in every picture: the
# mark on an attention map's (query, key) cell, its colour there, a colour for bars, and how
# the mark reads in words (the marks' edges must show on viridis, the bars' colours on white)
DETECTOR_STYLES = {
    "previous": {"marker": "o", "edge": "white", "color": BLUE, "mark": "white circles"},
    "bracket": {"marker": "s", "edge": "red", "color": VERMILLION, "mark": "red squares"},
    "subject": {"marker": "D", "edge": "orange", "color": ORANGE, "mark": "orange diamonds"},
}


def detector_timeline(steps, records, detectors=tuple(DETECTOR_STYLES), chance=None) -> Figure:
    """Best head's score per detector over training steps (lesson 06).

    records: one dict per step, detector name -> (layers, H) scores; chance: optional
    detector name -> the score of a head spreading evenly (heads.chance_scores), drawn dashed.
    """
    if len(steps) != len(records) or not records:
        raise ValueError(f"records: expected one per step ({len(steps)}), got {len(records)}")
    fig, ax = new_figure(7.6, 3.4)
    for name in detectors:
        style, best = DETECTOR_STYLES[name], [float(r[name].max()) for r in records]
        ax.plot(steps, best, marker=style["marker"], ms=4, color=style["color"], label=name)
    # chance levels can lie close together: each gets its own dash pattern and legend entry
    dashes = dict(zip(detectors, LINE_STYLES[1:] * len(detectors), strict=False))
    for name in detectors if chance is not None else ():
        ax.axhline(chance[name], color=DETECTOR_STYLES[name]["color"], ls=dashes[name], lw=1.2,
                   label=f"{name} chance")  # fmt: skip
    ax.set_ylim(0, 1)
    ax.set_xlabel("training step")
    ax.set_ylabel("best head's detector score")
    ax.set_title("how early each job finds a head")
    fig.legend(fontsize=8, loc="outside right center")
    ax.grid(True, alpha=0.3)
    return fig


def detector_heatmaps(tables: dict, detectors=tuple(DETECTOR_STYLES), chance=None) -> Figure:
    """Rows of (layer x head) detector heatmaps: one row per model, one column per detector.

    tables: model label -> {detector: (layers, H) scores} (lesson 06). chance: optional
    detector name -> the score of a head spreading evenly, marked on the column's colour bar.
    """
    fig, axes = new_figure(
        11.0, 2.1 * len(tables) + 0.6, ncols=len(detectors), nrows=len(tables), squeeze=False
    )
    scale = ScalarMappable(Normalize(0, 1), cmap="viridis")
    for col, name in enumerate(detectors):
        label = f"{name} score" + (
            "" if chance is None else f"\n(white line: chance {chance[name]:.2f})"
        )
        bar = fig.colorbar(scale, ax=axes[:, col], label=label, pad=0.02, aspect=30)
        if chance is not None:
            bar.ax.axhline(chance[name], color="white", lw=2)
    for row, (label, scores) in enumerate(tables.items()):
        for col, name in enumerate(detectors):
            table = scores[name]
            ax = axes[row][col]
            sns.heatmap(
                table.numpy(),
                ax=ax,
                vmin=0,
                vmax=1,
                cmap="viridis",
                annot=True,
                fmt=".2f",
                cbar=False,
                annot_kws={"fontsize": 9},
            )
            ax.set_xlabel("head")
            ax.set_ylabel("layer")
            ax.set_title(f"{label}: {name}", fontsize=10)
    return fig


def attention_grid(weights, tokens, pairs=None) -> Figure:
    """Every (layer, head) attention map of one sequence, labelled with its tokens (lesson 06).

    weights: one (H, T, T) tensor per layer; pairs: optional detector -> [(query, key)],
    marked on every map so you can see which head looks where the job needs.
    """
    layers, H = len(weights), weights[0].shape[0]
    fig, axes = new_figure(3.1 * H + 1.2, 3.4 * layers + 0.6, ncols=H, nrows=layers, squeeze=False)
    for layer in range(layers):
        for head in range(H):
            ax = axes[layer][head]
            image = ax.imshow(weights[layer][head].numpy(), vmin=0, vmax=1, cmap="viridis")
            for name, found in (pairs or {}).items():
                if found:
                    q, k = zip(*found, strict=True)
                    style = DETECTOR_STYLES.get(name, {"marker": "x", "edge": "white"})
                    ax.scatter(
                        k,
                        q,
                        s=18,
                        marker=style["marker"],
                        facecolors="none",
                        edgecolors=style["edge"],
                        linewidths=1.2,
                        label=name,
                    )
            # token names on the outer maps only, at a readable size
            set_token_ticks(ax, tokens, x=layer == layers - 1, y=head == 0)
            ax.set_title(f"layer {layer}, head {head}", fontsize=10)
        axes[layer][0].set_ylabel("query (predicts the next token)")
    for ax in axes[-1]:
        ax.set_xlabel("key")
    fig.colorbar(image, ax=axes, shrink=0.6, label="attention weight")
    if pairs:
        handles, labels = axes[0][0].get_legend_handles_labels()
        # on the maps' darkest colour, where the marks were made to show (white ones too)
        where = {"loc": "outside lower center", "ncols": len(labels), "fontsize": 9}
        look = {"facecolor": VIRIDIS_DARK, "labelcolor": "white", "framealpha": 1}
        fig.legend(handles, labels, **where, **look)
    return fig


SQUEEZE_ABOVE = 0.25  # ablation_heatmap: colours linear below this rise, logarithmic above


def ablation_heatmap(labels, table, skills, *, limit: float = 1.0, title=None) -> Figure:
    """Figure: loss increase per skill (columns) when each head (rows) is knocked out (lesson 06).

    labels, table: what ablation.ablation_table returns (labels[0] None, the baseline row);
    skills: the column names. Increases are signed (a knock-out can help a little), so RdBu_r
    centred on 0, reaching +-limit or the largest increase, whichever is further. Past
    SQUEEZE_ABOVE the colours are spaced logarithmically, so a rise five times another still
    looks darker while small rises keep some colour; every cell carries its number.
    """
    table = torch.as_tensor(table, dtype=torch.float32)
    if labels[0] is not None or table.shape != (len(labels), len(skills)):
        raise ValueError(
            f"table: expected ablation_table's rows (baseline first) x {len(skills)} skills, "
            f"got labels {labels[:2]}... and shape {tuple(table.shape)}"
        )
    rise = (table[1:] - table[0]).numpy()  # (heads, skills)
    rows = [f"layer {layer}, head {head}" for layer, head in labels[1:]]
    reach = max(float(limit), float(np.abs(rise).max()))
    norm = SymLogNorm(SQUEEZE_ABOVE, linscale=1.0, vmin=-reach, vmax=reach, base=10)
    fig, ax = new_figure(1.6 + 1.25 * len(skills), 0.9 + 0.36 * len(rows))
    image = ax.imshow(rise, cmap="RdBu_r", norm=norm, aspect="auto")
    for (i, j), value in np.ndenumerate(rise):
        ink = "white" if abs(norm(value) - 0.5) > 0.3 else "black"
        ax.text(j, i, f"{value:+.2f}", ha="center", va="center", fontsize=9, color=ink)
    columns = [f"{skill}\n(base {float(table[0, j]):.2f})" for j, skill in enumerate(skills)]
    ax.set_xticks(range(len(skills)), columns, fontsize=9)
    ax.set_yticks(range(len(rows)), rows, fontsize=9)
    ax.set_xlabel("skill: loss on its positions (nats)")
    ax.set_ylabel("head knocked out")
    ax.tick_params(length=0)
    label = f"loss increase (nats)\nscale squeezed past {SQUEEZE_ABOVE:g}"
    bar = fig.colorbar(image, ax=ax, label=label)
    ticks = [t for t in (-5, -1, -SQUEEZE_ABOVE, 0, SQUEEZE_ABOVE, 1, 5) if abs(t) <= reach]
    bar.set_ticks(ticks, labels=[f"{t:g}" for t in ticks])
    bar.minorticks_off()
    ax.set_title(title or "loss increase when one head is knocked out", fontsize=10)
    return fig


class TickStamp:
    """Tick marks and tick labels stamped onto an Agg canvas from pictures made once (lesson 06).

    matplotlib lays out and rasterises every tick label each time its axis is drawn, about a
    millisecond a label, so a 32-token sentence spends most of its redraw on 64 words. When
    the labels come from a small vocabulary, each word is rendered once here (all new ones in
    one scratch drawing) and later only copied, with the font, tick length, padding and
    alignment that matplotlib's own tick labels use; the result differs from matplotlib's by
    at most a pixel of rounding.
    """

    # how matplotlib aligns tick labels: y to the left of the axes, x hanging below it
    KINDS = {
        "y": {"rotation": 0, "ha": "right", "va": "center_baseline"},
        "x": {"rotation": 0, "ha": "center", "va": "top"},
        "x90": {"rotation": 90, "ha": "center", "va": "top"},
    }

    def __init__(self, fig: Figure, fontsize=None, tick_length=None):
        self.fig = fig
        self.fontsize = rcParams["xtick.labelsize"] if fontsize is None else fontsize
        points = fig.dpi / 72  # pixels per point
        length = rcParams["xtick.major.size"] if tick_length is None else tick_length  # points
        self.length = length * points
        self.gap = (length + rcParams["xtick.major.pad"]) * points
        self.pictures = {}  # (text, kind) -> (RGBA rows bottom-up, anchor inside them)
        self.marks = LineCollection(
            [], colors=rcParams["xtick.color"], linewidths=rcParams["xtick.major.width"]
        )
        self.marks.set_transform(IdentityTransform())  # segments in canvas pixels
        self.marks.set_figure(fig)  # drawn only by stamp(), never by a full draw

    def prepare(self, texts, kind: str = "y") -> None:
        """Render every text not seen before as a kind of label ("y", "x" or "x90")."""
        if kind not in self.KINDS:
            raise ValueError(f"kind: expected one of {sorted(self.KINDS)}, got {kind!r}")
        todo = [t for t in dict.fromkeys(map(str, texts)) if (t, kind) not in self.pictures]
        if not todo:
            return
        style = self.KINDS[kind]
        em = FontProperties(size=self.fontsize).get_size_in_points() * self.fig.dpi / 72
        step = int(3 * em)  # pixels between two anchors, integers so no rounding is needed
        longest = int(12 + em * max(map(len, todo)))  # more than any text's length
        span = (len(todo) + 1) * step
        vertical = kind == "y"  # y labels stacked one above the other, x labels side by side
        size = (longest, span) if vertical else (span, longest)
        scratch = Figure(figsize=(size[0] / self.fig.dpi, size[1] / self.fig.dpi), dpi=self.fig.dpi)
        scratch.patch.set_alpha(0)
        canvas = FigureCanvasAgg(scratch)
        anchors = [
            (longest - 6, (i + 1) * step) if vertical else ((i + 1) * step, longest - 6)
            for i in range(len(todo))
        ]
        placed = [
            scratch.text(*xy, text, fontsize=self.fontsize, transform=IdentityTransform(), **style)
            for text, xy in zip(todo, anchors, strict=True)
        ]
        canvas.draw()
        renderer = canvas.get_renderer()
        pixels = np.asarray(canvas.buffer_rgba())
        height = pixels.shape[0]
        for text, artist, (x, y) in zip(todo, placed, anchors, strict=True):
            box = artist.get_window_extent(renderer)
            x0, x1 = int(np.floor(box.x0)) - 1, int(np.ceil(box.x1)) + 1
            y0, y1 = int(np.floor(box.y0)) - 1, int(np.ceil(box.y1)) + 1
            rows = pixels[height - y1 : height - y0, x0:x1]
            # the anchor's place inside the copied pixels, from their bottom-left corner
            self.pictures[(text, kind)] = (rows[::-1].copy(), (x - x0, y - y0))

    def stamp(self, renderer, ax, kind: str, labels, positions=None) -> None:
        """Draw outward ticks and labels at data positions (default 0, 1, ...) of ax's x axis
        (kind "x", or "x90" rotated) or y axis ("y"), where set_xticks/set_yticks would."""
        self.prepare(labels, kind)
        labels = [str(label) for label in labels]
        positions = range(len(labels)) if positions is None else list(positions)
        if len(positions) != len(labels):
            raise ValueError(
                f"positions: expected one per label ({len(labels)}), got {len(positions)}"
            )
        frame = ax.get_window_extent(renderer)
        on_x = kind != "y"
        ends = ax.transData.transform([(p, 0) if on_x else (0, p) for p in positions])
        ends = ends[:, 0] if on_x else ends[:, 1]
        lines = []
        gc = renderer.new_gc()
        for text, at in zip(labels, ends, strict=True):
            rows, (dx, dy) = self.pictures[(text, kind)]
            if on_x:
                lines.append([(at, frame.y0), (at, frame.y0 - self.length)])
                anchor = (at, frame.y0 - self.gap)
            else:
                lines.append([(frame.x0, at), (frame.x0 - self.length, at)])
                anchor = (frame.x0 - self.gap, at)
            renderer.draw_image(gc, round(anchor[0]) - dx, round(anchor[1]) - dy, rows)
        gc.restore()
        if self.length > 0:
            self.marks.set_segments(lines)
            self.marks.draw(renderer)

    def reach(self, text, kind: str = "y") -> int:
        """Pixels the label of `text` takes away from the axes: a y label's width, an x
        label's height (tick and gap not included)."""
        self.prepare([text], kind)
        return self.pictures[(str(text), kind)][0].shape[1 if kind == "y" else 0]

    def widest(self, texts, kind: str = "y") -> str:
        """The text whose label reaches furthest from the axes (to reserve room for it)."""
        self.prepare(texts, kind)
        return max(map(str, texts), key=lambda t: self.reach(t, kind))
