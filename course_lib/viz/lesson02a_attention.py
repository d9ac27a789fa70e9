"""Lesson 02a's figure: an attention matrix, rows the queries and columns the keys."""

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from course_lib.viz.style import _as_array, draw_attention, new_figure

BLOCKED_GREY = "#d9d9d9"  # a blocked key: no colour of viridis, so never read as a weight
BLOCKED_HATCH = "///"


def attention_heatmap(
    weights, query_labels=None, key_labels=None, *, title=None, annot=None, mask=None
) -> Figure:
    """Figure of one attention weight matrix, rows = queries, columns = keys (lesson 02a).

    mask: None, or a bool (T_q, T_k) matrix, True where a query may attend; the keys it
    blocks are drawn hatched grey with no number, so a blocked key and an allowed key with
    almost no weight look different."""
    data = _as_array(weights)
    size = max(3.5, 0.45 * data.shape[1] + 2.0)
    fig, ax = new_figure(size, max(3.0, 0.45 * data.shape[0] + 1.2))
    if annot is None:
        annot = max(data.shape) <= 8
    draw_attention(ax, data, query_labels, key_labels, annot=annot)
    if mask is not None:
        _hatch_blocked(ax, ~_as_array(mask).astype(bool), data.shape)
    if title:
        ax.set_title(title)
    return fig


def _hatch_blocked(ax, blocked, shape):
    """Cover each blocked cell with hatched grey, drop its number, and say so in a legend."""
    if blocked.shape != shape:
        raise ValueError(f"mask: expected the weights' shape {shape}, got {blocked.shape}")
    for i, j in zip(*np.nonzero(blocked), strict=True):
        ax.add_patch(
            Rectangle(
                (j, i), 1, 1, facecolor=BLOCKED_GREY, edgecolor="white", hatch=BLOCKED_HATCH,
                linewidth=0, zorder=2,
            )
        )  # fmt: skip
    for text in list(ax.texts):  # seaborn writes each number at the centre of its cell
        x, y = text.get_position()
        if blocked[int(y), int(x)]:
            text.remove()
    ax.legend(
        handles=[Patch(facecolor=BLOCKED_GREY, edgecolor="white", hatch=BLOCKED_HATCH,
                       label="blocked by the mask (weight 0)")],
        loc="upper center", bbox_to_anchor=(0.5, -0.16), frameon=False, fontsize=9,
    )  # fmt: skip
