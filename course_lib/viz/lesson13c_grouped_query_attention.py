"""Lesson 13c's figure: which query heads share a key/value head."""

from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch

from course_lib.viz.style import PALETTE, new_figure


def head_groups_figure(num_heads: int, num_kv_heads: int) -> Figure:
    """Query heads (top) joined to the key/value head each reads (bottom): head h reads
    h // (num_heads / num_kv_heads); a group's boxes share a colour and its number (lesson 13c)."""
    for name, value in (("num_heads", num_heads), ("num_kv_heads", num_kv_heads)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: expected a positive int, got {value!r}")
    if num_heads % num_kv_heads:
        raise ValueError(
            f"num_kv_heads: expected a divisor of num_heads = {num_heads}, got {num_kv_heads}"
        )
    group = num_heads // num_kv_heads
    fig, ax = new_figure(0.75 * num_heads + 1.5, 2.2)
    kv_x = [(j + 0.5) * group - 0.5 for j in range(num_kv_heads)]  # under the group's middle
    for h in range(num_heads):
        j = h // group
        ax.plot([h, kv_x[j]], [1.0, 0.0], color="0.55", linewidth=1.2, zorder=1)
    for x, y, text, j in [(h, 1.0, f"q{h}", h // group) for h in range(num_heads)] + [
        (kv_x[j], 0.0, f"kv{j}", j) for j in range(num_kv_heads)
    ]:
        ax.add_patch(
            FancyBboxPatch(
                (x - 0.32, y - 0.17),
                0.64,
                0.34,
                boxstyle="round,pad=0.02",
                facecolor=PALETTE[j % 6],
                edgecolor="black",
                zorder=2,
            )
        )
        ax.text(
            x,
            y,
            text,
            ha="center",
            va="center",
            fontsize=9,
            zorder=3,
            color="white" if j % 6 in (0, 3) else "black",
        )
    ax.set_xlim(-0.8, num_heads - 0.2)
    ax.set_ylim(-0.4, 1.4)
    ax.axis("off")
    ax.set_title(
        f"{num_heads} query heads, {num_kv_heads} key/value heads: query head h "
        f"reads key/value head h // {group}",
        fontsize=10,
    )
    return fig
