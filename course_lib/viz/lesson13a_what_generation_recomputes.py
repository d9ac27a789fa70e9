"""Lesson 13a's figure: one new token's work and memory traffic against context length,
cached and recomputed."""

from matplotlib.figure import Figure

from course_lib.viz.style import MARKERS, _numbers, colour, meaning, new_figure


def _loglog(ax, Ts, curves: dict, ylabel: str, title: str) -> None:
    """A line per label against T on log-log axes."""
    for label, values in curves.items():
        values = _numbers(label, values)
        if len(values) != len(Ts):
            raise ValueError(f"{label}: expected {len(Ts)} values, one per T, got {len(values)}")
        ax.plot(
            Ts, values, marker=MARKERS.get(meaning(label), "o"), color=colour(label), label=label
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("context length T (the new token included)")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=9)


def token_costs_figure(Ts, multiply_adds: dict, bytes_: dict) -> Figure:
    """Multiply-adds and bytes of one new token against T, log-log, a line per label
    ("cached", "recomputed") (lesson 13a)."""
    Ts = _numbers("Ts", Ts)
    fig, (left, right) = new_figure(9.0, 3.4, ncols=2)
    _loglog(left, Ts, multiply_adds, "multiply-adds per new token", "work")
    _loglog(right, Ts, bytes_, "bytes read and written per new token", "memory traffic")
    return fig
