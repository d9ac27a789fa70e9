"""Lesson 12's figures: every head's detector scores against chance, the copy heads forming
over the saved steps, and what knocking out each head costs each skill."""

import numpy as np
from matplotlib.colors import FuncNorm
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from course_lib.viz.style import BLUE, GREEN, ORANGE, PURPLE, new_figure

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


def forming_figure(steps, scores: dict, chance: dict) -> Figure:
    """The copy heads forming (lesson 12): each head's detector score after each saved step,
    with the detectors' chance levels (dotted, named in the legend); the copy's excess over the
    same steps is lesson 11b's figure. scores maps a label such as "L1 H3: induction" to one
    score per step; the part after the colon names its detector, a key of chance."""
    fig, top = new_figure(8.4, 4.0)
    looks = ((BLUE, "o", "-"), (ORANGE, "s", "-"), (GREEN, "D", "--"), (PURPLE, "v", "--"))
    for (label, values), (colour, marker, style) in zip(scores.items(), looks, strict=False):
        top.plot(steps, values, style, marker=marker, ms=5, lw=2, color=colour, label=label)
    jobs = dict.fromkeys(label.split(": ")[-1] for label in scores)
    # dotted and dash-dotted, not colour alone, tell the chance levels apart
    for job, colour, dashes in zip(jobs, (BLUE, ORANGE), (":", (0, (6, 2, 1, 2))), strict=False):
        top.axhline(chance[job], color=colour, lw=1.2, ls=dashes,
                    label=f"chance level, {job} ({chance[job]:.2f})")  # fmt: skip
    top.set_ylim(0, 1)
    top.set(xlabel="training step", ylabel="detector score")
    top.legend(fontsize=9, loc="upper left", ncols=2)
    top.set_title("Your model's copy heads after each saved step (400 validation lines)",
                  fontsize=11)  # fmt: skip
    return fig


def rise_norm(rises) -> FuncNorm:
    """The colour scale of a table of rises in excess (lesson 12): symmetric about 0 (white) and
    on the square root of the size, so that a rise of 2 looks clearly more than one of 1, a
    rise of 4 more again, and a fall of 0.3 still shows."""
    top = max(float(np.abs(np.asarray(rises, dtype=float)).max()), 0.1)

    def forward(x):
        return np.sign(x) * np.sqrt(np.abs(x))

    def inverse(y):
        return np.sign(y) * y**2

    return FuncNorm((forward, inverse), vmin=-top, vmax=top)


RISE_TICKS = (-4, -2, -1, -0.5, 0, 0.5, 1, 2, 4)


def knockout_figure(labels, rises, skills, title: str) -> Figure:
    """What knocking out each head costs each skill (lesson 12): rises (heads, skills) is the
    excess with the head knocked out minus the excess with nothing knocked out, coloured on
    rise_norm's square-root scale; every cell carries its number."""
    rises = np.asarray(rises, dtype=float)
    fig, ax = new_figure(8.4, 0.5 * len(labels) + 1.9)
    norm = rise_norm(rises)
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
    ticks = [t for t in RISE_TICKS if norm.vmin <= t <= norm.vmax]
    bar = fig.colorbar(image, ax=ax, label="rise in excess (nats; square-root scale)",
                       ticks=ticks)  # fmt: skip
    bar.ax.set_yticklabels([f"{t:g}" for t in ticks])
    return fig
