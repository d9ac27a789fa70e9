"""Lesson 16b's explorer: it follows its controls, uses the learner's functions, and falls back."""

import torch

from course_lib.widgets import RopeScalingExplorer


def test_the_explorer_follows_method_and_factor():
    e = RopeScalingExplorer()
    e.controls["method"].value = "position interpolation"
    e.controls["factor"].value = 2.0
    state = e.state()
    assert "position interpolation, s = 2" in state["readout"]
    assert state["summary"]["inside"] > 0.5
    e.controls["method"].value = "NTK-aware"
    assert e.state()["summary"]["inside"] < 0.1


def test_the_explorer_uses_the_learners_angles_and_falls_back_on_a_stub():
    def mine(positions, d, factor, base=10000.0):
        theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        return (positions.double() / factor)[:, None] * theta

    def stub(d, factor, base=10000.0):
        raise NotImplementedError("Exercise ntk_frequencies: write your code here")

    e = RopeScalingExplorer(pi_angles=mine, ntk_frequencies=stub)
    assert "the course's angles" in e.state()["source"]
    e.controls["method"].value = "position interpolation"
    assert e.state()["source"] == "your pi_angles"


def test_the_readout_names_the_pairs_past_their_trained_angle():
    e = RopeScalingExplorer()
    assert list(e.state()["past"]) == ["2", "3", "4", "5", "6", "7"]  # NTK-aware, s = 4
    assert "2 (2.83x)" in e.state()["readout"]
    e.controls["method"].value = "position interpolation"
    e.controls["factor"].value = 8.0
    assert e.state()["past"] == {} and "distance 126: none" in e.state()["readout"]


def test_the_legend_names_the_factor_and_the_left_panel_its_pairs():
    e = RopeScalingExplorer()
    assert e.legend.get_texts()[1].get_text() == "NTK-aware, s = 4"
    e.controls["method"].value = "YaRN"
    e.controls["factor"].value = 2.0
    assert e.legend.get_texts()[1].get_text() == "YaRN, s = 2"
    assert "pair 0 on top" in e.fig.axes[0].get_title()
