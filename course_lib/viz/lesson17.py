"""Lesson 17's figure: the bytes attention holds against the sequence length, on log axes."""

from matplotlib.figure import Figure

from course_lib.viz.style import LINE_MARKERS, _numbers, new_figure

MIB = 2**20


def memory_figure(lengths, panels: dict) -> Figure:
    """Log-log panels of MiB against T (lesson 17): `panels` maps each panel's title to
    {line label: bytes at each length}; every line keeps one marker in every panel. Two grey
    guides show growth as T^2 (dotted, from the first line's first point) and as T
    (dash-dotted, from the last line's)."""
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
    fig, axes = new_figure(4.4 * len(panels), 3.6, ncols=len(panels), squeeze=False)
    for ax, (title, lines) in zip(axes[0], panels.items(), strict=True):
        for label, sizes in lines.items():
            sizes = _numbers(label, sizes)
            if len(sizes) != len(Ts):
                raise ValueError(
                    f"{label}: expected {len(Ts)} sizes, one per length, got {len(sizes)}"
                )
            # later lines with smaller markers: two lines of equal bytes both stay visible
            size = 10 - 2 * labels.index(label)
            ax.loglog(Ts, [b / MIB for b in sizes], marker=marker[label], ms=size, label=label,
                      zorder=3)  # fmt: skip
        starts = [sizes[0] / MIB for sizes in lines.values()]
        for power, start, style in ((2, starts[0], ":"), (1, starts[-1], "-.")):
            guide = [start * (T / Ts[0]) ** power for T in Ts]
            said = "T^2" if power == 2 else "T"
            ax.loglog(Ts, guide, style, color="grey", label=f"grows as {said}", zorder=2)
        ax.set_xticks(Ts, [str(T) for T in Ts])
        ax.minorticks_off()
        ax.set_xlabel("sequence length T")
        ax.set_ylabel("MiB")
        ax.set_title(title)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=8)
    return fig
