"""Lesson 14's figure: the bends a feed-forward layer can use, GELU, SiLU and sigmoid, with
the negative side drawn large enough to read their dips."""

import torch
import torch.nn.functional as F
from matplotlib.figure import Figure

from course_lib.viz.style import LINE_STYLES, new_figure

# (label, function, dash pattern): the lines differ by dash as well as by colour
BENDS = (("GELU", F.gelu, LINE_STYLES[0]), ("SiLU", F.silu, LINE_STYLES[1]),
         ("sigmoid (GLU's gate)", torch.sigmoid, LINE_STYLES[3]))  # fmt: skip


# where the zoomed panel writes each minimum, clear of the curves (data coordinates)
LABEL_AT = {"GELU": (0.35, -0.3), "SiLU": (-3.3, -0.3)}


def bends_figure(lo: float = -5.0, hi: float = 5.0) -> Figure:
    """GELU, SiLU and sigmoid on [lo, hi] (left), and the same curves zoomed on z < 1.5
    (right), where GELU's and SiLU's minima are marked (lesson 14)."""
    if not lo < -1.5 < 1.5 < hi:
        raise ValueError(f"lo, hi: expected lo < -1.5 and hi > 1.5, got {lo}, {hi}")
    z = torch.linspace(lo, hi, 2001)
    fig, (whole, near) = new_figure(9.0, 3.4, ncols=2)
    for name, bend, style in BENDS:
        curve = bend(z)
        for ax in (whole, near):
            line = ax.plot(z, curve, style, lw=2.2, label=name)[0]
        if name != BENDS[2][0]:  # the dips below zero, the right panel's subject
            i = int(curve.argmin())
            near.plot(z[i], curve[i], "o", ms=7, color=line.get_color())
            near.annotate(f"{name} lowest: {curve[i]:.2f}", (z[i], curve[i]), fontsize=9,
                          xytext=LABEL_AT[name], ha="center", va="center",
                          arrowprops={"arrowstyle": "-", "color": "0.4", "lw": 0.8})  # fmt: skip
    for ax in (whole, near):
        ax.axhline(0, color="0.6", lw=0.8)
        ax.set_xlabel("z")
    whole.set(ylabel="activation(z)", title="the whole range")
    near.set(xlim=(lo, 1.5), ylim=(-0.4, 1.0), title="zoomed: z below 1.5")
    whole.legend(fontsize=9)
    fig.suptitle("Three bends a feed-forward layer can use")
    return fig
