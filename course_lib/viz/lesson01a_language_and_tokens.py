"""Lesson 01a_language_and_tokens's figure: the exact next-token distribution at chosen positions
of a line."""

from matplotlib.figure import Figure

from course_lib.viz.style import BLUE, new_figure


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
