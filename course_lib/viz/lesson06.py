"""Lesson 06's figures (the capstone): training curves, the head detectors over training
and per model, every head's attention on one sequence, and the knock-out table."""

import numpy as np
import seaborn as sns
import torch
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize, SymLogNorm
from matplotlib.figure import Figure

from course_lib.viz.lesson04_multihead import set_token_ticks
from course_lib.viz.style import (
    BLUE,
    COLOURS,
    LINE_STYLES,
    ORANGE,
    VERMILLION,
    VIRIDIS_DARK,
    new_figure,
)


def plot_history(history, *, smooth: int = 25) -> Figure:
    """Loss curves and per-block gradient norms of a training run (lesson 06).

    history: what course_lib.train.train returns (step, train_loss, val_step, val_loss,
    grad_norm: per step, one norm per block). Training loss is drawn faint per step and as
    a running mean over `smooth` steps.
    """
    if not history.step:
        raise ValueError("history: expected at least one recorded step, got an empty history")
    steps = torch.tensor(history.step, dtype=torch.float32)
    loss = torch.tensor(history.train_loss)
    window = max(1, min(int(smooth), len(loss)))
    running = loss.unfold(0, window, 1).mean(dim=1)  # (steps - window + 1,)
    fig, (ax_loss, ax_grad) = new_figure(11.0, 3.8, ncols=2)
    ax_loss.plot(steps, loss, color=COLOURS["training"], alpha=0.25, lw=0.8)
    training = {"color": COLOURS["training"], "label": f"training (mean of {window})"}
    ax_loss.plot(steps[window - 1 :], running, **training)
    validation = {"color": COLOURS["validation"], "label": "validation"}
    ax_loss.plot(history.val_step, history.val_loss, "o-", ms=4, **validation)
    ax_loss.set_xlabel("step")
    ax_loss.set_ylabel("cross-entropy loss (nats)")
    ax_loss.set_title("loss")
    ax_loss.legend(fontsize=9)
    ax_loss.grid(True, alpha=0.3)
    norms = torch.tensor(history.grad_norm)  # (steps, blocks)
    for block in range(norms.shape[1]):
        style = LINE_STYLES[block % len(LINE_STYLES)]  # blocks told apart without colour too
        ax_grad.plot(steps, norms[:, block], style, lw=0.8, label=f"block {block}")
    ax_grad.set_yscale("log")
    ax_grad.set_xlabel("step")
    ax_grad.set_ylabel("gradient norm (before clipping)")
    ax_grad.set_title("gradient norm of each block")
    ax_grad.legend(fontsize=9)
    ax_grad.grid(True, alpha=0.3)
    return fig


# one look per head detector (names as in course_lib.heads.DETECTORS) in every picture: the
# mark on an attention map's (query, key) cell, its colour there, a colour for bars, and how
# the mark reads in words (the marks' edges must show on viridis, the bars' colours on white)
DETECTOR_STYLES = {
    "previous": {"marker": "o", "edge": "white", "color": BLUE, "mark": "white circles"},
    "bracket": {"marker": "s", "edge": "red", "color": VERMILLION, "mark": "red squares"},
    "subject": {"marker": "D", "edge": "orange", "color": ORANGE, "mark": "orange diamonds"},
}


def detector_timeline(steps, records, detectors=tuple(DETECTOR_STYLES), chance=None) -> Figure:
    """Best head's score per detector over training steps (lesson 06).

    records: one dict per step, detector name -> (layers, H) scores; chance: optional
    detector name -> the score of a head spreading evenly (heads.chance_scores), drawn dashed.
    """
    if len(steps) != len(records) or not records:
        raise ValueError(f"records: expected one per step ({len(steps)}), got {len(records)}")
    fig, ax = new_figure(7.6, 3.4)
    for name in detectors:
        style, best = DETECTOR_STYLES[name], [float(r[name].max()) for r in records]
        ax.plot(steps, best, marker=style["marker"], ms=4, color=style["color"], label=name)
    # chance levels can lie close together: each gets its own dash pattern and legend entry
    dashes = dict(zip(detectors, LINE_STYLES[1:] * len(detectors), strict=False))
    for name in detectors if chance is not None else ():
        ax.axhline(chance[name], color=DETECTOR_STYLES[name]["color"], ls=dashes[name], lw=1.2,
                   label=f"{name} chance")  # fmt: skip
    ax.set_ylim(0, 1)
    ax.set_xlabel("training step")
    ax.set_ylabel("best head's detector score")
    ax.set_title("how early each job finds a head")
    fig.legend(fontsize=8, loc="outside right center")
    ax.grid(True, alpha=0.3)
    return fig


def detector_heatmaps(tables: dict, detectors=tuple(DETECTOR_STYLES), chance=None) -> Figure:
    """Rows of (layer x head) detector heatmaps: one row per model, one column per detector.

    tables: model label -> {detector: (layers, H) scores} (lesson 06). chance: optional
    detector name -> the score of a head spreading evenly, marked on the column's colour bar.
    """
    fig, axes = new_figure(
        11.0, 2.1 * len(tables) + 0.6, ncols=len(detectors), nrows=len(tables), squeeze=False
    )
    scale = ScalarMappable(Normalize(0, 1), cmap="viridis")
    for col, name in enumerate(detectors):
        label = f"{name} score" + (
            "" if chance is None else f"\n(white line: chance {chance[name]:.2f})"
        )
        bar = fig.colorbar(scale, ax=axes[:, col], label=label, pad=0.02, aspect=30)
        if chance is not None:
            bar.ax.axhline(chance[name], color="white", lw=2)
    for row, (label, scores) in enumerate(tables.items()):
        for col, name in enumerate(detectors):
            table = scores[name]
            ax = axes[row][col]
            sns.heatmap(
                table.numpy(),
                ax=ax,
                vmin=0,
                vmax=1,
                cmap="viridis",
                annot=True,
                fmt=".2f",
                cbar=False,
                annot_kws={"fontsize": 9},
            )
            ax.set_xlabel("head")
            ax.set_ylabel("layer")
            ax.set_title(f"{label}: {name}", fontsize=10)
    return fig


def attention_grid(weights, tokens, pairs=None) -> Figure:
    """Every (layer, head) attention map of one sequence, labelled with its tokens (lesson 06).

    weights: one (H, T, T) tensor per layer; pairs: optional detector -> [(query, key)],
    marked on every map so you can see which head looks where the job needs.
    """
    layers, H = len(weights), weights[0].shape[0]
    fig, axes = new_figure(3.1 * H + 1.2, 3.4 * layers + 0.6, ncols=H, nrows=layers, squeeze=False)
    for layer in range(layers):
        for head in range(H):
            ax = axes[layer][head]
            image = ax.imshow(weights[layer][head].numpy(), vmin=0, vmax=1, cmap="viridis")
            for name, found in (pairs or {}).items():
                if found:
                    q, k = zip(*found, strict=True)
                    style = DETECTOR_STYLES.get(name, {"marker": "x", "edge": "white"})
                    ax.scatter(
                        k,
                        q,
                        s=18,
                        marker=style["marker"],
                        facecolors="none",
                        edgecolors=style["edge"],
                        linewidths=1.2,
                        label=name,
                    )
            # token names on the outer maps only, at a readable size
            set_token_ticks(ax, tokens, x=layer == layers - 1, y=head == 0)
            ax.set_title(f"layer {layer}, head {head}", fontsize=10)
        axes[layer][0].set_ylabel("query (predicts the next token)")
    for ax in axes[-1]:
        ax.set_xlabel("key")
    fig.colorbar(image, ax=axes, shrink=0.6, label="attention weight")
    if pairs:
        handles, labels = axes[0][0].get_legend_handles_labels()
        # on the maps' darkest colour, where the marks were made to show (white ones too)
        where = {"loc": "outside lower center", "ncols": len(labels), "fontsize": 9}
        look = {"facecolor": VIRIDIS_DARK, "labelcolor": "white", "framealpha": 1}
        fig.legend(handles, labels, **where, **look)
    return fig


SQUEEZE_ABOVE = 0.25  # ablation_heatmap: colours linear below this rise, logarithmic above


def ablation_heatmap(labels, table, skills, *, limit: float = 1.0, title=None) -> Figure:
    """Figure: loss increase per skill (columns) when each head (rows) is knocked out
    (lesson 06).

    labels, table: what ablation.ablation_table returns (labels[0] None, the baseline row);
    skills: the column names. Increases are signed (a knock-out can help a little), so RdBu_r
    centred on 0, reaching +-limit or the largest increase, whichever is further. Past
    SQUEEZE_ABOVE the colours are spaced logarithmically, so a rise five times another still
    looks darker while small rises keep some colour; every cell carries its number.
    """
    table = torch.as_tensor(table, dtype=torch.float32)
    if labels[0] is not None or table.shape != (len(labels), len(skills)):
        raise ValueError(
            f"table: expected ablation_table's rows (baseline first) x {len(skills)} skills, "
            f"got labels {labels[:2]}... and shape {tuple(table.shape)}"
        )
    rise = (table[1:] - table[0]).numpy()  # (heads, skills)
    rows = [f"layer {layer}, head {head}" for layer, head in labels[1:]]
    reach = max(float(limit), float(np.abs(rise).max()))
    norm = SymLogNorm(SQUEEZE_ABOVE, linscale=1.0, vmin=-reach, vmax=reach, base=10)
    fig, ax = new_figure(1.6 + 1.25 * len(skills), 0.9 + 0.36 * len(rows))
    image = ax.imshow(rise, cmap="RdBu_r", norm=norm, aspect="auto")
    for (i, j), value in np.ndenumerate(rise):
        ink = "white" if abs(norm(value) - 0.5) > 0.3 else "black"
        ax.text(j, i, f"{value:+.2f}", ha="center", va="center", fontsize=9, color=ink)
    columns = [f"{skill}\n(base {float(table[0, j]):.2f})" for j, skill in enumerate(skills)]
    ax.set_xticks(range(len(skills)), columns, fontsize=9)
    ax.set_yticks(range(len(rows)), rows, fontsize=9)
    ax.set_xlabel("skill: loss on its positions (nats)")
    ax.set_ylabel("head knocked out")
    ax.tick_params(length=0)
    label = f"loss increase (nats)\nscale squeezed past {SQUEEZE_ABOVE:g}"
    bar = fig.colorbar(image, ax=ax, label=label)
    ticks = [t for t in (-5, -1, -SQUEEZE_ABOVE, 0, SQUEEZE_ABOVE, 1, 5) if abs(t) <= reach]
    bar.set_ticks(ticks, labels=[f"{t:g}" for t in ticks])
    bar.minorticks_off()
    ax.set_title(title or "loss increase when one head is knocked out", fontsize=10)
    return fig
