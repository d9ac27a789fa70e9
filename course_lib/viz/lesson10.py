"""Lesson 10's figures: what sampling settings trade (rules kept against different starts),
and attention's wall time against the sequence length."""

import numpy as np
from matplotlib.figure import Figure

from course_lib.viz.style import BLUE, GREEN, ORANGE, _numbers, new_figure


def _setting(row) -> str:
    if row["top_k"] is None:
        return f"temp {row['temperature']:g}"  # not T: lesson 10's T is the sequence length
    return (
        f"k={row['top_k']}"
        if row["temperature"] == 1
        else f"temp {row['temperature']:g}, k={row['top_k']}"
    )


def tradeoff_figure(table: dict) -> Figure:
    """Each sampling setting of data/sampling.json as one point: how many different starts a
    prompt's samples have (x) against the share of lines that keep every rule (y), the mean
    over the seeds with their range as bars (lesson 10). Temperatures over all tokens are
    joined by one line, top-k at temperature 1 by another."""
    if not isinstance(table, dict) or "rows" not in table:
        raise TypeError(f"table: expected data/sampling.json's dict, got {type(table).__name__}")
    fig, ax = new_figure(7.4, 4.6)
    rows = table["rows"]
    groups = {
        "temperature, every token kept": (BLUE, "o", "-", [r for r in rows if r["top_k"] is None]),
        "top-k at temperature 1": (
            ORANGE, "s", "--", [r for r in rows if r["top_k"] and r["temperature"] == 1]),
        "top-3 as the temperature rises": (GREEN, "^", ":", [r for r in rows if r["top_k"] == 3]),
    }  # fmt: skip
    offsets = {BLUE: ((6, 5), "left"), ORANGE: ((-6, -13), "right"), GREEN: ((-36, -4), "right")}
    crowded = []  # (y, x, text, colour) of the points near the right edge, labelled in a column
    for label, (colour, marker, style, rows) in groups.items():
        xs, ys, xerr, yerr = [], [], [[], []], [[], []]
        for row in rows:
            d = np.array([run["distinct"] for run in row["runs"]])
            k = 100 * np.array([run["kept"] for run in row["runs"]])
            xs.append(d.mean())
            ys.append(k.mean())
            xerr[0].append(d.mean() - d.min())
            xerr[1].append(d.max() - d.mean())
            yerr[0].append(k.mean() - k.min())
            yerr[1].append(k.max() - k.mean())
            said = _setting(row)
            if said == "temp 0":
                said = "temp 0 (greedy), the same lines as k=1"
            (dx, dy), align = offsets[colour]
            if said == "k=1" or (colour == GREEN and row["temperature"] == 1):
                continue  # drawn already: greedy's point, top-3's at temperature 1
            if d.mean() > table["samples"] - 2.5:
                crowded.append((k.mean(), d.mean(), said, colour))
            else:
                ax.annotate(said, (d.mean(), k.mean()), textcoords="offset points",
                            xytext=(dx, dy), ha=align, fontsize=9, color=colour)  # fmt: skip
        ax.errorbar(xs, ys, xerr=xerr, yerr=yerr, color=colour, linestyle="none", capsize=2)
        ax.plot(xs, ys, color=colour, marker=marker, linestyle=style, ms=7, mfc="white",
                mew=1.6, label=label)  # fmt: skip
    # the points near 15 different starts sit within a few percent of each other: their labels
    # go in a column to the right, at least GAP apart, each joined to its point by a thin line
    GAP, column, below = 4.5, table["samples"] + 0.7, None
    for y, x, said, colour in sorted(crowded, reverse=True):
        below = y if below is None else min(y, below - GAP)
        ax.annotate(said, (x, y), xytext=(column, below), textcoords="data", va="center",
                    fontsize=9, color=colour, arrowprops={"arrowstyle": "-", "color": colour,
                    "lw": 0.6, "alpha": 0.7, "shrinkA": 0, "shrinkB": 4})  # fmt: skip
    ax.set_xlabel(f"different starts (first {table['window']} new tokens) of "
                  f"{table['samples']} samples")  # fmt: skip
    ax.set_ylabel("lines that keep every rule (%)")
    ax.set_xlim(0, table["samples"] + 2.8)  # room for the column of labels
    ax.set_xticks(range(0, table["samples"] + 1, 2))
    ax.set_ylim(-3, 105)
    ax.grid(True, alpha=0.3)
    ax.set_title(f"mean of the {len(table['seeds'])} base models; bars: their range")
    ax.legend(loc="lower left", fontsize=9)
    return fig


def time_figure(lengths, seconds: dict) -> Figure:
    """Measured seconds of one attention call against T, log-log, with a black guide growing
    as T^2 from the first line's first point (lesson 10). Wall time: it differs from machine
    to machine and run to run, so no lesson quotes it."""
    Ts = _numbers("lengths", lengths)
    if not isinstance(seconds, dict) or not seconds:
        raise TypeError("seconds: expected a non-empty dict {label: seconds at each length}")
    fig, ax = new_figure(5.8, 3.8)
    first = None
    for (label, values), marker, colour in zip(seconds.items(), "os^", (BLUE, ORANGE, GREEN),
                                               strict=False):  # fmt: skip
        values = _numbers(label, values)
        if len(values) != len(Ts):
            raise ValueError(
                f"{label}: expected {len(Ts)} times, one per length, got {len(values)}"
            )
        first = values[0] if first is None else first
        ax.loglog(Ts, values, marker=marker, color=colour, mfc="white", mew=1.6, linewidth=2,
                  label=label)  # fmt: skip
    ax.loglog(Ts, [first * (T / Ts[0]) ** 2 for T in Ts], ":", color="black", label="grows as T²")
    ax.set_xticks(Ts, [str(T) for T in Ts])
    ax.minorticks_off()
    ax.set_xlabel("sequence length T")
    ax.set_ylabel("seconds (this machine, now)")
    ax.set_title("wall time of one forward call")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=9)
    return fig
