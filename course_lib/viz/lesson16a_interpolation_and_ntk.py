"""Lesson 16a's figure: excess loss by position, as trained and with RoPE scaled (lesson 16b's
figures draw it too, in the styles named here)."""

import numpy as np
import torch

from course_lib.viz.style import BLUE, GREEN, ORANGE, PALETTE, PURPLE, new_figure

# one colour and one dash per method, in every figure of lessons 16a and 16b and the explorer
METHOD_STYLES = {
    "as trained": {"color": PALETTE[7], "linestyle": "-"},
    "position interpolation": {"color": ORANGE, "linestyle": "--"},
    "NTK-aware": {"color": GREEN, "linestyle": "-."},
    "YaRN": {"color": PURPLE, "linestyle": ":"},
}


def _array(name, values, dim):
    if isinstance(values, torch.Tensor):
        values = values.detach().double().cpu().numpy()
    values = np.asarray(values, dtype=float)
    if values.ndim != dim:
        raise ValueError(f"{name}: expected a {dim}-D table, got shape {values.shape}")
    return values


def draw_excess(ax, curves: dict, trained_len: int, spread: dict | None = None) -> dict:
    """Mean excess loss (nats) against position for each label in `curves` ({label: (T - 1,)});
    `spread` {label: (low, high)} shades the seeds' range. Returns {label: line} (lesson 16a)."""
    ax.axvspan(0, trained_len - 1, color=BLUE, alpha=0.12, linewidth=0)
    ax.text(trained_len * 0.5, 0.2, "trained\npositions", fontsize=9, ha="center",
            transform=ax.get_xaxis_transform())  # fmt: skip
    lines = {}
    for label, values in curves.items():
        values = _array(label, values, 1)
        style = METHOD_STYLES.get(label.split(", ")[0], {})
        x = np.arange(len(values))
        lines[label] = ax.plot(x, values, linewidth=2, label=label, **style)[0]
        if spread and label in spread:
            low, high = (_array(label, v, 1) for v in spread[label])
            ax.fill_between(x, low, high, color=style.get("color"), alpha=0.15, linewidth=0)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xlabel("position of the prediction")
    ax.set_ylabel("excess loss (nats above the floor)")
    ax.legend(fontsize=9, loc="upper left")
    return lines


def excess_figure(curves: dict, trained_len: int, spread: dict | None = None, title: str = ""):
    """One panel of draw_excess (lesson 16a)."""
    fig, ax = new_figure(6.4, 4.0)
    draw_excess(ax, curves, trained_len, spread)
    ax.set_title(title or "excess loss by position; shaded: the trained positions")
    return fig
