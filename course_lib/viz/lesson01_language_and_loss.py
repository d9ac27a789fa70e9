"""Lesson 01_language_and_loss's figures: the exact next-token distribution at chosen positions
of a line, the first model's learning curve beside the floor, its loss per skill against the
floor per skill, and the map of its trained embeddings, coloured by word class."""

import numpy as np
import torch
from matplotlib.figure import Figure

from course_lib.viz.style import BLUE, COLOURS, PALETTE, _numbers, new_figure

FLOOR_STYLE = {"color": "#000000", "linestyle": "--", "linewidth": 1.4}
UNIFORM_STYLE = {"color": "0.45", "linestyle": ":", "linewidth": 1.4}
COUNTED_STYLE = {"color": PALETTE[4], "linestyle": "-.", "linewidth": 1.4}
CLASS_MARKERS = ("o", "s", "D", "^", "v", "P", "X")  # one per word class, never colour alone
CLASS_COLOURS = (*PALETTE[:6], PALETTE[7])  # the palette without its yellow, faint on white


def _short(tokens, keep: int = 5) -> str:
    """The last `keep` tokens of a context, with an ellipsis where more came before."""
    tokens = list(tokens)
    return ("... " if len(tokens) > keep else "") + " ".join(tokens[-keep:])


def next_token_figure(panels, *, top: int = 5, ncols: int = 4) -> Figure:
    """One small bar chart per position: the `top` most likely next tokens and their exact
    probabilities in blue, as the lesson's explorer draws the exact distribution; the token the
    line really has next marked "(next)", as the explorer marks it, and named in the title.

    panels: (context tokens, distribution {token: p}, true next token, skill) per position.
    """
    panels = list(panels)
    if not panels:
        raise ValueError("panels: expected at least one (context, distribution, next, skill)")
    nrows = -(-len(panels) // ncols)
    fig, axes = new_figure(3.1 * ncols, 2.3 * nrows, ncols=ncols, nrows=nrows, squeeze=False)
    for ax, (context, dist, nxt, skill) in zip(axes.flat, panels, strict=False):
        if not dist or nxt not in dist:
            raise ValueError(f"panels: the next token {nxt!r} must have a probability, got {dist}")
        ranked = sorted(dist.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
        if nxt not in dict(ranked):
            ranked[-1] = (nxt, dist[nxt])
        names = [token for token, _ in ranked][::-1]
        probs = [p for _, p in ranked][::-1]
        ax.barh(range(len(names)), probs, color=BLUE, height=0.7)
        labels = [f"{name} (next)" if name == nxt else name for name in names]
        ax.set_yticks(range(len(names)), labels, fontsize=9)
        ax.set_xlim(0, 1.05)
        ax.set_xticks([0, 0.5, 1])
        others = 1 - sum(probs)
        tail = f"; {len(dist) - len(probs)} more share {others:.2f}" if others > 5e-3 else ""
        ax.set_title(f"{skill}: after '{_short(context)}'\nnext '{nxt}'{tail}", fontsize=9)
        ax.grid(True, axis="x", alpha=0.3)
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("exact probability")
    return fig


def bigram_curve_figure(history, *, floor: float, uniform: float, counted: float) -> Figure:
    """The first model's learning curve, training loss per step (faint) and validation loss,
    beside three levels: a uniform guess, the counted bigram (the best a model that reads one
    token can do) and the floor (the best any model can do)."""
    if not history.step or not history.val_step:
        raise ValueError("history: expected recorded steps and validations, got an empty history")
    for name, value in (("floor", floor), ("uniform", uniform), ("counted", counted)):
        if not isinstance(value, int | float) or not np.isfinite(value):
            raise ValueError(f"{name}: expected a finite number, got {value!r}")
    fig, ax = new_figure(7.2, 3.9)
    steps = [s + 1 for s in history.step]
    ax.plot(steps, history.train_loss, color=COLOURS["training"], lw=1.0, alpha=0.7,
            label="training (each batch)")  # fmt: skip
    ax.plot([s + 1 for s in history.val_step], history.val_loss, "o-", ms=4,
            color=COLOURS["validation"], label="validation")  # fmt: skip
    ax.axhline(uniform, label=f"uniform guess, ln V = {uniform:.3f}", **UNIFORM_STYLE)
    ax.axhline(counted, label=f"best from one token (counted) {counted:.3f}", **COUNTED_STYLE)
    ax.axhline(floor, label=f"floor (best any model can do) {floor:.3f}", **FLOOR_STYLE)
    ax.set_ylim(0, uniform * 1.12)
    ax.set_xlabel("step")
    ax.set_ylabel("loss per prediction (nats)")
    ax.set_title("the first model: embedding, then output layer")
    # below the uniform line and above the curves' plateau, where the axes are empty
    ax.legend(fontsize=8, loc="upper right", bbox_to_anchor=(1.0, 0.86))
    ax.grid(True, alpha=0.3)
    return fig


def skill_loss_figure(floor: dict, excess: dict, shares: dict) -> Figure:
    """Per skill, the floor (grey) and the model's excess on top of it (blue), so each bar is
    the model's loss there; the share of predictions each skill makes under its name."""
    skills = [s for s in floor if s != "all"]
    for name, table in (("excess", excess), ("shares", shares)):
        missing = [s for s in skills if s not in table]
        if missing:
            raise ValueError(
                f"{name}: expected a value for every skill of floor, missing {missing}"
            )
    fig, ax = new_figure(7.2, 3.6)
    x = np.arange(len(skills))
    base = [floor[s] for s in skills]
    top = [excess[s] for s in skills]
    ax.bar(x, base, color="0.75", label="floor: what no model can predict")
    ax.bar(x, top, bottom=base, color=BLUE, hatch="..", label="excess: what this model misses")
    for i, (low, high) in enumerate(zip(base, top, strict=True)):
        ax.text(i, low + high + 0.08, f"+{high:.2f}", ha="center", fontsize=8)
    labels = [f"{s}\n{100 * shares[s]:.0f}%" for s in skills]
    ax.set_xticks(x, labels, fontsize=9)
    ax.set_ylabel("loss per prediction (nats)")
    ax.set_title("loss on each skill's own predictions (under each: its share of them)")
    ax.set_ylim(0, max(b + t for b, t in zip(base, top, strict=True)) * 1.15)
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(True, axis="y", alpha=0.3)
    return fig


def _groups(coords: np.ndarray, near: float) -> list[list[int]]:
    """The points that lie together: linked when closer than `near`, chains included."""
    parent = list(range(len(coords)))

    def root(i):
        while parent[i] != i:
            i = parent[i]
        return i

    gaps = np.linalg.norm(coords[:, None] - coords[None], axis=-1)  # (V, V)
    for i, j in zip(*np.nonzero(gaps < near), strict=True):
        parent[root(i)] = root(j)
    found: dict[int, list[int]] = {}
    for i in range(len(coords)):
        found.setdefault(root(i), []).append(i)
    return list(found.values())


def _group_label(rows, vocab, classes) -> str:
    """What a group holds, in words: a whole class by its name, else its tokens (or a count)."""
    parts = []
    for name, tokens in classes.items():
        here = [vocab[r] for r in rows if vocab[r] in tokens]
        if len(here) == len(tokens):
            parts.append(f"the {name}")
        elif len(here) > 4:
            parts.append(f"{len(here)} of the {name}")
        elif here:
            parts.append(" ".join(here))
    return ", ".join(parts)


def embedding_map_figure(coords, vocab, classes: dict, *, explained: float) -> Figure:
    """The embeddings' first two principal axes: one point per token, coloured and marked by
    its word class (classes: name -> its tokens); each group of points that lie together is
    named by what it holds."""
    coords = coords.detach().cpu().numpy() if isinstance(coords, torch.Tensor) else coords
    coords = np.asarray(coords, dtype=float)
    vocab = list(vocab)
    if coords.shape != (len(vocab), 2):
        raise ValueError(
            f"coords: expected ({len(vocab)}, 2), a point per token, got {coords.shape}"
        )
    if len(classes) > len(CLASS_MARKERS):
        raise ValueError(f"classes: expected at most {len(CLASS_MARKERS)}, got {len(classes)}")
    _numbers("explained", [explained])
    fig, ax = new_figure(7.6, 5.6)
    for (name, tokens), colour, marker in zip(classes.items(), CLASS_COLOURS, CLASS_MARKERS,
                                              strict=False):  # fmt: skip
        rows = [vocab.index(t) for t in tokens]
        # the smaller a class, the higher it is drawn: two prepositions stay visible among
        # the ten verbs they sit with
        ax.scatter(coords[rows, 0], coords[rows, 1], color=colour, marker=marker, s=36,
                   edgecolor="white", linewidth=0.5, label=f"{name} ({len(rows)})",
                   zorder=2 + 1 / len(rows))  # fmt: skip
    span = float(np.ptp(coords, axis=0).max()) or 1.0
    box = {"boxstyle": "round,pad=0.2", "fc": "white", "ec": "0.7", "alpha": 0.85}
    for rows in _groups(coords, near=0.08 * span):
        x, y = coords[rows, 0].max(), coords[rows, 1].max()
        ax.annotate(_group_label(rows, vocab, classes), (x, y), xytext=(4, 4),
                    textcoords="offset points", fontsize=8, color="0.15",
                    bbox=box)  # fmt: skip
    ax.margins(x=0.25, y=0.12)
    ax.set_xlabel("first principal axis")
    ax.set_ylabel("second principal axis")
    ax.set_title(f"the trained embeddings, projected (the two axes keep {100 * explained:.0f}% "
                 "of their variance)", fontsize=10)  # fmt: skip
    ax.legend(fontsize=8, loc="best")
    ax.grid(True, alpha=0.3)
    return fig
