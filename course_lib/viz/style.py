"""The course's look, shared by every lesson's figures and explorers: resolution, colour
policy (PALETTE, COLOURS, MARKERS, line styles), meaning() and colour(), new_figure(), the
argument helpers the figure modules share, draw_attention (lessons 02a and 03), and the boxes
and arrows of the block diagrams (lessons 05_encoder_decoder and 08).
"""

import numpy as np
import seaborn as sns
import torch
from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch

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
    "scaled": BLUE,  # lesson 03a: scores divided by sqrt(d_k)
    "q . k / sqrt(d_k)": BLUE,
    "unscaled": VERMILLION,
    "q . k": VERMILLION,
    "RoPE": BLUE,  # lessons 06-07b: how position gets in
    "sinusoidal added": ORANGE,
    "no positions": GREEN,
    "learned positions": PURPLE,
    "q": BLUE,  # lesson 06: a query and a key
    "k": ORANGE,
    "layer norm": BLUE,  # lesson 08: the norm in a block
    "batch norm": ORANGE,
    "no norm": PURPLE,
    "GELU": BLUE,  # lesson 09: the feed-forward layer's activation
    "ReLU": VERMILLION,
    "training": BLUE,  # lesson 01: loss curves
    "validation": ORANGE,
    "cached": BLUE,  # lessons 13a and 13b: generation with and without a KV cache
    "recomputed": VERMILLION,
}
# never meaning by colour alone: meanings drawn as lines in more than one picture also keep
# one marker (lesson 08's explorer draws pre-norm filled, post-norm hollow)
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
    "cached": "o",
    "recomputed": "s",
}
LINE_STYLES = ("-", "--", "-.", ":")  # for lines told apart by dash pattern
LINE_MARKERS = ("o", "s", "^", "D", "v", "P")  # for lines told apart by marker


def meaning(label: str) -> str | None:
    """The meaning a legend label names, if COLOURS has one: the label itself, or its part
    before ", " or " (" ("layer norm, residual off" -> "layer norm") (lesson 01a on)."""
    for name in (label, label.split(", ")[0], label.split(" (")[0]):
        if name in COLOURS:
            return name
    return None


def colour(label: str):
    """The course's colour for what a label names; None (the axes' next colour) otherwise
    (lesson 01a on)."""
    return COLOURS.get(meaning(label))


def new_figure(width: float = 6.4, height: float = 4.0, ncols: int = 1, nrows: int = 1, **kw):
    """A constrained-layout Figure and its axes, which cycle through PALETTE (lesson 00)."""
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    kw.setdefault("squeeze", True)
    axes = fig.subplots(nrows, ncols, **kw)
    for ax in np.atleast_1d(axes).flat:
        ax.set_prop_cycle(color=PALETTE)
    return fig, axes


def _as_array(weights):
    if isinstance(weights, torch.Tensor):
        weights = weights.detach().cpu().numpy()
    if weights.ndim != 2:
        raise ValueError(f"weights: expected a 2-D (T_q, T_k) matrix, got shape {weights.shape}")
    return weights


def draw_attention(ax, weights, query_labels=None, key_labels=None, *, annot=False, cbar=True):
    """Draw a (T_q, T_k) weight matrix as a labelled seaborn heatmap on ax (lesson 02a)."""
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


def _numbers(name, values):
    if isinstance(values, torch.Tensor):
        values = values.detach().cpu().tolist()
    values = list(values)
    if not values:
        raise ValueError(f"{name}: expected a non-empty sequence of numbers, got {values!r}")
    return values


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


# boxes and arrows of the block diagrams (lessons 05_encoder_decoder and 08)


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
