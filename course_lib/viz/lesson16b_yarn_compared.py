"""Lesson 16b's figures: each RoPE pair's angle against position, and the excess loss by
position of the methods side by side."""

import math

import numpy as np

from course_lib.viz.lesson16a_interpolation_and_ntk import _array, draw_excess
from course_lib.viz.style import BLUE, PALETTE, new_figure

# each pair's marker, so that the colour key reads without colour too (lesson 16b)
PAIR_MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*")


def draw_angles(ax, angles, trained, trained_len: int) -> list:
    """Each pair's angle (radians, log axis) against position 1 .. T - 1, one line a pair, the
    fastest on top, with a key (a colour and a marker for each pair); the largest angle each
    pair reached in training (`trained`, the unscaled table, at position trained_len - 2) as a
    thin line of its colour, capped at one full turn, beyond which every angle has been met.
    Returns the angle lines (lesson 16b)."""
    angles, trained = _array("angles", angles, 2), _array("trained", trained, 2)
    T, half = angles.shape
    positions = np.arange(1, T)
    ax.axvspan(0, trained_len - 1, color=BLUE, alpha=0.12, linewidth=0)
    lines = []
    for i in range(half):
        colour = PALETTE[i % len(PALETTE)]
        seen = min(trained[trained_len - 2, i], 2 * math.pi)
        ax.axhline(seen, color=colour, linewidth=1.2)
        lines.append(ax.plot(positions, angles[1:, i], color=colour, linewidth=2,
                             marker=PAIR_MARKERS[i % len(PAIR_MARKERS)], markersize=4,
                             markevery=(2 * i, 16), label=f"pair {i}")[0])  # fmt: skip
    ax.axhline(2 * math.pi, color="black", linewidth=1.2, linestyle="--")
    ax.text(T * 0.02, 2 * math.pi * 1.3, "one full turn", fontsize=9)
    ax.text(trained_len * 0.5, 0.97, "trained\npositions", fontsize=9, ha="center", va="top",
            transform=ax.get_xaxis_transform())  # fmt: skip
    ax.set_yscale("log")
    ax.set_ylim(angles[1:].min() * 0.5, max(angles.max(), 2 * math.pi) * 2)
    ax.set_xlim(0, T)
    ax.set_xlabel("position p")
    ax.set_ylabel("angle of pair i at p (radians)")
    # the colour key, in the corner no pair's angle reaches (below 1e-3 past position 40)
    ax.legend(loc="lower right", ncol=4, fontsize=8, handlelength=1.2, columnspacing=0.8)
    return lines


def angles_figure(angles, trained, trained_len: int, title: str = ""):
    """One panel of draw_angles (lesson 16b)."""
    fig, ax = new_figure(6.0, 4.2)
    draw_angles(ax, angles, trained, trained_len)
    ax.set_title(title or "each pair's angle, the fastest pair on top")
    return fig


def excess_panels(groups: list[dict], trained_len: int, spread: dict | None = None,
                  titles: tuple = ()):  # fmt: skip
    """draw_excess side by side, one panel per dict of curves, on one y scale (lesson 16b)."""
    fig, axes = new_figure(11.0, 4.0, ncols=len(groups), sharey=True)
    for ax, curves, title in zip(axes, groups, titles or [""] * len(groups), strict=True):
        draw_excess(ax, curves, trained_len, spread)
        ax.set_title(title)
    for ax in axes[1:]:
        ax.set_ylabel("")
    return fig
