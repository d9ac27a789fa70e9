"""Lesson 15a's claims, each measured: the reach through the layers, the rolling cache's size,
the check's arithmetic; the prediction starts empty and is judged."""

from pathlib import Path

import pytest
import torch

from course_lib.exercises.lesson13a_what_generation_recomputes.rope_from import rope_from_reference
from course_lib.exercises.lesson15a_sliding_window import attend_rolling_reference, rolled
from course_lib.sliding_window import receptive_field, window_mask
from course_lib.variants import load_trained
from helpers import lesson_cells

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "15a_sliding_window.ipynb"


@pytest.fixture(scope="module")
def cells():
    return lesson_cells(NOTEBOOK)


def _outputs(cells) -> str:
    return "\n".join(o.get("text", "") for c in cells if c.cell_type == "code" for o in c.outputs)


@pytest.mark.parametrize("layers,back", [(1, 7), (2, 14), (3, 21), (4, 28)])
def test_query_47_reaches_l_times_w_minus_1_back(layers, back):
    reach = receptive_field(window_mask(48, 8), 4)
    assert 47 - int(reach[layers - 1, 47].nonzero().min()) == back == layers * (8 - 1)


def test_the_prediction_starts_empty_and_is_judged(cells):
    source = "\n".join(c.source for c in cells if c.cell_type == "code")
    assert "predicted_back_2 = None" in source and "predicted_back_4 = None" in source
    printed = _outputs(cells)
    assert "after 2 layers (back to 33): 14 positions" in printed
    assert "after 4 layers (back to 19): 28 positions" in printed


def test_the_rolling_cache_stops_at_the_window_and_matches_the_mask():
    model = load_trained("base", 0)
    attn = model.blocks[0].attn
    from course_lib import corpus

    line = corpus.load_split("long")[:1]
    with torch.no_grad():
        x = model.blocks[0].norm1(model.embed(line))
        y, k, _ = rolled(attend_rolling_reference, x, attn.qkv, attn.out, attn.num_heads, 32,
                         rope=rope_from_reference)  # fmt: skip
        whole = attn(x, window_mask(128, 32))
    assert (y - whole).abs().max() < 1e-4
    assert k.shape[-2] == 32 and 2 * k.nbytes == 16_384


def test_the_checks_arithmetic():
    assert 32 * 4095 == 131_040 > 19_999
    assert 4 * 4095 == 16_380 and 19_999 - 16_380 - 1 == 3_618
