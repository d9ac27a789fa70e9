"""course_lib.show: what a lesson prints about a number is its bound, and a broken bound shows."""

import math

import pytest
import torch

from course_lib.show import bounded, judge_prediction


@pytest.mark.parametrize(
    "value,bounds,expected",
    [
        (6e-8, {"below": 1e-6}, "below 1e-6"),
        (0.0, {"below": 1e-6}, "below 1e-6"),
        (0.9, {"above": 0.5}, "above 0.5"),
        (0.8, {"above": 2 / 3, "below": 13 / 12}, "between 0.667 and 1.08"),
        (2e5, {"above": 1e4}, "above 1e4"),
    ],
)
def test_a_value_inside_its_bounds_prints_the_bounds(value, bounds, expected):
    assert bounded(value, **bounds) == expected
    # and so the same words for any rounding of it that stays inside
    assert bounded(value * (1 + 1e-6), **bounds) == expected


@pytest.mark.parametrize(
    "value,bounds,expected",
    [
        (3.2e-5, {"below": 1e-6}, "3.2e-05 (expected below 1e-6)"),
        (1e-6, {"below": 1e-6}, "1e-06 (expected below 1e-6)"),  # the bound itself is outside
        (0.4, {"above": 0.5}, "0.4 (expected above 0.5)"),
        (1.2, {"above": 2 / 3, "below": 13 / 12}, "1.2 (expected above 0.667 and below 1.08)"),
        (math.nan, {"below": 1.0}, "nan (expected below 1)"),
    ],
)
def test_a_value_outside_shows_itself_and_the_broken_bound(value, bounds, expected):
    assert bounded(value, **bounds) == expected


def test_torch_scalars_even_with_a_gradient_are_read_quietly(recwarn):
    x = torch.tensor(2.0, requires_grad=True)
    assert bounded((x * 1e-8).abs(), below=1e-6) == "below 1e-6"
    assert not recwarn.list


def test_a_bound_is_required():
    with pytest.raises(TypeError, match="at least one of below=, above="):
        bounded(1.0)


def test_judge_prediction_says_how_far_off_or_asks_for_one():
    assert judge_prediction(0.5, 0.97, what="w") == (
        "Measured w: 0.97; you predicted 0.50, 0.47 under the measurement."
    )
    assert "0 over the measurement" not in judge_prediction(6, 4, what="n", digits=0)
    assert judge_prediction(6, 4, what="n", digits=0).endswith(
        "you predicted 6, 2 over the measurement."
    )
    assert "You wrote no prediction" in judge_prediction(None, 4, what="n")
    with pytest.raises(TypeError, match="predicted: expected a number or None, got str"):
        judge_prediction("0.5", 0.97, what="w")


def test_judge_choice_says_right_or_what_it_was():
    from course_lib.show import judge_choice

    assert "You wrote no prediction" in judge_choice(None, "no positions", what="nearest")
    assert judge_choice(" No Positions", "no positions", what="nearest").endswith(": right.")
    assert "which it was not" in judge_choice("RoPE", "no positions", what="nearest")
    with pytest.raises(TypeError, match="a string or None"):
        judge_choice(3, "no positions", what="nearest")


def test_judge_choice_says_when_a_prediction_is_none_of_the_choices():
    from course_lib.show import judge_choice

    four = ("RoPE", "sinusoidal added", "learned positions", "no positions")
    line = judge_choice("no position", "no positions", what="nearest", options=four)
    assert "none of the choices" in line and '"learned positions"' in line
    assert "which it was not" not in line and ": right." not in line
    assert judge_choice(" No Positions", "no positions", what="n", options=four).endswith("right.")
    assert "which it was not" in judge_choice("RoPE", "no positions", what="n", options=four)
