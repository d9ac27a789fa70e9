"""Lesson 02b's figures: one query's weights (the explorer's bars), and a padded sentence's
weights with and without the padding mask."""

import numpy as np
from matplotlib.colors import PowerNorm
from matplotlib.figure import Figure

from course_lib.viz.style import _as_array, _numbers, new_figure


def draw_weight_bars(ax, weights_row, key_labels, color="tab:blue"):
    """Bars of one query's attention weights over the keys, on a fixed 0..1 axis (lesson 02b)."""
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


def padding_figure(unmasked, masked, tokens, T: int) -> Figure:
    """Two maps of one right-padded sentence's weights, its real queries (rows) over all T
    keys, without and with the padding mask (lesson 02b).

    Both share one square-root colour scale from 0 to the larger map's largest weight, so a
    pad's small share stays visible beside one large weight; the right-hand axis of each map
    gives every query's total weight on the pads, and the pad columns are labelled "pad"."""
    tokens = list(tokens)
    maps = [_as_array(unmasked), _as_array(masked)]
    n = len(tokens)
    if not 0 < n <= T or any(m.shape != (n, T) for m in maps):
        raise ValueError(
            f"unmasked, masked: expected ({n}, {T}) weights of {n} real queries over T = {T} "
            f"keys, got {[m.shape for m in maps]}"
        )
    norm = PowerNorm(0.5, vmin=0.0, vmax=float(max(m.max() for m in maps)))
    keys = tokens + ["pad"] * (T - n)
    fig, axes = new_figure(9.6, 2 * (0.3 * n + 1.6), nrows=2)
    titles = ("without a padding mask", "with the padding mask")
    for ax, data, title in zip(axes, maps, titles, strict=True):
        image = ax.imshow(data, cmap="viridis", norm=norm, aspect="auto")
        ax.set_xticks(range(T), keys, rotation=90)
        ax.set_yticks(range(n), tokens)
        ax.axvline(n - 0.5, color="white", linewidth=2)  # where the pads begin
        on_pads = data[:, n:].sum(axis=1)  # (n,) each real query's weight on the pads
        right = ax.secondary_yaxis("right")
        right.set_yticks(range(n), [f"{w:.2f}" for w in on_pads])
        right.set_ylabel("its weight on pads")
        ax.set_title(f"{title}: {np.mean(on_pads):.2f} of each query's weight on pads, on average")
        ax.set_ylabel("query")
        ax.set_xlabel("key (attended to)")
        fig.colorbar(image, ax=ax, label="attention weight (square-root scale)", shrink=0.9,
                     pad=0.02, ticks=[0, 0.02, 0.1, 0.25, 0.5, 0.75, 1.0])  # fmt: skip
    return fig
