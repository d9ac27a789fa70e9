"""Lesson 06's figures: the sinusoidal encoding, position similarity, RoPE's rotated pairs and
the two unit arrows a rotation turns."""

import math

import seaborn as sns
import torch
from matplotlib.figure import Figure

from course_lib.viz.style import BLUE, LINE_STYLES, new_figure


def encoding_heatmap(pe, *, title="sinusoidal encoding") -> Figure:
    """Heatmap of a (T, D) positional encoding: rows positions, columns dimensions (lesson 06)."""
    data = pe.detach().cpu().numpy() if isinstance(pe, torch.Tensor) else pe
    if data.ndim != 2:
        raise ValueError(f"pe: expected a 2-D (T, D) encoding, got shape {data.shape}")
    fig, ax = new_figure(6.4, 4.2)
    image = ax.imshow(data, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    fig.colorbar(image, ax=ax, shrink=0.85, label="value")
    ax.set_xlabel("dimension (even: sin, odd: cos)")
    ax.set_ylabel("position")
    ax.set_title(title)
    return fig


def cosine_scale(values) -> dict:
    """How to colour cosines: viridis from the smallest value (rounded down to a tenth) to 1
    when none is negative, so the whole scale spans the values; else a diverging map centred
    on 0 (RdBu_r, -1..1), so that white means 0 (lesson 06)."""
    low = float(torch.as_tensor(values).min())
    if low >= 0:
        return {"cmap": "viridis", "vmin": math.floor(low * 10) / 10, "vmax": 1.0}
    return {"cmap": "RdBu_r", "vmin": -1.0, "vmax": 1.0}


def similarity_figure(sim, rows=(0, 16, 40)) -> Figure:
    """The (T, T) position similarity as a heatmap, and a few of its rows as curves (lesson 06)."""
    data = sim.detach().cpu() if isinstance(sim, torch.Tensor) else torch.as_tensor(sim)
    fig, (ax_map, ax_rows) = new_figure(11.0, 4.0, ncols=2, width_ratios=[1, 1.3])
    scale = cosine_scale(data)
    image = ax_map.imshow(data.numpy(), interpolation="nearest", **scale)
    fig.colorbar(image, ax=ax_map, shrink=0.85, label="cosine similarity")
    ax_map.set_xlabel("position")
    ax_map.set_ylabel("position")
    ax_map.set_title(f"every two positions (scale from {scale['vmin']:g})")
    for i, row in enumerate(rows):  # each row its own colour and dash pattern
        style = LINE_STYLES[i % len(LINE_STYLES)]
        ax_rows.plot(data[row].numpy(), style, label=f"position {row}")
        ax_rows.axvline(row, color=ax_rows.lines[-1].get_color(), lw=0.8, ls=":")
    # a band above the peaks (similarity never exceeds 1) holds the legend in one row, clear
    # of every curve
    ax_rows.set_ylim(scale["vmin"] - 0.05, scale["vmax"] + 0.17)
    ax_rows.set_yticks([t for t in ax_rows.get_yticks() if scale["vmin"] - 0.05 <= t <= 1.0])
    ax_rows.set_xlabel("other position")
    ax_rows.set_ylabel("cosine similarity")
    ax_rows.set_title("one row each: the peak is the position itself")
    ax_rows.legend(fontsize=9, loc="upper center", ncol=len(rows), framealpha=1.0)
    ax_rows.grid(True, alpha=0.3)
    return fig


def setup_pair_axes(ax, limit: float, title="pair 0 of q and k"):
    """Square axes centred on 0 for drawing 2-vectors as arrows from the origin (lesson 06)."""
    ax.set_xlim(-limit, limit)
    ax.set_ylim(-limit, limit)
    ax.set_aspect("equal")
    ax.axhline(0, color="0.8", lw=0.8)
    ax.axvline(0, color="0.8", lw=0.8)
    ax.set_xlabel("dimension 2i")
    ax.set_ylabel("dimension 2i+1")
    ax.set_title(title)


def pair_arrow(ax, xy, **kw):
    """A line from the origin to xy with a dot (or another marker) at its tip: a cheap,
    movable arrow (lesson 06)."""
    kw.setdefault("linestyle", "-")
    kw.setdefault("marker", "o")
    (line,) = ax.plot([0, float(xy[0])], [0, float(xy[1])], markevery=[1], **kw)
    return line


def rotated_pair_figure(pair, positions, theta: float = 1.0) -> Figure:
    """One 2-D pair rotated by position * theta for a few positions, arrows from 0 (lesson 06)."""
    from course_lib.position_demos import rotate_pair

    pair = torch.as_tensor(pair, dtype=torch.float32)
    positions = list(positions)
    fig, ax = new_figure(4.6, 4.4)
    setup_pair_axes(ax, 1.25 * float(pair.norm()), title=f"one pair rotated by p x {theta:g} rad")
    # viridis without its palest end: every arrow stands out on white
    colors = sns.color_palette("viridis", len(positions) + 1)[: len(positions)]
    for p, color in zip(positions, colors, strict=True):
        xy = rotate_pair(pair, p * theta)
        pair_arrow(ax, xy, color=color, lw=2)
        ax.annotate(f"p = {p}", xy.tolist(), textcoords="offset points", xytext=(4, 4),
                    fontsize=12)  # fmt: skip
    return fig


def turned_basis_figure(a: float) -> Figure:
    """(1, 0) and (0, 1), dashed, and both turned counter-clockwise by `a` radians, solid, with
    the angle each turned through marked; no coordinates written, they are the learner's to
    work out (lesson 06)."""
    fig, ax = new_figure(4.6, 4.4)
    setup_pair_axes(ax, 1.35, title=f"(1, 0) and (0, 1) turned by a = {a:g} rad")
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    for start, name, marker in ((0.0, "(1, 0)", "o"), (math.pi / 2, "(0, 1)", "s")):
        before = (math.cos(start), math.sin(start))
        after = (math.cos(start + a), math.sin(start + a))
        pair_arrow(ax, before, color="0.55", lw=1.5, linestyle="--", marker=marker)
        pair_arrow(ax, after, color=BLUE, lw=2.5, marker=marker)
        ax.annotate(name, before, textcoords="offset points", xytext=(4, -14), fontsize=11)
        ax.annotate(f"{name} turned", after, textcoords="offset points", xytext=(-30, 8),
                    fontsize=11)  # fmt: skip
        arc = start + torch.linspace(0, a, 20)  # the angle a between before and after
        ax.plot(0.3 * arc.cos(), 0.3 * arc.sin(), color="black", lw=1)
        ax.text(0.42 * math.cos(start + a / 2), 0.42 * math.sin(start + a / 2), "a",
                fontsize=12, ha="center", va="center")  # fmt: skip
    return fig
