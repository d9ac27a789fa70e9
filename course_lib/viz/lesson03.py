"""Lesson 03's figures: one map per head, detector scores, the heads sweep and the
knock-out table (lesson 06 shows the last again)."""

import numpy as np
import seaborn as sns
import torch
from matplotlib.colors import SymLogNorm
from matplotlib.figure import Figure

from course_lib.viz.style import PALETTE, _as_array, new_figure


def set_token_ticks(ax, labels, *, x: bool = True, y: bool = True, fontsize: int = 8):
    """Token labels on a map's key axis (x) and query axis (y); blank where False (lesson 03)."""
    positions = list(range(len(labels)))
    # no ticks at all where unlabelled: an empty tick label still costs a text layout
    ax.set_xticks(positions if x else [], list(labels) if x else [], rotation=90, fontsize=fontsize)
    ax.set_yticks(positions if y else [], list(labels) if y else [], fontsize=fontsize)


def draw_head_map(ax, weights, labels=None, *, x_labels: bool = True, y_labels: bool = True):
    """One head's (T, T) attention as an image, queries down, keys across (lesson 03)."""
    data = _as_array(weights)
    image = ax.imshow(data, vmin=0.0, vmax=1.0, cmap="viridis", interpolation="nearest")
    ax.tick_params(length=0)
    if labels is not None:
        if len(labels) != data.shape[1]:
            raise ValueError(f"labels: expected one per token ({data.shape[1]}), got {len(labels)}")
        set_token_ticks(ax, labels, x=x_labels, y=y_labels)
    return image


def head_grid(
    weights, labels, *, titles=None, ncols: int = 4, cell: float = 2.5, title=None
) -> Figure:
    """Figure: one attention map per head from (n, T, T) weights, ncols to a row (lesson 03).

    Token labels sit on the outer axes only: keys under the last row, queries left of the
    first column. For a model's layers x heads, pass weights.flatten(0, 1) and ncols=H.
    """
    if isinstance(weights, torch.Tensor):
        weights = weights.detach().cpu()
    if weights.ndim != 3:
        raise ValueError(f"weights: expected (n, T, T) maps, got shape {tuple(weights.shape)}")
    n = weights.shape[0]
    if titles is not None and len(titles) != n:
        raise ValueError(f"titles: expected one per map ({n}), got {len(titles)}")
    ncols = min(ncols, n)
    nrows = -(-n // ncols)
    fig, axes = new_figure(cell * ncols + 1.2, cell * nrows + 0.7, ncols=ncols, nrows=nrows,
                           squeeze=False)  # fmt: skip
    for i, ax in enumerate(axes.flat):
        if i >= n:
            ax.set_visible(False)
            continue
        image = draw_head_map(
            ax, weights[i], labels, x_labels=i + ncols >= n, y_labels=i % ncols == 0
        )
        ax.set_title(titles[i] if titles is not None else f"head {i}", fontsize=10)
    fig.colorbar(image, ax=axes, shrink=0.6, label="attention weight")
    fig.supxlabel("key: the token looked at", fontsize=9)
    fig.supylabel("query: the token looking", fontsize=9)
    if title:
        fig.suptitle(title)
    return fig


def detector_heatmap(scores: dict, *, title=None) -> Figure:
    """Figure: each detector's score per (layer, head), one annotated panel each (lesson 03).

    scores: {detector name: (layers, H) tensor or nested list}, e.g. a card's "detectors".
    """
    if not scores:
        raise ValueError("scores: expected at least one detector, got none")
    tables = {name: torch.as_tensor(table, dtype=torch.float32) for name, table in scores.items()}
    for name, table in tables.items():
        if table.dim() != 2:
            raise ValueError(
                f"{name}: expected a (layers, H) table, got shape {tuple(table.shape)}"
            )
    layers, heads = next(iter(tables.values())).shape
    fig, axes = new_figure(
        min(4.6, 1.0 + 0.75 * heads) * len(tables), 1.2 + 0.55 * layers, ncols=len(tables)
    )
    axes = [axes] if len(tables) == 1 else list(axes)
    for i, (ax, (name, table)) in enumerate(zip(axes, tables.items(), strict=True)):
        sns.heatmap(
            table.numpy(), ax=ax, vmin=0.0, vmax=1.0, cmap="viridis", annot=True, fmt=".2f",
            annot_kws={"fontsize": 9}, cbar=i == len(tables) - 1,
            cbar_kws={"label": "mean attention\non the target"},
            xticklabels=range(heads), yticklabels=range(layers),
        )  # fmt: skip
        ax.set_title(name)
        ax.set_xlabel("head")
        ax.set_ylabel("layer" if i == 0 else "")
        ax.tick_params(axis="y", labelrotation=0)
    if title:
        fig.suptitle(title)
    return fig


HEAD_MARKERS = ("o", "s", "D", "^")  # 1, 2, 4, 8 heads: told apart by marker as well as colour


def heads_sweep_figure(runs, *, chance=None) -> Figure:
    """Figure: answer accuracy by number of heads, one point per seed, and during training
    (lesson 03). runs: dicts with "heads", "seed", "accuracy" and "accuracy_by_step"
    ([step, accuracy] pairs), e.g. the "runs" of data/checkpoints/places-sweep.json."""
    counts = sorted({run["heads"] for run in runs})
    if not counts or len(counts) > len(HEAD_MARKERS):
        raise ValueError(f"runs: expected 1 to {len(HEAD_MARKERS)} head counts, got {counts}")
    fig, (ax_end, ax_steps) = new_figure(10.0, 3.6, ncols=2, width_ratios=(1, 1.5))
    for i, H in enumerate(counts):
        mine = [run for run in runs if run["heads"] == H]
        colour, marker = PALETTE[i], HEAD_MARKERS[i]
        ends = np.array([run["accuracy"] for run in mine])
        spread = np.linspace(-0.15, 0.15, len(ends))  # side by side, so equal results show
        ax_end.scatter(i + spread, ends, s=36, marker=marker, facecolors="none",
                       edgecolors=colour, linewidths=1.3)  # fmt: skip
        ax_end.plot([i - 0.25, i + 0.25], [ends.mean()] * 2, color="black", lw=2)
        curves = np.array([[acc for _, acc in run["accuracy_by_step"]] for run in mine])
        steps = [step for step, _ in mine[0]["accuracy_by_step"]]
        for curve in curves:
            ax_steps.plot(steps, curve, color=colour, lw=0.8, alpha=0.45)
        ax_steps.plot(steps, curves.mean(axis=0), color=colour, marker=marker, lw=2,
                      label=f"H = {H}: mean of {len(curves)} seeds")  # fmt: skip
    ax_end.plot([], [], color="black", lw=2, label="mean over seeds")
    ax_end.set_xticks(range(len(counts)), [str(H) for H in counts])
    ax_end.set_xlabel("heads H (same width D, same parameters)")
    ax_end.set_ylabel("accuracy of the answers")
    ax_end.set_title("after training: one point per seed", fontsize=10)
    ax_steps.set_xlabel("training step")
    ax_steps.set_title("during training: thin lines are single seeds", fontsize=10)
    for ax in (ax_end, ax_steps):
        ax.set_ylim(-0.03, 1.03)
        if chance is not None:
            ax.axhline(chance, color="grey", ls=":", lw=1.2, label=f"chance ({chance:.2f})")
        ax.grid(alpha=0.3)
    ax_end.legend(fontsize=8, loc="center left")
    # beside the panel, not on it: every corner of it holds a curve
    ax_steps.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    return fig


SQUEEZE_ABOVE = 0.25  # ablation_heatmap: colours linear below this rise, logarithmic above


def ablation_heatmap(labels, table, skills, *, limit: float = 1.0, title=None) -> Figure:
    """Figure: loss increase per skill (columns) when each head (rows) is knocked out
    (lessons 03, 06).

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
