"""course_lib.viz.lesson02b_attention_in_batches: the padding figure shows the weight on pads."""

import numpy as np
import pytest
import torch

from course_lib import viz

TOKENS = ["Dogs", "eat", "cat", ".ccd"]  # 4 real tokens, padded to T = 6


def weights(on_pads):
    """(4, 6) rows summing to 1: one large weight, small ones, `on_pads` spread on the pads."""
    rows = torch.full((4, 6), (1 - 0.8 - on_pads) / 3)
    rows[:, 0] = 0.8
    rows[:, 4:] = on_pads / 2
    return rows


def test_each_query_says_its_weight_on_the_pads_and_both_panels_name_their_keys():
    fig = viz.padding_figure(weights(0.1), weights(0.0) / weights(0.0).sum(-1, keepdim=True),
                             TOKENS, 6)  # fmt: skip
    maps = [ax for ax in fig.axes if ax.get_images()]
    assert len(maps) == 2
    for ax, total in zip(maps, ("0.10", "0.00"), strict=True):
        assert ax.get_xlabel() == "key (attended to)"
        assert [t.get_text() for t in ax.get_xticklabels()] == TOKENS + ["pad", "pad"]
        right = [c for c in ax.child_axes if c.get_ylabel() == "its weight on pads"]
        assert len(right) == 1
        assert [t.get_text() for t in right[0].get_yticklabels()] == [total] * 4
        assert f"{total} of each query's weight on pads" in ax.get_title()


def test_a_small_pad_weight_stays_visible_beside_one_large_weight():
    fig = viz.padding_figure(weights(0.1), weights(0.1), TOKENS, 6)
    norm = next(ax for ax in fig.axes if ax.get_images()).get_images()[0].norm
    # 0.05 on a pad, 0.8 the largest weight: a quarter of the way up the colours, not 6%
    assert norm(np.array([0.05]))[0] == pytest.approx((0.05 / 0.8) ** 0.5)
    assert norm.vmax == pytest.approx(0.8) and norm.vmin == 0.0
