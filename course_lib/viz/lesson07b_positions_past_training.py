"""Lesson 07b's figures: a RoPE score's rounding drift along the sequence, and excess loss by
position past the trained length for each way of giving a model positions."""

import numpy as np
import torch
from matplotlib.figure import Figure

from course_lib.viz.style import LINE_STYLES, colour, new_figure


def _rows(name, values) -> np.ndarray:
    if isinstance(values, torch.Tensor):
        values = values.detach().double().cpu().numpy()
    values = np.asarray(values, dtype=float)
    if values.ndim == 1:
        values = values[None]
    if values.ndim != 2 or values.shape[1] == 0:
        raise ValueError(f"{name}: expected (T,) or (seeds, T) numbers, got shape {values.shape}")
    return values


def length_figure(curves: dict, train_len: int, *, title: str = "", zoom: float = 0.3,
                  zoom_to: int | None = None) -> Figure:  # fmt: skip
    """Excess loss (nats above the floor) against the position of the prediction, one line per
    label of `curves` ({label: (seeds, T - 1)}): the mean over the seeds, their range shaded.
    Two panels: on the right every position; on the left positions 0 to `zoom_to` (default
    train_len + 8) with the excess axis cut at `zoom`, where the curves inside the trained
    length and just past it differ by hundredths. The trained positions are shaded grey; the
    legend sits below both panels, clear of the curves (lesson 07b)."""
    fig, (ax_near, ax_all) = new_figure(11.5, 5.0, ncols=2, width_ratios=[1, 1.5])
    zoom_to = train_len + 8 if zoom_to is None else zoom_to
    for ax in (ax_near, ax_all):
        ax.axvspan(-0.5, train_len - 1.5, color="0.9", linewidth=0,
                   label=f"positions 0-{train_len - 2}: trained")  # fmt: skip
        for i, (label, values) in enumerate(curves.items()):
            runs = _rows(label, values)  # (S, T - 1)
            x = np.arange(runs.shape[1])
            line = ax.plot(x, runs.mean(0), LINE_STYLES[i % len(LINE_STYLES)],
                           color=colour(label), linewidth=2, label=label)[0]  # fmt: skip
            if len(runs) > 1:  # the seeds' range: a light band, its edges drawn thin in the
                # curve's own colour and dashes, so two overlapping bands stay told apart
                ax.fill_between(x, runs.min(0), runs.max(0), color=line.get_color(),
                                alpha=0.10, linewidth=0)  # fmt: skip
                for edge in (runs.min(0), runs.max(0)):
                    ax.plot(x, edge, LINE_STYLES[i % len(LINE_STYLES)], color=line.get_color(),
                            linewidth=0.7, alpha=0.7)  # fmt: skip
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_xlabel("position of the prediction (t predicts token t + 1)", fontsize=11)
        ax.grid(True, alpha=0.3)
    if any(len(_rows(label, v)) > 1 for label, v in curves.items()):
        ax_all.fill_between([], [], [], facecolor="0.8", edgecolor="0.5", hatch="..",
                            label="range of the seeds (shaded)")  # fmt: skip
    ax_near.set_xlim(-0.5, zoom_to + 0.5)
    ax_near.set_ylim(-0.02, zoom)
    ax_near.set_ylabel("excess loss (nats above the floor)", fontsize=11)
    ax_near.set_title(f"positions 0-{zoom_to}, excess up to {zoom:g}", fontsize=11)
    ax_all.set_xlim(-0.5, x[-1] + 0.5)
    ax_all.set_ylabel("excess loss (nats above the floor)", fontsize=11)
    ax_all.set_title(title or "every position: mean of the seeds, their range shaded", fontsize=11)
    fig.legend(*ax_all.get_legend_handles_labels(), loc="outside lower center", ncols=3,
               fontsize=10)  # fmt: skip
    return fig


def drift_figure(shifts, drifts: dict, *, title: str = "") -> Figure:
    """How far a RoPE score moves when query and key shift together by s, on log axes: one
    line per label of `drifts` ({label: (S,)}, e.g. float32 and float64); exact zeros are
    left out (a log axis has no place for them) (lesson 07b)."""
    s = _rows("shifts", shifts)[0]
    fig, ax = new_figure(7.0, 3.8)
    for i, (label, values) in enumerate(drifts.items()):
        v = _rows(label, values)[0]
        if v.shape != s.shape:
            raise ValueError(f"{label}: expected {len(s)} drifts, one per shift, got {len(v)}")
        keep = v > 0
        ax.plot(s[keep], v[keep], LINE_STYLES[i % len(LINE_STYLES)], marker="o", markersize=4,
                linewidth=1.5, label=label)  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("shift s (query and key both moved by s)", fontsize=11)
    ax.set_ylabel("|score(s) - score(0)|", fontsize=11)
    ax.set_title(title or "the same offset, moved along the sequence", fontsize=11)
    ax.legend(fontsize=10, loc="center right")
    ax.grid(True, alpha=0.3)
    return fig
