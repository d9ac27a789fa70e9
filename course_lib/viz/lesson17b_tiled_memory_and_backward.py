"""Lesson 17b's figure: the bytes attention holds against the sequence length, on log axes."""

import math

from matplotlib.figure import Figure

from course_lib.viz.style import LINE_MARKERS, _numbers, new_figure

MIB = 2**20
SHIFT = 1.08  # how far right, on the log axis, a line of the same bytes as another is drawn


def _powers_of_4(panel_sizes) -> list[float]:
    """The powers of 4 (..., 0.25, 1, 4, 16, ...) that span the MiB drawn in one panel: one
    step of T's doubling is one tick on a line that grows as T^2, half a tick as T."""
    mib = [b / MIB for sizes in panel_sizes for b in sizes if b > 0]
    low, high = math.floor(math.log(min(mib), 4)), math.ceil(math.log(max(mib), 4))
    return [4.0**n for n in range(low, high + 1)]


def memory_figure(lengths, panels: dict) -> Figure:
    """Log-log panels of MiB against T (lesson 17b): `panels` maps each panel's title to
    {line label: bytes at each length}; every line keeps one marker in every panel. A line of
    the same bytes as an earlier one in its panel is drawn a little to the right, and its
    label says so. Two black guides show growth as T^2 (dotted, from half the first line's
    first point) and as T (dash-dotted, from half the last line's): at half, so that they lie
    beside a line that grows as they do, not on it, and their labels say so."""
    Ts = _numbers("lengths", lengths)
    if not isinstance(panels, dict) or not all(isinstance(v, dict) for v in panels.values()):
        raise TypeError(
            f"panels: expected a dict {{title: {{label: bytes}}}}, got {type(panels).__name__}"
        )
    if not panels:
        raise ValueError("panels: expected at least one {title: {label: bytes}}, got none")
    labels = list(dict.fromkeys(label for lines in panels.values() for label in lines))
    if len(labels) > len(LINE_MARKERS):
        raise ValueError(f"panels: expected at most {len(LINE_MARKERS)} lines, got {len(labels)}")
    marker = dict(zip(labels, LINE_MARKERS, strict=False))
    fig, axes = new_figure(4.6 * len(panels), 5.6, ncols=len(panels), squeeze=False)
    for ax, (title, lines) in zip(axes[0], panels.items(), strict=True):
        drawn = {}
        for label, sizes in lines.items():
            sizes = _numbers(label, sizes)
            if len(sizes) != len(Ts):
                raise ValueError(
                    f"{label}: expected {len(Ts)} sizes, one per length, got {len(sizes)}"
                )
            # each later line thinner, with a smaller hollow marker; one of the same bytes as
            # an earlier line (as torch's kernel's and flash_attention's) is moved right
            order = labels.index(label)
            same = next((other for other, seen in drawn.items() if seen == sizes), None)
            xs = Ts if same is None else [T * SHIFT for T in Ts]
            said = label if same is None else f"{label} (same bytes as {same}, drawn right)"
            ax.loglog(xs, [b / MIB for b in sizes], marker=marker[label], ms=13 - 3 * order,
                      mfc="white", mew=1.8, linewidth=3.2 - 0.7 * order, label=said,
                      zorder=3)  # fmt: skip
            drawn[label] = sizes
        starts = [sizes[0] for sizes in drawn.values()]
        guides = []
        for power, start, style in ((2, starts[0], ":"), (1, starts[-1], "-.")):
            guides.append([start / 2 * (T / Ts[0]) ** power for T in Ts])  # bytes
            said = "T²" if power == 2 else "T"
            ax.loglog(Ts, [b / MIB for b in guides[-1]], style, color="black", linewidth=1.3,
                      label=f"grows as {said} (at ½)", zorder=4)  # fmt: skip
        ticks = _powers_of_4([*drawn.values(), *guides])
        ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
        ax.set_xticks(Ts, [str(T) for T in Ts])
        ax.minorticks_off()
        ax.set_xlabel("sequence length T")
        ax.set_ylabel("MiB")
        ax.set_title(title)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2))  # below the panel
    return fig
