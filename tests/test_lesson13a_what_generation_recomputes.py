"""Lesson 13a's claims, each measured: what generate repeats, the per-token counts and
bytes, and the worked example's parts.

The lesson studies the shipped base model, seed 0 (course_lib.variants). Bars were measured on
the three shipped seeds under the native (AVX-512 here), generic and AVX2 kernel paths, with 1
and 2 threads; each comment gives the worst case seen.
"""

import re
from pathlib import Path

import nbformat
import pytest
import torch
from matplotlib.figure import Figure
from torch import nn

from course_lib import corpus, viz
from course_lib.kv_cache import token_costs
from course_lib.variants import SEEDS, load_trained
from helpers import lesson_markdown

NOTEBOOK = (
    Path(__file__).resolve().parent.parent / "notebooks" / "13a_what_generation_recomputes.ipynb"
)


@pytest.fixture(scope="module")
def model():
    return load_trained("base", 0)


@pytest.fixture(scope="module")
def prose() -> str:
    return lesson_markdown(NOTEBOOK)


def _costs(config, T, cached):
    return token_costs(config, T, cached=cached)


# ---------------------------------------------------------------- what generate repeats


@pytest.mark.parametrize("seed", SEEDS)
def test_one_step_later_the_first_positions_logits_are_the_same(seed, measure):
    # every seed, native 0, generic 0, AVX2 0: the rows that are shared come out bit for bit
    model = load_trained("base", seed)
    ids = corpus.load_split("valid")[:1, :21]
    with torch.no_grad():
        gap = (model(ids)[:, :20] - model(ids[:, :20])).abs().max()
    assert measure("logits one step apart", gap) < 1e-5


# ---------------------------------------------------------------- the counts


def test_the_prediction_cells_numbers(model):
    config = model.config
    growth = {
        c: _costs(config, 1024, c)["multiply_adds"] / _costs(config, 128, c)["multiply_adds"]
        for c in (True, False)
    }
    assert f"{growth[False]:.1f}" == "21.3" and f"{growth[True]:.1f}" == "2.7"
    assert 8 < growth[False] < 64 and 1 < growth[True] < 8  # "between the two", "far less than 8"


def test_the_per_layer_formulas_the_prose_gives(model, prose):
    D, L = model.config.d_model, model.config.num_layers
    assert 12 * D * D == 49_152 and "$12D^2 = 49{,}152$" in prose
    assert "$T = 6D = 384$" in prose and 2 * 384 * D == 12 * D * D
    # the cached count is the projections (12 D^2 per layer, the head once) plus 2 T D per layer
    head = D * model.config.vocab_size
    assert head == 6_656 and "$VD = 6{,}656$" in prose
    for T in (1, 100, 384, 4096):
        assert _costs(model.config, T, True)["multiply_adds"] == L * (12 * D * D + 2 * T * D) + head


@pytest.mark.parametrize("T", [1, 16, 64, 128, 256, 1024, 4096])
def test_recomputing_costs_exactly_t_times_the_cached_step(model, T):
    cached, full = (_costs(model.config, T, c)["multiply_adds"] for c in (True, False))
    assert full == T * cached


def test_the_bytes_the_prose_quotes(model, prose):
    weights = 4 * sum(p.numel() for p in model.parameters())
    linears = 4 * sum(
        p.numel() for m in model.modules() if isinstance(m, nn.Linear) for p in m.parameters()
    )
    assert weights == 453_632 and linears == 424_448
    assert (
        "424,448 bytes (the count leaves out the embedding, a lookup, and the layer norms'" in prose
    )
    # the rest: the embedding table (V D) and the layer norms' weights and biases
    V, D, L = model.config.vocab_size, model.config.d_model, model.config.num_layers
    assert weights - linears == 4 * (V * D + (2 * L + 1) * 2 * D)
    at = {T: _costs(model.config, T, True)["bytes"] for T in (16, 256)}
    assert at == {16: 450_720, 256: 696_480}
    assert "450,720 at $T = 16$ and 696,480 at $T = 256$" in prose
    # "most of them the weights of the matrix products": every product reads its weights once
    assert all(linears / b > 0.6 for b in at.values())
    cached, full = (_costs(model.config, 128, c) for c in (True, False))
    assert round(cached["bytes"] / cached["multiply_adds"]) == 4  # "about 4 bytes"
    assert 0.09 < full["bytes"] / full["multiply_adds"] < 0.12  # "a tenth of a byte"


# ---------------------------------------------------------------- the worked example


def test_the_worked_example_names_the_lessons_its_parts_come_from(prose):
    outputs = "".join(
        o.get("text", "")
        for c in nbformat.read(NOTEBOOK, as_version=4).cells
        for o in c.get("outputs", [])
    )
    assert "split_heads       lesson 04a" in outputs and "rope_heads        lesson 07a" in outputs
    assert "from your parts of lessons 02a, 02b, 04a and 07a" in prose


# ---------------------------------------------------------------- the figure


def test_the_figure_draws_what_it_is_given():
    fig = viz.token_costs_figure(
        [16, 64], {"cached": [1, 2], "recomputed": [3, 4]}, {"cached": [5, 6], "recomputed": [7, 8]}
    )
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    assert [line.get_label() for line in fig.axes[0].lines] == ["cached", "recomputed"]


def test_no_wall_time_is_printed():
    """Times go in the figure only: no printed output of the lesson holds a 's' or 'ms' unit."""
    for cell in nbformat.read(NOTEBOOK, as_version=4).cells:
        for output in cell.get("outputs", []):
            text = output.get("text", "")
            assert not re.search(r"\d\s*(ms|s|seconds)\b", text), text
