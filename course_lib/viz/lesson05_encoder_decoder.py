"""Lesson 05_encoder_decoder's figures: who may see whom with and without the causal mask, the
encoder-decoder as boxes and arrows, a cross-attention map with its anti-diagonal marked, and
how alignment and accuracy grow in training."""

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from course_lib.viz.lesson04b_when_heads_help import set_token_ticks
from course_lib.viz.style import (
    BLUE,
    LINE_MARKERS,
    LINE_STYLES,
    PALETTE,
    _arrow,
    _as_array,
    _box,
    new_figure,
)

CHANCE_STYLE = {"color": "0.45", "linestyle": "--", "linewidth": 1.2}
BOX = (2.6, 0.8)  # the diagram's boxes: width, height


def visibility_figure(bidirectional, causal, labels) -> Figure:
    """Two (T, T) attention maps side by side: without a mask and with the causal mask; blocked
    cells hatched (lesson 05_encoder_decoder)."""
    maps = [_as_array(bidirectional), _as_array(causal)]
    if maps[0].shape != maps[1].shape or len(labels) != maps[0].shape[1]:
        raise ValueError(
            f"labels: expected two maps of one shape and a label per token, got shapes "
            f"{maps[0].shape}, {maps[1].shape} and {len(labels)} labels"
        )
    fig, axes = new_figure(8.4, 3.9, ncols=2)
    titles = (
        "no mask (bidirectional): every\nposition sees every position",
        "causal mask: position t sees\npositions 0..t only",
    )
    for ax, data, title in zip(axes, maps, titles, strict=True):
        image = ax.imshow(data, vmin=0.0, vmax=1.0, cmap="viridis", interpolation="nearest")
        set_token_ticks(ax, labels, fontsize=9)
        ax.tick_params(length=0)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("key (attended to)")
        blocked = np.argwhere(data == 0)
        for row, col in blocked:  # a blocked cell: hatched, not told by colour alone
            ax.add_patch(
                Rectangle(
                    (col - 0.5, row - 0.5),
                    1,
                    1,
                    fill=False,
                    hatch="///",
                    edgecolor="0.6",
                    linewidth=0,
                )
            )
    axes[0].set_ylabel("query (attending)")
    fig.colorbar(image, ax=axes, shrink=0.8, label="attention weight")
    return fig


def _group(ax, x, y0, y1, text, side):
    """A dashed frame around a layer's boxes, its name beside it, outside the arrows."""
    ax.add_patch(
        Rectangle(
            (x - 1.55, y0),
            3.1,
            y1 - y0,
            fill=False,
            linestyle="--",
            edgecolor="0.35",
            linewidth=1.0,
        )
    )
    ax.text(
        x + side * 1.7,
        (y0 + y1) / 2,
        text,
        ha="left" if side > 0 else "right",
        va="center",
        fontsize=10,
    )


def encoder_decoder_diagram() -> Figure:
    """The encoder-decoder as boxes and arrows: the encoder's stack on the left, its output
    feeding every decoder layer's cross-attention on the right (lesson 05_encoder_decoder)."""
    fig, ax = new_figure(9.2, 4.6)
    enc, dec = "#9ecae1", "#fdd0a2"
    _box(ax, 0, 0, "source: token + position", "white", *BOX)
    _box(ax, 0, 1.4, "self-attention over\nthe whole source (+ its input)", enc, *BOX)
    _group(ax, 0, 0.85, 1.95, "encoder\nlayer\n(x 1)", -1)
    _box(ax, 0, 2.9, "memory (B, T_src, D)", "white", *BOX)
    _arrow(ax, (0, 0.4), (0, 1.0))
    _arrow(ax, (0, 1.8), (0, 2.5))
    _box(ax, 4.6, 0, "start mark + output so far:\ntoken + position", "white", *BOX)
    _box(ax, 4.6, 1.4, "self-attention over\nthe output so far (+ its input)", dec, *BOX)
    _box(
        ax,
        4.6,
        2.65,
        "cross-attention: queries here,\nkeys and values from memory\n(+ its input)",
        dec,
        width=BOX[0],
        height=1.0,
    )
    _group(ax, 4.6, 0.85, 3.3, "decoder\nlayer\n(x 2)", 1)
    _box(ax, 4.6, 4.3, "Linear: logits of the next token", "white", *BOX)
    _arrow(ax, (4.6, 0.4), (4.6, 1.0))
    _arrow(ax, (4.6, 1.8), (4.6, 2.15))
    _arrow(ax, (4.6, 3.15), (4.6, 3.9))
    _arrow(ax, (1.3, 2.9), (3.3, 2.65))
    ax.text(2.3, 2.95, "keys, values", ha="center", va="bottom", fontsize=9)
    ax.set_xlim(-2.6, 7.2)
    ax.set_ylim(-0.55, 4.75)
    ax.axis("off")
    return fig


def draw_cross_map(ax, weights, source_labels, output_labels):
    """One head's (T_out, T_src) cross-attention as an image, the source across and the output
    position down, each cell (i, T_src - 1 - i) outlined (black on a white halo, seen on any
    colour): the source word output position i writes when the task is reversal (lesson
    05_encoder_decoder). Returns (image, outlines)."""
    data = _as_array(weights)
    T_out, T_src = data.shape
    if len(source_labels) != T_src or len(output_labels) != T_out:
        raise ValueError(
            f"source_labels, output_labels: expected {T_src} and {T_out} labels, got "
            f"{len(source_labels)} and {len(output_labels)}"
        )
    image = ax.imshow(data, vmin=0.0, vmax=1.0, cmap="viridis", interpolation="nearest")
    ax.set_xticks(range(T_src), list(source_labels), rotation=90, fontsize=9)
    ax.set_yticks(range(T_out), list(output_labels), fontsize=9)
    ax.tick_params(length=0)
    ax.set_xlabel("source word (key)")
    ax.set_ylabel("output position: the word it writes")
    outlines = []
    for i in range(min(T_out, T_src)):
        for color, width in (("white", 3.0), ("black", 1.2)):
            outlines.append(
                ax.add_patch(
                    Rectangle(
                        (T_src - 1 - i - 0.45, i - 0.45),
                        0.9,
                        0.9,
                        fill=False,
                        edgecolor=color,
                        linewidth=width,
                    )
                )
            )
    return image, outlines


def cross_map_figure(weights, source_labels, output_labels, *, title=None) -> Figure:
    """Figure of one cross-attention map, its anti-diagonal outlined (lesson 05_encoder_decoder)."""
    fig, ax = new_figure(4.8, 4.4)
    image, _ = draw_cross_map(ax, weights, source_labels, output_labels)
    fig.colorbar(image, ax=ax, shrink=0.75, label="attention weight")
    if title:
        ax.set_title(title, fontsize=10)
    return fig


def reversal_training_figure(
    steps, accuracy, anti_diagonal, chance: float, word_chance: float
) -> Figure:
    """Held-out accuracy (left) and each cross-attention head's weight on the anti-diagonal
    (right) against training steps; anti_diagonal is (steps, layers, H); chance is a uniform
    row's weight on one source word, word_chance a random word's chance of being right
    (lesson 05_encoder_decoder)."""
    weights = np.asarray(anti_diagonal, dtype=float)
    if weights.ndim != 3 or weights.shape[0] != len(steps) or len(accuracy) != len(steps):
        raise ValueError(
            f"anti_diagonal: expected (steps, layers, H) with {len(steps)} steps and as many "
            f"accuracies, got shape {weights.shape} and {len(accuracy)} accuracies"
        )
    fig, (left, right) = new_figure(9.0, 3.4, ncols=2)
    left.plot(steps, accuracy, marker="o", color=BLUE, label="held-out words right")
    left.set_ylim(0, 1.02)
    left.set_xlabel("training step")
    left.set_ylabel("share of output words right")
    left.set_title("greedy decoding of 500 held-out sentences", fontsize=10)
    left.grid(alpha=0.3)
    for n, (layer, head) in enumerate(np.ndindex(weights.shape[1:])):
        right.plot(
            steps,
            weights[:, layer, head],
            marker=LINE_MARKERS[n % len(LINE_MARKERS)],
            color=PALETTE[n % len(PALETTE)],
            linestyle=LINE_STYLES[layer % len(LINE_STYLES)],  # the layer by dash, not hue
            label=f"layer {layer}, head {head}",
        )
    right.axhline(chance, label=f"chance ({chance:.3f})", **CHANCE_STYLE)
    right.set_ylim(0, 1.02)
    right.set_xlabel("training step")
    right.set_ylabel("weight on the anti-diagonal")
    right.set_title("the decoder's cross-attention heads", fontsize=10)
    right.legend(fontsize=8, loc="lower right")
    right.grid(alpha=0.3)
    left.axhline(word_chance, label=f"a random word ({word_chance:.3f})", **CHANCE_STYLE)
    left.legend(fontsize=8, loc="lower right")
    return fig
