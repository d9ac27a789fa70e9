"""Pictures: tensors in, matplotlib Figures out. Nothing here changes a tensor.

Figures are made with matplotlib.figure.Figure, not pyplot, so they are never shown twice
and never pile up in pyplot's list of open figures; a notebook shows one by ending a cell
with it.
"""

import io

import seaborn as sns
import torch
from matplotlib.figure import Figure
from PIL import Image

DPI = 80  # small PNGs keep explorers fast; still sharp at notebook width


def new_figure(width: float = 6.4, height: float = 4.0, ncols: int = 1, nrows: int = 1, **kw):
    """A constrained-layout Figure and its axes (lesson 00)."""
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=True, **kw)
    return fig, axes


def to_png(fig: Figure) -> bytes:
    """Render a Figure to PNG bytes, as the notebook's inline display would (lesson 00)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def canvas_png(canvas) -> bytes:
    """PNG bytes of what an Agg canvas holds now, at fast compression (explorers, lesson 00)."""
    width, height = canvas.get_width_height()
    picture = Image.frombuffer("RGBA", (width, height), canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
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


def attention_heatmap(weights, query_labels=None, key_labels=None, *, title=None, annot=None):
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
