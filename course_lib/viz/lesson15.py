"""Lesson 15's figure: excess loss over the floor by position, one line per way of attending."""

import numpy as np
from matplotlib.figure import Figure

from course_lib.viz.style import LINE_MARKERS, LINE_STYLES, _numbers, new_figure


def excess_by_position_figure(
    curves: dict, trained: int = 32, spread: dict | None = None
) -> Figure:
    """Excess loss (nats) against the position of the prediction (lesson 15): `curves` maps
    each line's label to its excess at positions 0 .. T - 2; `spread` (optional) maps a label
    to (low, high) arrays drawn as a band, the seeds' range. A grey line marks the trained
    length. The y axis is logarithmic: the lines differ by 30 times."""
    if not isinstance(curves, dict) or not curves:
        raise TypeError(f"curves: expected a non-empty dict {{label: excess}}, got {curves!r}")
    if len(curves) > len(LINE_MARKERS):
        raise ValueError(f"curves: expected at most {len(LINE_MARKERS)} lines, got {len(curves)}")
    fig, ax = new_figure(8.0, 4.2)
    for n, (label, values) in enumerate(curves.items()):
        y = np.asarray(_numbers(label, values), dtype=float)
        x = np.arange(len(y))
        style = {"linestyle": LINE_STYLES[n % 4], "marker": LINE_MARKERS[n], "ms": 6}
        (line,) = ax.plot(x, np.maximum(y, 1e-3), linewidth=1.8, markevery=(4 * n, 16),
                          label=label, **style)  # fmt: skip
        if spread and label in spread:
            low, high = (np.maximum(np.asarray(v, dtype=float), 1e-3)
                         for v in spread[label])  # fmt: skip
            ax.fill_between(x, low, high, color=line.get_color(), alpha=0.18, linewidth=0)
    ax.axvline(trained - 0.5, color="grey", linestyle=":", linewidth=1.2)
    ax.text(trained, ax.get_ylim()[1], " trained length", va="top", fontsize=9, color="grey")
    ax.set_yscale("log")
    ax.set_xlabel("position of the prediction (token t + 1 from tokens 0 .. t)")
    ax.set_ylabel("excess loss over the floor (nats)")
    ax.legend(loc="upper left", fontsize=9)
    return fig
