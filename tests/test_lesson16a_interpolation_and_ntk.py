"""Lesson 16a's claims: the shipped models past their trained length, the pairs that meet new
angles, and seed 0 with interpolated angles and NTK-aware frequencies (the stored grid of
data/rope_scaling.json, and its agreement with a fresh measurement of seed 0)."""

from pathlib import Path

import nbformat
import pytest
import torch

from course_lib import rope_scaling as rs
from course_lib import variants

GRID = rs.load_grid()


def _parts(method, factor):
    return [rs.summary(rs.grid_excess(GRID, s, method, factor)) for s in rs.SEEDS]


@pytest.mark.slow
def test_the_grid_is_what_the_shipped_model_measures():
    model = variants.load_trained("base", 0)
    for method, factor in (("none", 1), ("pi", 4.0), ("ntk", 4.0), ("yarn", 2.0)):
        live = rs.excess_by_position(rs.scaled_model(model, method, factor))
        assert (live - rs.grid_excess(GRID, 0, method, factor)).abs().max() < 1e-3


def test_unscaled_models_are_near_the_floor_inside_and_worse_past_it():
    for said in _parts("none", 1):
        assert said["inside"] < 0.05 and said["beyond 2L"] > 1.0
    beyond = sorted(round(p["beyond 2L"], 2) for p in _parts("none", 1))
    assert beyond[0] == 1.16 and beyond[-1] == 3.05


def test_the_mean_as_trained_passes_a_tenth_at_37_and_one_nat_at_52():
    mean = torch.stack([rs.grid_excess(GRID, s, "none", 1) for s in rs.SEEDS]).mean(0)
    assert int((mean > 0.1).nonzero()[0]) == 37 and int((mean > 1.0).nonzero()[0]) == 52


def test_pair_3_goes_past_its_trained_angle_and_ntk_leaves_it_past():
    theta = rs.frequencies(16)
    assert round(float(126 * theta[3]), 2) == 3.98 and round(float(30 * theta[3]), 2) == 0.95
    ntk = rs.scaled_frequencies("ntk", 4.0, 16)
    assert round(float(theta[3] / ntk[3]), 2) == 1.81 and round(float(126 * ntk[3]), 2) == 2.20
    assert round(float(theta[1] / ntk[1]), 2) == 1.22


def test_ntk_leaves_the_fastest_pair_and_divides_the_slowest_by_s():
    freqs = rs.scaled_frequencies("ntk", 4.0, 16)
    theta = rs.frequencies(16)
    assert freqs[0] == theta[0] and torch.isclose(freqs[-1], theta[-1] / 4)


def test_seed_0_interpolated_costs_about_what_it_lost_past_2l_and_gets_worse_past_l():
    pi, none = _parts("pi", 4.0)[0], _parts("none", 1)[0]
    assert round(pi["inside"], 2) == 1.78 and round(none["beyond 2L"], 2) == 1.84
    assert pi["to 2L"] > none["to 2L"] and pi["beyond 2L"] > none["beyond 2L"]


def test_seed_0_with_ntk_is_near_the_floor_to_2l_and_high_past_it():
    ntk, none = _parts("ntk", 4.0)[0], _parts("none", 1)[0]
    assert round(ntk["inside"], 2) == 0.05 and round(ntk["to 2L"], 2) == 0.07
    assert round(none["to 2L"], 2) == 0.49 and round(ntk["beyond 2L"], 2) == 1.55


def test_with_angles_leaves_the_model_alone_and_checks_its_table():
    model = variants.load_trained("base", 0)
    before = model.blocks[0].attn.rope.cos.clone()
    rs.with_frequencies(model, rs.scaled_frequencies("pi", 4.0, 16))
    assert torch.equal(model.blocks[0].attn.rope.cos, before)
    with pytest.raises(ValueError, match="angles"):
        rs.with_angles(model, torch.zeros(10, 8))
    with pytest.raises(ValueError, match="factor"):
        rs.scaled_frequencies("pi", 0.5, 16)
    with pytest.raises(ValueError, match="method"):
        rs.scaled_frequencies("linear", 2.0, 16)


NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "16a_interpolation_and_ntk.ipynb"


def test_the_prediction_is_measured_in_the_next_cell_on_the_interpolated_model():
    """The predict-then-measure cell: a choice ("same", "little", "much") for the interpolated
    model's excess inside the trained length, measured live on seed 0 with the learner's angles:
    1.78 nats, "much"; nothing above it measures an interpolated model."""
    cells = nbformat.read(NOTEBOOK, as_version=4).cells
    at = next(i for i, c in enumerate(cells) if c.source.startswith("my_guess = None"))
    measuring = cells[at + 1]
    assert "rs.with_angles(model, angles)" in measuring.source
    printed = "".join(o.get("text", "") for o in measuring.outputs)
    assert "Measured excess inside the trained length (1.78 nats): much." in printed
    assert 'options=("same", "little", "much")' in measuring.source  # judged, odd labels named
    above = [c for c in cells[:at] if c.cell_type == "code"]
    assert not any("with_angles" in c.source for c in above)
    assert "1.78" not in "\n".join(c.source for c in cells[:at])
