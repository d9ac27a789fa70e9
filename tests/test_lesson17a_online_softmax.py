"""Lesson 17a's claims: the size of one (T, T) matrix at a real model's size, the online
softmax's worked example, the predicted factor, and the lesson's numbers as its text quotes
them."""

import math
from pathlib import Path

import nbformat
import pytest
import torch

from course_lib.tiled_attention import tile_steps
from helpers import lesson_markdown, printed_by_cell

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "17a_online_softmax.ipynb"


# ---------------------------------------------------------------- the online softmax


def test_the_worked_example_by_hand():
    s, v = [1.0, 2.0, 4.0, 0.0], [10.0, 20.0, 30.0, 40.0]
    m = max(s[:2])  # tile 1
    total, acc = math.exp(1 - m) + math.exp(2 - m), 10 * math.exp(1 - m) + 20 * math.exp(2 - m)
    assert (round(total, 4), round(acc, 3)) == (1.3679, 23.679)
    c = math.exp(m - max(s))  # tile 2 brings 4
    total, acc = c * total + 1 + math.exp(-4), c * acc + 30 + 40 * math.exp(-4)
    assert (round(c, 4), round(total, 4), round(acc, 3), round(acc / total, 3)) == (
        0.1353, 1.2034, 33.937, 28.2,
    )  # fmt: skip
    weights = torch.softmax(torch.tensor(s, dtype=torch.float64), dim=0)
    assert float(weights @ torch.tensor(v, dtype=torch.float64)) == pytest.approx(acc / total)
    text = lesson_markdown(NOTEBOOK)
    for quoted in ("1.3679", "23.679", "0.1353", "1.2034", "33.937", "28.200"):
        assert quoted in text


def test_the_predicted_factor_is_exp_of_the_old_max_minus_the_new():
    g8 = torch.Generator().manual_seed(8)
    q1, k1, v1 = (torch.randn(*shape, generator=g8) for shape in ((1, 4), (8, 4), (8, 3)))
    first, second = tile_steps(q1, k1, v1, tile_size=4)
    assert second.running_max > first.running_max  # the maximum does rise
    factor = math.exp(first.running_max.item() - second.running_max.item())
    assert second.rescale.item() == pytest.approx(factor, rel=1e-6)
    assert second.running_max.item() == pytest.approx(second.scores.max().item())


# ---------------------------------------------------------------- the lesson's own numbers


def test_one_matrix_at_a_real_models_size_is_128_GiB():
    assert 32 * 32768**2 * 4 == 128 * 2**30
    said = next(o for o in printed_by_cell(NOTEBOOK) if "at T = 32768" in o)
    assert said.endswith(": 128 GiB\n") and "128 GiB" in lesson_markdown(NOTEBOOK)


def test_the_prediction_is_judged_and_says_how_far_off():
    code = [c for c in nbformat.read(NOTEBOOK, as_version=4).cells if c.cell_type == "code"]
    cell = next(c for c in code if "judge_prediction(my_factor" in c.source)
    assert "Measured factor c: 0.422." in "".join(o.get("text", "") for o in cell.outputs)
    assert any(c.source.startswith("my_factor = None") for c in code)


def test_the_opening_refers_to_lesson_10_and_does_not_measure_again():
    text = lesson_markdown(NOTEBOOK)
    assert "Lesson 10 measured" in text
    assert "allocations" not in "".join(
        c.source for c in nbformat.read(NOTEBOOK, as_version=4).cells
    )
