"""Lesson 13b's figure: wall time per new token, cached and recomputed."""

import numpy as np
from matplotlib.figure import Figure

from course_lib.viz.lesson13a_what_generation_recomputes import _loglog
from course_lib.viz.style import _numbers, new_figure


def time_per_token_figure(Ts, seconds: dict) -> Figure:
    """Measured seconds per new token against T, log-log, with each line's fitted slope in
    its legend label (lesson 13b). Wall time: it differs from machine to machine."""
    Ts = _numbers("Ts", Ts)
    fig, ax = new_figure(5.6, 3.6)
    labelled = {}
    for label, values in seconds.items():
        values = _numbers(label, values)
        slope = np.polyfit(np.log(Ts), np.log(values), 1)[0]
        labelled[f"{label} (slope {slope:.2f} on this machine)"] = values
    _loglog(ax, Ts, labelled, "seconds per new token", "wall time, one torch thread")
    return fig
