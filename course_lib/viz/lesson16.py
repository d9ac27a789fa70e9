"""Lesson 16's figures: each RoPE pair's angle against position, and excess loss by position."""

import math

import numpy as np
import torch

from course_lib.viz.style import BLUE, GREEN, ORANGE, PALETTE, PURPLE, new_figure

# one colour and one dash per method, in both figures and in the explorer
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


def draw_angles(ax, angles, trained, trained_len: int) -> list:
    """Each pair's angle (radians, log axis) against position 1 .. T - 1, one line a pair, the
    fastest on top; the largest angle each pair reached in training (`trained`, the unscaled
    table, at position trained_len - 2) as a thin line of its colour, capped at one full
    turn, beyond which every angle has been met. Returns the angle lines (lesson 16)."""
    angles, trained = _array("angles", angles, 2), _array("trained", trained, 2)
    T, half = angles.shape
    positions = np.arange(1, T)
    ax.axvspan(0, trained_len - 1, color=BLUE, alpha=0.12, linewidth=0)
    lines = []
    for i in range(half):
        colour = PALETTE[i % len(PALETTE)]
        seen = min(trained[trained_len - 2, i], 2 * math.pi)
        ax.axhline(seen, color=colour, linewidth=0.8, alpha=0.7)
        lines.append(ax.plot(positions, angles[1:, i], color=colour, linewidth=2)[0])
    ax.axhline(2 * math.pi, color="black", linewidth=1.2, linestyle="--")
    ax.text(T * 0.02, 2 * math.pi * 1.3, "one full turn", fontsize=9)
    ax.text(trained_len * 0.5, 0.97, "trained\npositions", fontsize=9, ha="center", va="top",
            transform=ax.get_xaxis_transform())  # fmt: skip
    ax.set_yscale("log")
    ax.set_ylim(angles[1:].min() * 0.5, max(angles.max(), 2 * math.pi) * 2)
    ax.set_xlim(0, T)
    ax.set_xlabel("position p")
    ax.set_ylabel("angle of pair i at p (radians)")
    return lines


def angles_figure(angles, trained, trained_len: int, title: str = ""):
    """One panel of draw_angles (lesson 16)."""
    fig, ax = new_figure(6.0, 4.2)
    draw_angles(ax, angles, trained, trained_len)
    ax.set_title(title or "each pair's angle, the fastest pair on top")
    return fig


def draw_excess(ax, curves: dict, trained_len: int, spread: dict | None = None) -> dict:
    """Mean excess loss (nats) against position for each label in `curves` ({label: (T - 1,)});
    `spread` {label: (low, high)} shades the seeds' range. Returns {label: line} (lesson 16)."""
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


def excess_panels(groups: list[dict], trained_len: int, spread: dict | None = None,
                  titles: tuple = ()):  # fmt: skip
    """draw_excess side by side, one panel per dict of curves, on one y scale (lesson 16)."""
    fig, axes = new_figure(11.0, 4.0, ncols=len(groups), sharey=True)
    for ax, curves, title in zip(axes, groups, titles or [""] * len(groups), strict=True):
        draw_excess(ax, curves, trained_len, spread)
        ax.set_title(title)
    for ax in axes[1:]:
        ax.set_ylabel("")
    return fig


def excess_figure(curves: dict, trained_len: int, spread: dict | None = None, title: str = ""):
    """One panel of draw_excess (lesson 16)."""
    fig, ax = new_figure(6.4, 4.0)
    draw_excess(ax, curves, trained_len, spread)
    ax.set_title(title or "excess loss by position; shaded: the trained positions")
    return fig
