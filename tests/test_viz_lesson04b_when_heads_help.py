"""course_lib.viz.lesson04b_when_heads_help: what no lesson test covers on its own."""

import pytest
import torch

from course_lib import viz


def test_noun_weights_figure_draws_every_head_with_its_number_on_one_scale():
    tables = {"1 head, d = 4": torch.tensor([[0.07, 0.11, 0.21]]), "2 heads, d = 2": torch.tensor(
        [[0.08, 0.18, 0.54], [0.05, 0.06, 0.0]]
    )}  # fmt: skip
    fig = viz.noun_weights_figure(tables, title="t")
    panels = [ax for ax in fig.axes if ax.get_images()]
    assert [ax.get_title() for ax in panels] == ["1 head\nd = 4", "2 heads\nd = 2"]
    heights = {round(ax.get_position().height, 6) for ax in panels}
    assert len(heights) == 1  # every panel as tall as the others
    for i, (ax, table) in enumerate(zip(panels, tables.values(), strict=True)):
        (image,) = ax.get_images()
        assert image.norm.vmin == 0.0 and image.norm.vmax == 1.0  # no weight is clipped
        # a row per noun, oldest first, then their sum: the total the lesson quotes is drawn
        shown = torch.cat([table.T, table.sum(dim=1)[None]])
        assert [t.get_text() for t in ax.texts] == [f"{w:.2f}" for w in shown.flatten().tolist()]
        assert [t.get_text() for t in ax.get_xticklabels()] == [str(h) for h in range(len(table))]
        names = [t.get_text() for t in ax.get_yticklabels()]
        assert names == (list(viz.NOUN_ROWS) if i == 0 else [""] * 4)
        # every label is at least 9 pt
        assert min(t.get_fontsize() for t in [*ax.texts, *ax.get_xticklabels()]) >= 9


def test_noun_weights_figure_names_a_wrong_table():
    with pytest.raises(ValueError, match=r"expected \(H, 3\) weights"):
        viz.noun_weights_figure({"1 head": torch.zeros(1, 4)})
    with pytest.raises(ValueError, match="at least one"):
        viz.noun_weights_figure({})
