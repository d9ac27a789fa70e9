"""Lesson 16's claims, from the stored grid of all three shipped seeds (data/rope_scaling.json),
and the grid's agreement with a fresh measurement of seed 0."""

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


def _mean(method, factor, part):
    return sum(p[part] for p in _parts(method, factor)) / len(rs.SEEDS)


def test_the_mean_as_trained_passes_a_tenth_at_37_and_one_nat_at_52():
    mean = torch.stack([rs.grid_excess(GRID, s, "none", 1) for s in rs.SEEDS]).mean(0)
    assert int((mean > 0.1).nonzero()[0]) == 37 and int((mean > 1.0).nonzero()[0]) == 52


def test_pair_3_goes_past_its_trained_angle_and_ntk_leaves_it_past():
    theta = rs.frequencies(16)
    assert round(float(126 * theta[3]), 2) == 3.98 and round(float(30 * theta[3]), 2) == 0.95
    ntk = rs.scaled_frequencies("ntk", 4.0, 16)
    assert round(float(theta[3] / ntk[3]), 2) == 1.81 and round(float(126 * ntk[3]), 2) == 2.20
    assert set(rs.past_trained(rs.angles_of(ntk, 128), 126)) == set(range(2, 8))
    assert rs.past_trained(rs.angles_of(theta / 8, 128), 126) == {}


def test_interpolation_and_the_papers_yarn_cost_085_to_223_inside_at_s_2_and_4():
    inside = [p["inside"] for m in ("pi", "yarn") for s in (2.0, 4.0) for p in _parts(m, s)]
    assert round(min(inside), 2) == 0.85 and round(max(inside), 2) == 2.23


def test_at_s_4_interpolation_is_worse_past_2l_and_yarn_about_unchanged():
    none = _mean("none", 1, "beyond 2L")
    assert _mean("pi", 4.0, "beyond 2L") > none + 0.2
    assert abs(_mean("yarn", 4.0, "beyond 2L") - none) < 0.05
    for m in ("pi", "yarn"):
        assert _mean(m, 4.0, "to 2L") > _mean("none", 1, "to 2L") + 1.0
        assert _mean(m, 2.0, "to 2L") > _mean("none", 1, "to 2L")
        assert 0.1 < none - _mean(m, 2.0, "beyond 2L") < 0.3


def test_ntk_inside_and_beyond_2l_as_the_factor_grows():
    assert max(p["inside"] for s in (2.0, 4.0) for p in _parts("ntk", s)) <= 0.125
    beyond = [_mean("ntk", s, "beyond 2L") for s in (4.0, 6.0, 8.0)]
    inside = [_mean("ntk", s, "inside") for s in (4.0, 6.0, 8.0)]
    assert beyond == sorted(beyond, reverse=True) and inside == sorted(inside)
    assert max(p["to 2L"] for p in _parts("ntk", 4.0)) < min(p["to 2L"] for p in _parts("none", 1))
    assert min(p["beyond 2L"] for p in _parts("ntk", 8.0)) > 0.5  # none reaches the floor


def test_the_tried_settings():
    assert _mean("temperature alone", 4.0, "inside") < 0.02
    for s in (2.0, 4.0):
        for part in ("to 2L", "beyond 2L"):
            assert 0 <= _mean("temperature alone", s, part) - _mean("none", 1, part) < 0.15
    assert round(_mean("yarn, alpha 0.25, beta 1", 4.0, "beyond 2L"), 2) == 1.26
    assert round(_mean("yarn, alpha 0.5, beta 4", 4.0, "beyond 2L"), 2) == 0.99
    assert round(_mean("yarn, alpha 0.5, beta 4", 4.0, "inside"), 2) == 0.66
    moved = rs.yarn_ramp(16, alpha=0.5, beta=4.0)
    assert moved[0] == 1 and moved[1] < 1
    assert rs.yarn_ramp(16, alpha=0.25, beta=1.0)[:2].tolist() == [1.0, 1.0]
