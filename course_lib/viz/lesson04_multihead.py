"""Lesson 04's figures: one head's attention map, and where each head of the one-layer models
looks when it predicts the mark (lesson 06 and 05_encoder_decoder use set_token_ticks)."""

import numpy as np
from matplotlib.figure import Figure

from course_lib.viz.style import _as_array, new_figure


def set_token_ticks(ax, labels, *, x: bool = True, y: bool = True, fontsize: int = 8):
    """Token labels on a map's key axis (x) and query axis (y); blank where False (lesson 04)."""
    positions = list(range(len(labels)))
    # no ticks at all where unlabelled: an empty tick label still costs a text layout
    ax.set_xticks(positions if x else [], list(labels) if x else [], rotation=90, fontsize=fontsize)
    ax.set_yticks(positions if y else [], list(labels) if y else [], fontsize=fontsize)


def draw_head_map(ax, weights, labels=None, *, x_labels: bool = True, y_labels: bool = True):
    """One head's (T, T) attention as an image, queries down, keys across (lesson 04)."""
    data = _as_array(weights)
    image = ax.imshow(data, vmin=0.0, vmax=1.0, cmap="viridis", interpolation="nearest")
    ax.tick_params(length=0)
    if labels is not None:
        if len(labels) != data.shape[1]:
            raise ValueError(f"labels: expected one per token ({data.shape[1]}), got {len(labels)}")
        set_token_ticks(ax, labels, x=x_labels, y=y_labels)
    return image


NOUN_COLUMNS = ("3rd-last noun", "2nd-last noun", "last noun")


def noun_weights_figure(tables: dict, *, title=None) -> Figure:
    """Figure: for each model, each head's mean attention weight from the position before the
    mark on the sentence's last three nouns (lesson 04).

    tables: label -> (H, 3) weights (course_lib.mark_heads.noun_weights), one panel each, side
    by side; every cell carries its number, on one 0-1 colour scale.
    """
    if not tables:
        raise ValueError("tables: expected at least one model's (H, 3) weights, got none")
    arrays = {label: np.asarray(table, dtype=float) for label, table in tables.items()}
    for label, table in arrays.items():
        if table.ndim != 2 or table.shape[1] != len(NOUN_COLUMNS):
            raise ValueError(f"{label}: expected (H, 3) weights, got shape {table.shape}")
    tallest = max(table.shape[0] for table in arrays.values())
    fig, axes = new_figure(2.3 * len(arrays) + 1.4, 0.42 * tallest + 2.2, ncols=len(arrays),
                           squeeze=False)  # fmt: skip
    for ax, (label, table) in zip(axes[0], arrays.items(), strict=True):
        image = ax.imshow(table, vmin=0.0, vmax=1.0, cmap="viridis", aspect="equal")
        for (i, j), value in np.ndenumerate(table):
            ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=9,
                    color="black" if value > 0.5 else "white")  # fmt: skip
        ax.set_xticks(range(len(NOUN_COLUMNS)), NOUN_COLUMNS, rotation=30, ha="right", fontsize=9)
        ax.set_yticks(range(table.shape[0]), [f"head {h}" for h in range(table.shape[0])],
                      fontsize=9)  # fmt: skip
        ax.tick_params(length=0)
        ax.set_title(label, fontsize=10)
    fig.colorbar(image, ax=axes[0].tolist(), shrink=0.8, label="mean attention weight")
    if title:
        fig.suptitle(title, fontsize=10)
    return fig
