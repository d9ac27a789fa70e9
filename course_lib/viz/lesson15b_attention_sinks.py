"""Lesson 15b's figure: excess loss over the floor by position, one line per way of attending."""

import numpy as np
from matplotlib.figure import Figure

from course_lib.viz.style import LINE_MARKERS, LINE_STYLES, _numbers, new_figure

FLOOR = 1e-3  # the log axis' bottom: an excess of 0 (or below, by rounding) is drawn there


def _binned(values, size: int) -> np.ndarray:
    """The means of consecutive runs of `size` values (the last run may be shorter)."""
    values = np.asarray(values, dtype=float)
    return np.array([values[a : a + size].mean() for a in range(0, len(values), size)])


def excess_by_position_figure(
    curves: dict, trained: int = 32, spread: dict | None = None, bin_size: int = 1, title: str = ""
) -> Figure:
    """Excess loss (nats) against the position of the prediction (lesson 15b): `curves` maps
    each line's label to its excess at positions 0 .. T - 2; `spread` (optional) maps a label
    to (low, high) arrays drawn as a band, the seeds' range; bin_size > 1 averages each run of
    that many positions into one point. A grey line marks the trained length. The y axis is
    logarithmic: the lines differ by 30 times. `title`: what the lines and bands are."""
    if not isinstance(curves, dict) or not curves:
        raise TypeError(f"curves: expected a non-empty dict {{label: excess}}, got {curves!r}")
    if len(curves) > len(LINE_MARKERS):
        raise ValueError(f"curves: expected at most {len(LINE_MARKERS)} lines, got {len(curves)}")
    if isinstance(bin_size, bool) or not isinstance(bin_size, int) or bin_size < 1:
        raise ValueError(f"bin_size: expected a positive int, got {bin_size!r}")
    fig, ax = new_figure(8.0, 4.8)
    for n, (label, values) in enumerate(curves.items()):
        y = _binned(_numbers(label, values), bin_size)
        x = np.arange(len(y)) * bin_size + (bin_size - 1) / 2  # each bin at its centre
        style = {"linestyle": LINE_STYLES[n % 4], "marker": LINE_MARKERS[n], "ms": 7}
        (line,) = ax.plot(x, np.maximum(y, FLOOR), linewidth=2, label=label, **style)
        if spread and label in spread:
            low, high = (np.maximum(_binned(v, bin_size), FLOOR) for v in spread[label])
            ax.fill_between(x, low, high, color=line.get_color(), alpha=0.15, linewidth=0)
    ax.axvline(trained - 0.5, color="grey", linestyle=":", linewidth=1.5)
    ax.annotate("trained length", (trained - 0.5, 0.02), xycoords=("data", "axes fraction"),
                xytext=(4, 0), textcoords="offset points", color="grey", fontsize=9)  # fmt: skip
    ax.set_yscale("log")
    each = "" if bin_size == 1 else f", mean of each {bin_size}"
    ax.set_xlabel(f"position of the prediction (token t + 1 from tokens 0 .. t{each})")
    ax.set_ylabel("excess loss over the floor (nats)")
    if title:
        ax.set_title(title)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, fontsize=9)
    return fig
