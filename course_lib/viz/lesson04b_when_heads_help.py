"""Lesson 04b's figures: one head's attention map, and where each head of the one-layer models
looks when it predicts the mark (lesson 06 and 05_encoder_decoder use set_token_ticks)."""

import numpy as np
from matplotlib.colors import PowerNorm
from matplotlib.figure import Figure

from course_lib.viz.style import _as_array, new_figure


def set_token_ticks(ax, labels, *, x: bool = True, y: bool = True, fontsize: int = 8):
    """Token labels on a map's key axis (x) and query axis (y); blank where False (lesson 04b)."""
    positions = list(range(len(labels)))
    # no ticks at all where unlabelled: an empty tick label still costs a text layout
    ax.set_xticks(positions if x else [], list(labels) if x else [], rotation=90, fontsize=fontsize)
    ax.set_yticks(positions if y else [], list(labels) if y else [], fontsize=fontsize)


def draw_head_map(
    ax, weights, labels=None, *, x_labels: bool = True, y_labels: bool = True, norm=None
):
    """One head's (T, T) attention as an image, queries down, keys across, on a 0-1 colour
    scale (straight, or `norm`, e.g. weight_norm()) (lesson 04b)."""
    data = _as_array(weights)
    scale = {"vmin": 0.0, "vmax": 1.0} if norm is None else {"norm": norm}
    image = ax.imshow(data, cmap="viridis", interpolation="nearest", **scale)
    ax.tick_params(length=0)
    if labels is not None:
        if len(labels) != data.shape[1]:
            raise ValueError(f"labels: expected one per token ({data.shape[1]}), got {len(labels)}")
        set_token_ticks(ax, labels, x=x_labels, y=y_labels)
    return image


# the rows of noun_weights_figure: the sentence's last three nouns, oldest first, then their sum
NOUN_ROWS = ("oldest noun", "middle noun", "last noun", "all three")
# attention weights drawn on a square-root scale: weights of 0.05, 0.1 and 0.2 get colours
# as far apart as 0.2, 0.4 and 0.8 would on a straight one
WEIGHT_TICKS = (0.0, 0.05, 0.2, 0.4, 0.6, 0.8, 1.0)


def weight_norm() -> PowerNorm:
    """The colour scale of lesson 04b's attention pictures: 0 to 1, square root (lesson 04b)."""
    return PowerNorm(0.5, vmin=0.0, vmax=1.0)


def noun_weights_figure(tables: dict, *, title=None) -> Figure:
    """Figure: for each model, each head's mean attention weight from the position before the
    mark on the sentence's last three nouns, and on the three together (lesson 04b).

    tables: label -> (H, 3) weights (course_lib.mark_heads.noun_weights), one panel each, side
    by side, a column per head and a row per noun (oldest first), then the row of their sum.
    Every panel has the same height, every cell the same size and its number, on one 0-1
    colour scale (square root, weight_norm).
    """
    if not tables:
        raise ValueError("tables: expected at least one model's (H, 3) weights, got none")
    arrays = {label: np.asarray(table, dtype=float) for label, table in tables.items()}
    for label, table in arrays.items():
        if table.ndim != 2 or table.shape[1] != len(NOUN_ROWS) - 1:
            raise ValueError(f"{label}: expected (H, 3) weights, got shape {table.shape}")
    widths = [table.shape[0] for table in arrays.values()]
    fig, axes = new_figure(0.45 * sum(widths) + 0.3 * len(widths) + 2.3, 3.9,
                           ncols=len(arrays), squeeze=False,
                           gridspec_kw={"width_ratios": widths})  # fmt: skip
    norm = weight_norm()
    for i, (ax, (label, table)) in enumerate(zip(axes[0], arrays.items(), strict=True)):
        shown = np.vstack([table.T, table.sum(axis=1)[None]])  # (4, H): nouns, then their sum
        image = ax.imshow(shown, norm=norm, cmap="viridis", aspect="auto")
        for (row, col), value in np.ndenumerate(shown):
            ax.text(col, row, f"{value:.2f}", ha="center", va="center", fontsize=11,
                    color="black" if value > 0.3 else "white")  # fmt: skip
        ax.axhline(2.5, color="white", lw=3)  # the sum, set apart from the nouns
        ax.set_xticks(range(table.shape[0]), [str(h) for h in range(table.shape[0])],
                      fontsize=11)  # fmt: skip
        ax.set_xlabel("head", fontsize=11)
        ax.set_yticks(range(len(NOUN_ROWS)), NOUN_ROWS if i == 0 else [], fontsize=11)
        ax.tick_params(length=0)
        ax.set_title(label.replace(", ", "\n"), fontsize=11)
    bar = fig.colorbar(image, ax=axes[0].tolist(), shrink=0.9, ticks=WEIGHT_TICKS)
    bar.set_label("mean attention weight", fontsize=11)
    bar.ax.tick_params(labelsize=10)
    if title:
        fig.suptitle(title, fontsize=11)
    return fig
