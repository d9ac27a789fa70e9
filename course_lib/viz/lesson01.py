"""Lesson 01's figures: an attention matrix, one query's weights, and how far back an
RNN and one attention layer reach."""

from matplotlib.figure import Figure

from course_lib.viz.style import _as_array, _numbers, draw_attention, new_figure


def attention_heatmap(
    weights, query_labels=None, key_labels=None, *, title=None, annot=None
) -> Figure:
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


def influence_figure(rnn_influence, attention_influence) -> Figure:
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
