"""course_lib.viz.lesson02a_attention: a masked map shows where the mask cuts."""

import pytest
import torch
from matplotlib.patches import Rectangle

from course_lib import viz
from course_lib.viz.lesson02a_attention import BLOCKED_HATCH

TOKENS = ["Cat", "eats", "dogs", "Cats"]


def causal_weights():
    """(4, 4) causal rows; row 3 gives key 2 an allowed weight that prints as 0.00."""
    rows = torch.tensor(
        [[1.0, 0, 0, 0], [0.5, 0.5, 0, 0], [0.4, 0.3, 0.3, 0], [0.5, 0.497, 0.003, 0.0]]
    )
    return rows, torch.ones(4, 4, dtype=torch.bool).tril()


def hatched_cells(ax):
    return {
        (int(p.get_y()), int(p.get_x()))
        for p in ax.patches
        if isinstance(p, Rectangle) and p.get_hatch() == BLOCKED_HATCH
    }


def numbers(ax):
    return {(int(t.get_position()[1]), int(t.get_position()[0])): t.get_text() for t in ax.texts}


def test_blocked_keys_are_hatched_grey_with_no_number_and_the_legend_says_so():
    weights, mask = causal_weights()
    fig = viz.attention_heatmap(weights, TOKENS, TOKENS, annot=True, mask=mask)
    ax = fig.axes[0]
    blocked = {(i, j) for i in range(4) for j in range(4) if j > i}
    assert hatched_cells(ax) == blocked
    assert all(p.get_facecolor()[:3] == pytest.approx((0xD9 / 255,) * 3) for p in ax.patches
               if isinstance(p, Rectangle) and p.get_hatch() == BLOCKED_HATCH)  # fmt: skip
    shown = numbers(ax)
    assert set(shown) == {(i, j) for i in range(4) for j in range(4)} - blocked
    # an allowed key with almost no weight keeps its number and its colour: it is not blocked
    assert shown[(3, 2)] == "0.00" and (3, 2) not in hatched_cells(ax)
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["blocked by the mask (weight 0)"]


def test_without_a_mask_every_cell_keeps_its_number_and_nothing_is_hatched():
    weights, _ = causal_weights()
    ax = viz.attention_heatmap(weights, TOKENS, TOKENS, annot=True).axes[0]
    assert hatched_cells(ax) == set() and len(numbers(ax)) == 16
    assert ax.get_legend() is None


def test_a_mask_of_another_shape_is_refused():
    weights, _ = causal_weights()
    with pytest.raises(ValueError, match="mask: expected the weights' shape"):
        viz.attention_heatmap(weights, TOKENS, TOKENS, mask=torch.ones(4, 3, dtype=torch.bool))
