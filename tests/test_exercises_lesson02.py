"""Lesson 02's exercises: the notebook's solutions pass, learner-style mistakes get their hint."""

import math
from pathlib import Path

import nbformat
import pytest
import torch

from course_lib.checks import check_entropy, check_vanishing_width
from course_lib.exercises.core import run
from course_lib.exercises.lesson02 import ENTROPY, VANISHING_WIDTH
from course_lib.saturation import typical_gradient_norms
from helpers import notebook_functions, stub, verdict

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "02_scaling.ipynb"


def _lesson():
    return nbformat.read(NOTEBOOK, as_version=4)


def _markdown() -> str:
    return "\n".join(c.source for c in _lesson().cells if c.cell_type == "markdown")


# ---------------------------------------------------------------- both exercises


@pytest.mark.parametrize(
    "name, exercise", [("entropy", ENTROPY), ("vanishing_width", VANISHING_WIDTH)]
)
def test_the_lessons_solution_passes(name, exercise):
    assert run(exercise, notebook_functions(name)[name]).passed


@pytest.mark.parametrize("check", [check_entropy, check_vanishing_width])
def test_a_stub_is_not_implemented_yet(check, capsys):
    out = verdict(check, stub, capsys)
    assert out.startswith("TRY AGAIN") and "not implemented yet" in out


def test_each_last_hint_points_to_a_cell_the_lesson_has():
    text = _markdown()
    for heading in (
        "Big scores saturate the softmax",
        "A saturated softmax passes almost no gradient",
    ):
        assert f"## {heading}" in text
    assert "'Big scores saturate the softmax'" in ENTROPY.idea
    assert "'A saturated softmax passes almost no gradient'" in VANISHING_WIDTH.idea


def test_no_cell_above_an_exercise_hands_the_learner_the_course_answer():
    """The course functions each exercise is checked against are imported only below it (a
    learner who called them would pass and learn nothing), and hint() is there from the start."""
    cells = _lesson().cells
    exercise_at = {
        c.metadata.get("nbgrader", {}).get("grade_id"): i
        for i, c in enumerate(cells)
        if c.metadata.get("nbgrader", {}).get("solution")
    }
    for name, course in (
        ("entropy", "softmax_entropy"),
        ("vanishing_width", "vanishing_gradient_width"),
    ):
        above = [c.source for c in cells[: exercise_at[name]] if c.cell_type == "code"]
        assert not any(course in source for source in above), (name, course)
        assert any(
            course in c.source for c in cells[exercise_at[name] + 1 :] if c.cell_type == "code"
        )
    imports = next(c.source for c in cells if c.cell_type == "code")
    assert "check_vanishing_width, hint" in imports


# ---------------------------------------------------------------- entropy, as learners write it


def test_entropy_worked_example_is_what_the_lesson_says():
    got = ENTROPY.reference(torch.tensor([[0.5, 0.25, 0.25], [0.0, 0.5, 0.5]]))
    assert f"`tensor([{got[0]:.4f}, {got[1]:.4f}])`" in _markdown()
    assert math.isclose(got[0].item(), 1.5 * math.log(2), rel_tol=1e-6)
    assert math.isclose(got[1].item(), math.log(2), rel_tol=1e-6)


def test_right_entropies_written_other_ways_pass():
    def with_where(weights):
        logs = torch.where(weights > 0, weights.log(), torch.zeros_like(weights))
        return -(weights * logs).sum(dim=-1)

    def with_nan_to_num(weights):
        return -(weights * weights.log()).nan_to_num().sum(-1)

    def with_categorical(weights):
        return torch.distributions.Categorical(probs=weights).entropy()

    for fn in (with_where, with_nan_to_num, with_categorical):
        assert run(ENTROPY, fn).passed, fn.__name__


def test_entropy_mistakes_get_their_hint():
    def plain_log(weights):
        return -(weights * torch.log(weights)).sum(dim=-1)

    def in_bits(weights):
        return -(weights * torch.where(weights > 0, weights.log2(), 0.0)).sum(dim=-1)

    def no_minus(weights):
        return (weights * torch.where(weights > 0, weights.log(), 0.0)).sum(dim=-1)

    def averaged(weights):
        return -(weights * torch.where(weights > 0, weights.log(), 0.0)).mean(dim=-1)

    def rows_are_columns(weights):
        return -(weights * torch.where(weights > 0, weights.log(), 0.0)).sum(0)

    def batch_then_keys(weights):  # written for (rows, keys) and nothing else
        return -(weights * torch.where(weights > 0, weights.log(), 0.0)).sum(dim=1)

    expected = {
        plain_log: ("nan_at_zero", "NaN"),
        in_bits: ("bits", "1.44 times"),
        no_minus: ("sign", "negative"),
        averaged: ("mean", "divided by the number of keys"),
        rows_are_columns: ("first_axis", "shape of one row"),
        batch_then_keys: ("axis_1", "more than one leading dimension"),
    }
    for fn, (bug, words) in expected.items():
        found = run(ENTROPY, fn)
        assert found.bug == bug and words in found.message, (fn.__name__, found)
        assert found.steps[-1].startswith("See the cell 'Big scores saturate the softmax'")


def test_entropy_with_a_leftover_axis_or_a_loop_over_rows_fails_on_shape():
    def keeps_the_axis(weights):
        return -torch.special.xlogy(weights, weights).sum(dim=-1, keepdim=True)

    def one_row_at_a_time(weights):  # right for (rows, keys) only
        return torch.stack([-torch.special.xlogy(row, row).sum() for row in weights])

    found = run(ENTROPY, keeps_the_axis)
    assert found.bug == "keepdim" and "last axis of size 1" in found.message
    found = run(ENTROPY, one_row_at_a_time)
    assert found.bug is None and "expected shape (2, 3), got (2,)" in found.message
    assert "one leading batch dimension" in found.message


def test_entropy_float64_must_stay_float64():
    def float32_always(weights):
        return -torch.special.xlogy(weights, weights).sum(dim=-1).float()

    found = run(ENTROPY, float32_always)
    assert "expected dtype torch.float64, got torch.float32" in found.message
    assert "dtype is part of the result" in found.steps[0]


def test_entropy_that_overwrites_the_zero_weights_is_caught():
    def zeros_to_ones(weights):
        weights[weights == 0] = 1.0  # 1 log 1 = 0, so the numbers come out right
        return -(weights * weights.log()).sum(dim=-1)

    found = run(ENTROPY, zeros_to_ones)
    assert found.bug == "in place" and "changed its argument `weights`" in found.message


# ---------------------------------------------------------------- vanishing_width, as learners do


def test_vanishing_width_worked_example_is_what_the_lesson_says():
    got = VANISHING_WIDTH.reference([1, 4, 16, 64, 256, 1024], threshold=0.5, wrt="scores")
    assert got == 16
    assert 'threshold=0.5, wrt="scores")` returns 16' in _markdown()


def _norm(d_k, scale, wrt, seed):
    scores_norm, q_norm, _, _ = typical_gradient_norms(d_k, scale=scale, seed=seed)
    return q_norm if wrt == "q" else scores_norm


def test_a_right_vanishing_width_written_another_way_passes():
    def with_ratios(widths, threshold=0.01, wrt="q", seed=0):
        ratios = [_norm(d, False, wrt, seed) / _norm(d, True, wrt, seed) for d in widths]
        below = [d for d, r in zip(widths, ratios, strict=True) if r < threshold]
        return below[0] if below else None

    assert run(VANISHING_WIDTH, with_ratios).passed


def learner_width(
    ratio=lambda u, s: u / s,
    below=lambda r, t: r < t,
    answer=lambda i, d: d,
    stop=True,
    fixed_wrt=None,
    fixed_seed=None,
    fixed_threshold=None,
):
    """A learner's loop, with the usual ways to get one thing in it wrong."""

    def vanishing_width(widths, threshold=0.01, wrt="q", seed=0):
        wrt = fixed_wrt or wrt
        seed = seed if fixed_seed is None else fixed_seed
        threshold = threshold if fixed_threshold is None else fixed_threshold
        found = None
        for i, d in enumerate(widths):
            r = ratio(_norm(d, False, wrt, seed), _norm(d, True, wrt, seed))
            if below(r, threshold):
                found = answer(i, d)
                if stop:
                    break
        return found

    return vanishing_width


@pytest.mark.slow  # trains heads: in `make test`, not `make quick`
def test_vanishing_width_mistakes_get_their_hint():
    def swapped_items(widths, threshold=0.01, wrt="q", seed=0):
        which = 0 if wrt == "q" else 1  # the scores' norm comes first, not q's
        for d in widths:
            unscaled = typical_gradient_norms(d, scale=False, seed=seed)[which]
            if unscaled / typical_gradient_norms(d, scale=True, seed=seed)[which] < threshold:
                return d
        return None

    def seed_for_the_unscaled_head_only(widths, threshold=0.01, wrt="q", seed=0):
        for d in widths:
            if _norm(d, False, wrt, seed) / _norm(d, True, wrt, 0) < threshold:
                return d
        return None

    expected = {
        "inverted": learner_width(ratio=lambda u, s: s / u),
        "wrong_way": learner_width(below=lambda r, t: r > t),
        "position": learner_width(answer=lambda i, d: i),
        "fixed_threshold": learner_width(fixed_threshold=0.01),
        "ignores_wrt": learner_width(fixed_wrt="q"),
        "other_gradient": swapped_items,
        "ignores_seed": learner_width(fixed_seed=0),
        "scaled_on_seed_0": seed_for_the_unscaled_head_only,
        "absolute": learner_width(ratio=lambda u, s: u),
        "last_not_first": learner_width(stop=False),
    }
    for bug, fn in expected.items():
        found = run(VANISHING_WIDTH, fn)
        assert found.bug == bug, (bug, found)
        assert found.steps[-1].startswith("See the table of typical gradient norms")


def test_vanishing_width_when_no_width_gets_there_the_answer_is_none():
    def minus_one_if_none(widths, threshold=0.01, wrt="q", seed=0):
        return next(
            (
                d
                for d in widths
                if _norm(d, False, wrt, seed) / _norm(d, True, wrt, seed) < threshold
            ),
            -1,
        )

    def first_of_list(widths, threshold=0.01, wrt="q", seed=0):
        return [
            d for d in widths if _norm(d, False, wrt, seed) / _norm(d, True, wrt, seed) < threshold
        ][0]

    found = run(VANISHING_WIDTH, minus_one_if_none)
    assert "got -1, expected None" in found.message and "the answer is None" in found.message
    found = run(VANISHING_WIDTH, first_of_list)
    assert "raised IndexError" in found.message and "the answer is None" in found.message


def test_vanishing_width_that_takes_a_tensor_from_the_result_gets_the_general_hints():
    def weights_not_norms(widths, threshold=0.01, wrt="q", seed=0):
        for d in widths:
            unscaled = typical_gradient_norms(d, scale=False, seed=seed)[2]
            if (
                unscaled.amax() / typical_gradient_norms(d, scale=True, seed=seed)[2].amax()
                < threshold
            ):
                return d
        return None

    found = run(VANISHING_WIDTH, weights_not_norms)
    assert not found.passed and found.bug is None
    assert any("two numbers (the gradient norms)" in step for step in found.steps)
