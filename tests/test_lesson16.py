"""Lesson 16's claims, from the stored grid of all three shipped seeds (data/rope_scaling.json),
and the grid's agreement with a fresh measurement of seed 0."""

import pytest
import torch

from course_lib import rope_scaling as rs
from course_lib import variants

GRID = rs.load_grid()


def _parts(method, factor):
    return [rs.summary(rs.grid_excess(GRID, s, method, factor)) for s in rs.SEEDS]


def test_the_grid_is_what_the_shipped_model_measures():
    model = variants.load_trained("base", 0)
    for method, factor in (("none", 1), ("ntk", 4.0), ("yarn", 2.0)):
        live = rs.excess_by_position(rs.scaled_model(model, method, factor))
        assert (live - rs.grid_excess(GRID, 0, method, factor)).abs().max() < 1e-3


def test_unscaled_models_are_near_the_floor_inside_and_worse_past_it():
    for said in _parts("none", 1):
        assert said["inside"] < 0.05 and said["beyond 2L"] > 1.0


@pytest.mark.parametrize("method", ["pi", "yarn"])
def test_interpolation_and_the_papers_yarn_cost_over_half_a_nat_inside(method):
    for factor in (2.0, 4.0):
        assert min(p["inside"] for p in _parts(method, factor)) > 0.5


def test_ntk_is_cheap_inside_and_helps_to_2l_on_every_seed():
    for ntk, none in zip(_parts("ntk", 4.0), _parts("none", 1), strict=True):
        assert ntk["inside"] < 0.2
        assert ntk["to 2L"] < none["to 2L"] / 2
        assert ntk["beyond 2L"] > 0.5  # most of it left in place


def test_the_papers_yarn_ramp_barely_touches_a_32_token_model():
    gamma = rs.yarn_ramp(16)
    assert gamma[0] == pytest.approx(0.132, abs=1e-3) and gamma[2:].abs().max() == 0


def test_ntk_leaves_the_fastest_pair_and_divides_the_slowest_by_s():
    freqs = rs.scaled_frequencies("ntk", 4.0, 16)
    theta = rs.frequencies(16)
    assert freqs[0] == theta[0] and torch.isclose(freqs[-1], theta[-1] / 4)


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
