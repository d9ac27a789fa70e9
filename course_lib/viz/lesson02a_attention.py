"""Lesson 02a's figure: an attention matrix, rows the queries and columns the keys."""

from matplotlib.figure import Figure

from course_lib.viz.style import _as_array, draw_attention, new_figure


def attention_heatmap(
    weights, query_labels=None, key_labels=None, *, title=None, annot=None
) -> Figure:
    """Figure of one attention weight matrix, rows = queries, columns = keys (lesson 02a)."""
    data = _as_array(weights)
    size = max(3.5, 0.45 * data.shape[1] + 2.0)
    fig, ax = new_figure(size, max(3.0, 0.45 * data.shape[0] + 1.2))
    if annot is None:
        annot = max(data.shape) <= 8
    draw_attention(ax, data, query_labels, key_labels, annot=annot)
    if title:
        ax.set_title(title)
    return fig
