"""Lesson 12's figures: every head's detector scores against chance, the copy heads forming
beside the copy skill's excess, and what knocking out each head costs each skill."""

import numpy as np
from matplotlib.colors import SymLogNorm
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from course_lib.viz.style import BLUE, ORANGE, VERMILLION, new_figure

# a head is said to do a job where its score is at least this many times the chance level
JOB = 3.0


def _head_labels(layers: int, heads: int) -> list[str]:
    return [f"L{layer} H{head}" for layer in range(layers) for head in range(heads)]


def detector_figure(scores: dict, chance: dict, title: str) -> Figure:
    """Every head's score on each detector (lesson 12): scores maps a detector to its (L, H)
    tensor, chance to its chance level. Cells are coloured by the score (0 to 1) and carry it;
    a box marks each score at least JOB times its chance level."""
    names = list(scores)
    layers, heads = scores[names[0]].shape
    table = np.array([scores[n].detach().double().flatten().tolist() for n in names])  # (K, LH)
    fig, ax = new_figure(8.4, 0.75 * len(names) + 1.9)
    image = ax.imshow(table, vmin=0, vmax=1, cmap="viridis", aspect="auto")
    for i, name in enumerate(names):
        for j, value in enumerate(table[i]):
            ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=10,
                    color="black" if value > 0.55 else "white")  # fmt: skip
            if value >= JOB * chance[name]:
                ax.add_patch(Rectangle((j - 0.46, i - 0.44), 0.92, 0.88, fill=False,
                                       edgecolor=ORANGE, lw=2.5))  # fmt: skip
    ax.set_xticks(range(layers * heads), _head_labels(layers, heads), fontsize=10)
    ax.set_yticks(range(len(names)),
                  [f"{n} (chance {chance[n]:.2f})" for n in names], fontsize=10)  # fmt: skip
    ax.set_xlabel("head (layer L, head H)")
    ax.set_title(f"{title}\n(orange box: at least {JOB:g} times the chance level)", fontsize=11)
    fig.colorbar(image, ax=ax, label="mean attention on the key")
    return fig


def forming_figure(steps, previous, induction, excess, chance: dict, heads: dict) -> Figure:
    """The copy heads forming (lesson 12): above, the previous-token score of a layer-0 head
    and the induction score of a layer-1 head after each saved step, with their chance
    levels; below, the copy positions' excess at the same steps (log scale). heads names the
    two heads ("L0 H3"), chance holds "previous" and "induction"."""
    fig, (top, bottom) = new_figure(7.6, 5.6, nrows=2, sharex=True)
    for values, name, colour, marker in ((previous, "previous", ORANGE, "s"),
                                         (induction, "induction", BLUE, "o")):  # fmt: skip
        top.plot(steps, values, "-", marker=marker, ms=5, lw=2, color=colour,
                 label=f"{heads[name]}: {name} score")  # fmt: skip
        top.axhline(chance[name], color=colour, lw=1, ls=":")
    top.annotate("dotted: each detector's chance level", (steps[-1], chance["induction"]),
                 xytext=(0, 4), textcoords="offset points", ha="right", fontsize=9,
                 color="0.3")  # fmt: skip
    top.set_ylim(0, 1)
    top.set_ylabel("detector score")
    top.legend(fontsize=9, loc="upper left")
    top.set_title("Your model's copy heads after each saved step (400 validation lines)",
                  fontsize=11)  # fmt: skip
    bottom.plot(steps, excess, "-", marker="D", ms=5, lw=2, color=VERMILLION,
                label="excess on copy positions")  # fmt: skip
    bottom.set_yscale("log")
    bottom.set(xlabel="training step", ylabel="excess (nats, log scale)")
    bottom.legend(fontsize=9)
    return fig


def knockout_figure(labels, rises, skills, title: str) -> Figure:
    """What knocking out each head costs each skill (lesson 12): rises (heads, skills) is the
    excess with the head knocked out minus the excess with nothing knocked out. The colour
    scale is symmetric about 0, linear below 0.05 nats and logarithmic above, so that a rise
    of 5 and one of 1 look different; every cell carries its number."""
    rises = np.asarray(rises, dtype=float)
    top = max(float(np.abs(rises).max()), 0.1)
    fig, ax = new_figure(8.4, 0.5 * len(labels) + 1.9)
    norm = SymLogNorm(linthresh=0.05, vmin=-top, vmax=top, base=10)
    image = ax.imshow(rises, cmap="RdBu_r", norm=norm, aspect="auto")
    for i in range(rises.shape[0]):
        for j in range(rises.shape[1]):
            value = rises[i, j]
            dark = abs(norm(value) - 0.5) > 0.3
            ax.text(j, i, f"{value:+.2f}", ha="center", va="center", fontsize=10,
                    color="white" if dark else "black")  # fmt: skip
    ax.set_xticks(range(len(skills)), list(skills), fontsize=10)
    ax.set_yticks(range(len(labels)), [f"L{a} H{b}" for a, b in labels], fontsize=10)
    ax.set_xlabel("skill")
    ax.set_ylabel("head knocked out")
    ax.set_title(title, fontsize=11)
    ticks = [t for t in (-1, -0.1, 0, 0.1, 1) if abs(t) <= top]
    bar = fig.colorbar(image, ax=ax, label="rise in excess (nats; log scale beyond 0.05)",
                       ticks=ticks)  # fmt: skip
    bar.ax.set_yticklabels([f"{t:g}" for t in ticks])
    return fig
