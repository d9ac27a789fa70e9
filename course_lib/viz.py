"""Pictures: tensors in, matplotlib Figures out. Nothing here changes a tensor.

Figures are made with matplotlib.figure.Figure, not pyplot, so they are never shown twice
and never pile up in pyplot's list of open figures; a notebook shows one by ending a cell
with it.
"""

import io

import seaborn as sns
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyBboxPatch
from matplotlib.ticker import LogLocator, NullLocator
from PIL import Image

DPI = 80  # small PNGs keep explorers fast; still sharp at notebook width


def new_figure(width: float = 6.4, height: float = 4.0, ncols: int = 1, nrows: int = 1, **kw):
    """A constrained-layout Figure and its axes (lesson 00)."""
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    kw.setdefault("squeeze", True)
    axes = fig.subplots(nrows, ncols, **kw)
    return fig, axes


def to_png(fig: Figure) -> bytes:
    """Render a Figure to PNG bytes, as the notebook's inline display would (lesson 00)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def canvas_png(canvas) -> bytes:
    """PNG bytes of what an Agg canvas holds now, at fast compression (explorers, lesson 00)."""
    width, height = canvas.get_width_height()
    picture = Image.frombuffer("RGBA", (width, height), canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
    buffer = io.BytesIO()
    picture.save(buffer, format="png", compress_level=1)
    return buffer.getvalue()


def _as_array(weights):
    if isinstance(weights, torch.Tensor):
        weights = weights.detach().cpu().numpy()
    if weights.ndim != 2:
        raise ValueError(f"weights: expected a 2-D (T_q, T_k) matrix, got shape {weights.shape}")
    return weights


def draw_attention(ax, weights, query_labels=None, key_labels=None, *, annot=False, cbar=True):
    """Draw a (T_q, T_k) weight matrix as a labelled seaborn heatmap on ax (lesson 01)."""
    data = _as_array(weights)
    sns.heatmap(
        data,
        ax=ax,
        vmin=0.0,
        vmax=1.0,
        cmap="viridis",
        square=True,
        annot=annot,
        fmt=".2f",
        annot_kws={"fontsize": 8},
        cbar=cbar,
        cbar_kws={"shrink": 0.8, "label": "attention weight"},
        xticklabels=key_labels if key_labels is not None else "auto",
        yticklabels=query_labels if query_labels is not None else "auto",
    )
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    ax.tick_params(axis="x", labelrotation=90)
    ax.tick_params(axis="y", labelrotation=0)
    return ax


def attention_heatmap(weights, query_labels=None, key_labels=None, *, title=None, annot=None):
    """Figure of one attention weight matrix, rows = queries, columns = keys (lesson 01)."""
    data = _as_array(weights)
    size = max(3.5, 0.45 * data.shape[1] + 2.0)
    fig, ax = new_figure(size, max(3.0, 0.45 * data.shape[0] + 1.2))
    if annot is None:
        annot = max(data.shape) <= 8
    draw_attention(ax, data, query_labels, key_labels, annot=annot)
    if title:
        ax.set_title(title)
    return fig


# ---------------------------------------------------------------- lesson 01


def _numbers(name, values):
    if isinstance(values, torch.Tensor):
        values = values.detach().cpu().tolist()
    values = list(values)
    if not values:
        raise ValueError(f"{name}: expected a non-empty sequence of numbers, got {values!r}")
    return values


def draw_weight_bars(ax, weights_row, key_labels, color="tab:blue"):
    """Bars of one query's attention weights over the keys, on a fixed 0..1 axis (lesson 01)."""
    heights = _numbers("weights_row", weights_row)
    if len(heights) != len(key_labels):
        raise ValueError(
            f"key_labels: expected one label per weight ({len(heights)}), got {len(key_labels)}"
        )
    bars = ax.bar(range(len(heights)), heights, color=color)
    ax.set_xticks(range(len(heights)), key_labels, rotation=90)
    ax.set_ylim(0, 1)
    ax.set_ylabel("attention weight")
    ax.set_xlabel("key (attended to)")
    return bars


def influence_figure(rnn_influence, attention_influence):
    """Log-scale plot: how much the last output depends on an input d steps back (lesson 01)."""
    rnn = _numbers("rnn_influence", rnn_influence)
    attn = _numbers("attention_influence", attention_influence)
    if len(rnn) != len(attn):
        raise ValueError(f"attention_influence: expected {len(rnn)} values, got {len(attn)}")
    back = list(range(len(rnn) - 1, -1, -1))  # input t sits T-1-t steps before the last
    fig, ax = new_figure(6.4, 3.6)
    ax.semilogy(back, rnn, "o-", ms=3, label="recurrent network (RNN)")
    ax.semilogy(back, attn, "s-", ms=3, label="one attention layer")
    ax.set_xlabel("how many steps back the input sits")
    ax.set_ylabel("influence on the last output\n(gradient norm)")
    ax.legend()
    ax.grid(True, which="major", alpha=0.3)
    return fig


# ---------------------------------------------------------------- lesson 02


def curve_panels(x, panels, *, xlabel, logx=True, width=None, height=3.4):
    """Side-by-side line plots sharing one x (lesson 02).

    panels: list of dicts with "title", "ylabel", "lines" ({label: y values}) and
    optionally "logy" (bool), "ylim" ((low, high)) and "dashed" ({label: y values},
    drawn as grey dashed reference lines).
    """
    xs = _numbers("x", x)
    if not panels:
        raise ValueError("panels: expected at least one panel, got none")
    fig, axes = new_figure(width or 4.2 * len(panels), height, ncols=len(panels))
    axes = [axes] if len(panels) == 1 else list(axes)
    for ax, panel in zip(axes, panels, strict=True):
        for label, ys in panel["lines"].items():
            ys = _numbers(label, ys)
            if len(ys) != len(xs):
                raise ValueError(f"{label}: expected {len(xs)} values to match x, got {len(ys)}")
            ax.plot(xs, ys, "o-" if len(xs) <= 16 else "-", ms=4, label=label)
        for label, ys in panel.get("dashed", {}).items():
            ax.plot(xs, _numbers(label, ys), "--", color="grey", label=label)
        if logx:
            ax.set_xscale("log", base=2)
        if panel.get("logy"):
            ax.set_yscale("log")
        if "ylim" in panel:
            ax.set_ylim(*panel["ylim"])
        ax.set_title(panel["title"])
        ax.set_ylabel(panel["ylabel"])
        ax.set_xlabel(xlabel)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=9)
    return fig


# ---------------------------------------------------------------- lesson 05

GRAD_LIMITS = (1e-10, 1e5)  # fixed log axes: explorers never rescale, far values pin to an edge
SCALE_LIMITS = (1e-2, 1e3)


def _box(ax, x, y, text, color, width=1.25, height=0.9):
    ax.add_patch(
        FancyBboxPatch(
            (x - width / 2, y - height / 2),
            width,
            height,
            boxstyle="round,pad=0.04",
            facecolor=color,
            edgecolor="black",
            linewidth=1.2,
        )
    )
    ax.text(x, y, text, ha="center", va="center", fontsize=10)


def _arrow(ax, start, end, **kw):
    ax.annotate("", xy=end, xytext=start, arrowprops={"arrowstyle": "-|>", "lw": 1.4, **kw})


def draw_block_diagram(ax, *, prenorm: bool = True, residual: bool = True):
    """Boxes and arrows of one block, input on the left, output on the right (lesson 05)."""
    norm, attn, ff, add = "#f6d55c", "#9ecae1", "#a1d99b", "white"
    if prenorm:
        parts = [
            ("x", None),
            ("LayerNorm", norm),
            ("multi-head\nattention", attn),
            ("+", add),
            ("LayerNorm", norm),
            ("feed-forward\nLinear, GELU,\nLinear", ff),
            ("+", add),
            ("out", None),
        ]
        skips = [(0, 3), (3, 6)]  # the residual path jumps from input to its "+"
    else:
        parts = [
            ("x", None),
            ("multi-head\nattention", attn),
            ("+", add),
            ("LayerNorm", norm),
            ("feed-forward\nLinear, GELU,\nLinear", ff),
            ("+", add),
            ("LayerNorm", norm),
            ("out", None),
        ]
        skips = [(0, 2), (3, 5)]
    xs = [1.6 * i for i in range(len(parts))]
    for x, (text, color) in zip(xs, parts, strict=True):
        if color is None:
            ax.text(x, 0, text, ha="center", va="center", fontsize=12, fontweight="bold")
        elif text == "+":
            ax.add_patch(Circle((x, 0), 0.28, facecolor="white", edgecolor="black", lw=1.2))
            ax.text(x, 0, "+", ha="center", va="center", fontsize=14)
        else:
            _box(ax, x, 0, text, color)
    half = [0.25 if c is None else 0.3 if t == "+" else 0.68 for t, c in parts]  # x extents
    for i in range(len(parts) - 1):
        _arrow(ax, (xs[i] + half[i], 0), (xs[i + 1] - half[i + 1], 0))
    if residual:
        for start, end in skips:
            _arrow(
                ax,
                (xs[start] + 0.1, 0.3),
                (xs[end], 0.3),
                color="tab:red",
                connectionstyle="bar,fraction=-0.12",
            )
        ax.text(xs[0] + 0.2, 1.35, "residual path (x + ...)", color="tab:red", fontsize=10)
    ax.set_xlim(xs[0] - 0.6, xs[-1] + 0.6)
    ax.set_ylim(-0.9, 1.7)
    ax.set_aspect("equal")
    ax.axis("off")
    return ax


def block_diagram(*, prenorm: bool = True, residual: bool = True, title=None):
    """Figure of one transformer block as boxes and arrows (lesson 05)."""
    fig, ax = new_figure(10.5, 2.6)
    draw_block_diagram(ax, prenorm=prenorm, residual=residual)
    ax.set_title(title or ("pre-norm block" if prenorm else "post-norm block (the 2017 original)"))
    return fig


def pin_to_limits(values, limits):
    """Clip values into limits for a fixed log axis, and say which were pinned (lesson 05).

    Returns (clipped, below, above): below marks values under the floor (a gradient that
    underflowed to 0 among them), above those over the ceiling.
    """
    low, high = limits
    values = _numbers("values", values)
    clipped = [min(max(v, low), high) for v in values]
    return clipped, [v < low for v in values], [v > high for v in values]


def pinned_points(layers, ys, mask):
    """The (layers, ys) where mask is True: where to draw the pinned triangles (lesson 05)."""
    picked = [(x, y) for x, y, m in zip(layers, ys, mask, strict=True) if m]
    return ([x for x, _ in picked], [y for _, y in picked])


def setup_depth_axes(ax_grad, ax_scale, max_depth: int):
    """Fixed log axes for per-layer gradient norms and activation scales (lesson 05)."""
    for ax, limits in ((ax_grad, GRAD_LIMITS), (ax_scale, SCALE_LIMITS)):
        ax.set_yscale("log")
        ax.set_ylim(*limits)
        # few ticks, no minor ones: a log axis over 15 decades otherwise lays out hundreds
        # of tick labels, and the first draw takes a second
        ax.yaxis.set_major_locator(LogLocator(base=10, numticks=6))
        ax.yaxis.set_minor_locator(NullLocator())
        ax.set_xlim(0.5, max_depth + 0.5)
        ax.set_xlabel("layer (1 = nearest the input)")
        ax.grid(True, which="major", alpha=0.3)
    ax_grad.set_ylabel("gradient norm reaching the layer")
    ax_scale.set_ylabel("RMS of the layer's output")
    ax_grad.set_title("backward: gradient reaching each layer")
    ax_scale.set_title("forward: activation scale after each layer")


def depth_profile_figure(curves: dict):
    """Per-layer gradient norms and activation scales of several stacks, side by side (lesson 05).

    curves: {label: (grad_norms, act_scales)}, each a 1-D tensor or list over layers.
    Values beyond the fixed axes are pinned to the edge and drawn as triangles.
    """
    if not curves:
        raise ValueError("curves: expected at least one (grad_norms, act_scales) pair, got none")
    depth = max(len(_numbers(label, pair[0])) for label, pair in curves.items())
    fig, (ax_grad, ax_scale) = new_figure(11.0, 3.8, ncols=2)
    setup_depth_axes(ax_grad, ax_scale, depth)
    for label, (grads, scales) in curves.items():
        for ax, values, limits in ((ax_grad, grads, GRAD_LIMITS), (ax_scale, scales, SCALE_LIMITS)):
            ys, below, above = pin_to_limits(values, limits)
            layers = list(range(1, len(ys) + 1))
            (line,) = ax.plot(layers, ys, "o-", ms=3, label=label)
            ax.plot(*pinned_points(layers, ys, below), "v", ms=7, color=line.get_color())
            ax.plot(*pinned_points(layers, ys, above), "^", ms=7, color=line.get_color())
    ax_grad.legend(fontsize=9, loc="lower right")
    return fig


# ---------------------------------------------------------------- lesson 06


def plot_history(history, *, smooth: int = 25):
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
    ax_loss.plot(steps, loss, color="tab:blue", alpha=0.25, lw=0.8)
    ax_loss.plot(
        steps[window - 1 :], running, color="tab:blue", label=f"training (mean of {window})"
    )
    ax_loss.plot(
        history.val_step, history.val_loss, "o-", color="tab:orange", ms=4, label="validation"
    )
    ax_loss.set_xlabel("step")
    ax_loss.set_ylabel("cross-entropy loss (nats)")
    ax_loss.set_title("loss")
    ax_loss.legend(fontsize=9)
    ax_loss.grid(True, alpha=0.3)
    norms = torch.tensor(history.grad_norm)  # (steps, blocks)
    for block in range(norms.shape[1]):
        ax_grad.plot(steps, norms[:, block], lw=0.8, label=f"block {block}")
    ax_grad.set_yscale("log")
    ax_grad.set_xlabel("step")
    ax_grad.set_ylabel("gradient norm (before clipping)")
    ax_grad.set_title("gradient norm of each block")
    ax_grad.legend(fontsize=9)
    ax_grad.grid(True, alpha=0.3)
    return fig
