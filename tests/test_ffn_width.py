"""course_lib.ffn_width (the earlier language's width sweep, which lesson 05 showed; no lesson
reads it now): the models the sweep trains and how its results are read."""

import pytest
import torch

from course_lib.feedforward import NoFeedForward
from course_lib.ffn_width import build_model, final_losses, mean_curves


def test_build_model_changes_only_the_feed_forward_width():
    wide, narrow, none = build_model(256, 0), build_model(16, 0), build_model(0, 0)
    assert [b.ff[0].out_features for b in narrow.blocks] == [16, 16]
    assert all(isinstance(b.ff, NoFeedForward) for b in none.blocks)
    ids = torch.randint(0, wide.config.vocab_size, (2, 9))
    assert none(ids).shape == wide(ids).shape == (2, 9, wide.config.vocab_size)
    # a block without a feed-forward layer is x + attn(norm1(x)) and nothing more
    block, x = none.blocks[0], torch.randn(1, 5, 64)
    with torch.no_grad():
        torch.testing.assert_close(block(x), x + block.attn(block.norm1(x)))


@pytest.mark.parametrize("bad", [-1, 2.5, True, "64"])
def test_build_model_names_a_bad_width(bad):
    with pytest.raises(ValueError, match=r"d_ff: expected an int >= 0 \(0: no feed-forward"):
        build_model(bad, 0)


def results(steps_b=(100, 200)):
    return {
        "widths": [0, 16],
        "runs": [
            {"d_ff": 16, "seed": 1, "val_step": [100, 200], "val_loss": [2.0, 1.5],
             "final_val_loss": 1.5},
            {"d_ff": 0, "seed": 0, "val_step": [100, 200], "val_loss": [3.0, 2.0],
             "final_val_loss": 2.0},
            {"d_ff": 16, "seed": 0, "val_step": list(steps_b), "val_loss": [1.0, 1.25],
             "final_val_loss": 1.25},
        ],
    }  # fmt: skip


def test_final_losses_and_mean_curves_read_the_runs_by_width_and_seed():
    assert final_losses(results()) == {0: [2.0], 16: [1.25, 1.5]}  # in seed order
    assert mean_curves(results()) == {0: ([100, 200], [3.0, 2.0]), 16: ([100, 200], [1.5, 1.375])}
    with pytest.raises(ValueError, match="results: the runs of d_ff = 16 were scored at"):
        mean_curves(results(steps_b=(100, 300)))
