"""Lesson 00's checker (softmax) with learner-style mistakes, hint() in steps, and what every
checker does with a stub, a crash or a non-function."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from course_lib.checks import check_softmax, hint
from course_lib.exercises import lesson00
from course_lib.exercises.core import DTYPE_HINT, run
from helpers import failed_with_hint, notebook_functions, stub, verdict

LESSON = Path(__file__).resolve().parent.parent / "notebooks" / "00_start_here.ipynb"


def test_other_right_softmaxes_pass():
    def by_logsumexp(x):
        return (x - x.logsumexp(dim=-1, keepdim=True)).exp()

    def amax(x):
        e = torch.exp(x - torch.amax(x, dim=-1, keepdim=True))
        return e / torch.sum(e, dim=-1, keepdim=True)

    for fn in (by_logsumexp, amax):
        assert run(lesson00.SOFTMAX, fn).passed


def test_the_exercise_text_says_torchs_softmax_passes_nothing_and_it_does():
    """The fresh read passed softmax with torch.softmax, which the lesson names: the check now
    refuses torch's softmax by every route a learner is likely to take."""
    text = "".join(
        "".join(c["source"]) for c in json.loads(LESSON.read_text())["cells"]
        if c["cell_type"] == "markdown"
    )  # fmt: skip
    assert "the check refuses it" in text
    routes = {
        lambda x: torch.softmax(x, dim=-1): "torch.softmax",
        lambda x: x.softmax(-1): "Tensor.softmax",
        lambda x: torch.nn.functional.softmax(x, dim=-1): "torch.nn.functional.softmax",
        lambda x: torch.nn.Softmax(dim=-1)(x): "torch.nn.functional.softmax",
        lambda x: torch.special.softmax(x, -1): "torch.special.softmax",
        lambda x: x.log_softmax(-1).exp(): "Tensor.log_softmax",
        lambda x: torch.log_softmax(x, -1).exp(): "torch.log_softmax",
        lambda x: torch.nn.functional.log_softmax(x, -1).exp(): "torch.nn.functional.log_softmax",
    }
    for fn, name in routes.items():
        result = run(lesson00.SOFTMAX, fn)
        assert not result.passed and result.bug == "forbidden", result.message
        assert f"calls {name}," in result.message, result.message
        assert result.steps[0] == lesson00.SOFTMAX.forbidden_hint


# ---------------------------------------------------------------- as learners get it wrong


def stable_along(dim):
    def softmax(x):
        shifted = x - x.max(dim=dim, keepdim=True).values
        e = shifted.exp()
        return e / e.sum(dim=dim, keepdim=True)

    return softmax


def no_max_subtraction(x):
    e = torch.exp(x)
    return e / e.sum(dim=-1, keepdim=True)


def sums_without_keepdim(x):
    e = torch.exp(x - x.max(dim=-1, keepdim=True).values)
    return e / e.sum(dim=-1)


def maxima_without_keepdim(x):
    e = torch.exp(x - x.max(-1).values)
    return e / e.sum(dim=-1, keepdim=True)


def amax_without_keepdim(x):
    e = torch.exp(x - torch.amax(x, dim=-1))
    return e / torch.sum(e, dim=-1, keepdim=True)


def nothing_kept(x):
    e = torch.exp(x - x.max(-1).values)
    return e / e.sum(-1)


def whole_tensor_max(x):
    e = torch.exp(x - x.max())
    return e / e.sum(dim=-1, keepdim=True)


def forgot_to_divide(x):
    return torch.exp(x - x.max(dim=-1, keepdim=True).values) * 1.0


@pytest.mark.parametrize(
    "fn, bug, words",
    [
        (no_max_subtraction, "overflow", "near 1000 comes out as NaN"),
        (stable_along(0), "first_axis", "columns sum to 1"),
        (stable_along(1), "middle_axis", "on a 3-D x"),
        (sums_without_keepdim, "totals_lost_their_axis", "a different row's total"),
        (maxima_without_keepdim, "maxima_lost_their_axis", "a different row's maximum"),
        (amax_without_keepdim, "maxima_lost_their_axis", "a different row's maximum"),
        (nothing_kept, "maxima_and_totals_lost_their_axis", "a different row's total"),
        (whole_tensor_max, "global_max", "another row holds scores near 1000"),
        (lambda x: x / x.sum(dim=-1, keepdim=True), "no_exp", "some weights are negative"),
    ],
)
def test_learner_mistakes_get_their_own_hint(fn, bug, words):
    result = failed_with_hint(lesson00.SOFTMAX, fn, bug, [words])
    assert result.steps[-1].startswith("See the section")


def test_forgetting_the_division_is_named_with_or_without_the_shift():
    assert run(lesson00.SOFTMAX, forgot_to_divide).bug == "no_division_after_shift"
    assert run(lesson00.SOFTMAX, lambda x: x.exp()).bug == "no_division"


def test_changing_the_input_in_place_is_caught():
    def in_place(x):
        x -= x.max(dim=-1, keepdim=True).values
        x.exp_()
        return x / x.sum(dim=-1, keepdim=True)

    result = run(lesson00.SOFTMAX, in_place)
    assert result.bug == "in place" and "changed its argument `x` in place" in result.message


def test_a_float64_result_from_float32_scores_fails_on_its_dtype():
    def via_numpy(x):
        a = x.numpy()
        e = np.exp(a - a.max(axis=-1, keepdims=True))
        return torch.from_numpy(e / e.sum(axis=-1, keepdims=True)).double()

    result = run(lesson00.SOFTMAX, via_numpy)
    assert "expected dtype torch.float32, got torch.float64" in result.message
    assert result.steps[0] == DTYPE_HINT


def test_float64_scores_must_give_a_float64_result():
    def in_float32(x):
        e = (x.float() - x.float().max(dim=-1, keepdim=True).values).exp()
        return e / e.sum(dim=-1, keepdim=True)

    result = run(lesson00.SOFTMAX, in_float32)
    assert "expected dtype torch.float64, got torch.float32" in result.message
    assert "float64 x" in result.message


def test_max_without_values_crashes_with_a_hint_about_it():
    def max_tuple(x):
        e = (x - x.max(dim=-1, keepdim=True)).exp()
        return e / e.sum(dim=-1, keepdim=True)

    result = run(lesson00.SOFTMAX, max_tuple)
    assert "raised TypeError" in result.message
    assert any("max returns two things" in step for step in result.steps)


# ---------------------------------------------------------------- what a learner reads


def test_the_check_prints_the_symptom_and_hint_gives_the_steps(capsys):
    out = verdict(check_softmax, no_max_subtraction, capsys)
    assert out.startswith("TRY AGAIN  softmax: a row of scores near 1000 comes out as NaN")
    assert "(run hint() for a more specific hint: 2 more)" in out
    assert "overflows" not in out  # the symptom first; the cause waits for hint()
    hint()
    first = capsys.readouterr().out
    assert first.startswith("HINT 1/2  softmax: exp(1000) overflows") and "run hint()" in first
    hint()
    last = capsys.readouterr().out
    assert last.startswith("HINT 2/2  softmax: See the section 'A first taste")
    hint()  # asking past the last step repeats it
    assert capsys.readouterr().out == last


def test_hint_after_a_pass_or_a_stub_says_there_is_no_failed_check(capsys):
    for fn in (notebook_functions("softmax")["softmax"], stub):
        check_softmax(fn)
        capsys.readouterr()
        hint()
        assert capsys.readouterr().out.startswith("No failed check")


def test_no_hint_holds_code():
    texts = [b.symptom + b.cause for b in lesson00.SOFTMAX.bugs] + list(lesson00.SOFTMAX.hints)
    for text in texts:
        assert "keepdim" not in text and "dim=" not in text and ".max(" not in text


def test_checker_reports_a_crash_and_a_non_function(capsys):
    assert "raised AttributeError" in verdict(check_softmax, lambda x: x.nonexistent(), capsys)
    assert "expected a function, got 'softmax'" in verdict(check_softmax, "softmax", capsys)


# ---------------------------------------------------------------- the lesson's worked numbers


def test_the_two_row_worked_example_matches_the_arithmetic_by_hand():
    table = torch.tensor([[1.0, 2.0, 3.0], [4.0, 4.0, 4.0]])  # (rows, n) = (2, 3)
    first = torch.tensor([math.exp(-2), math.exp(-1), 1.0])  # exps after subtracting 3
    expected = torch.stack([first / first.sum(), torch.full((3,), 1 / 3)])
    torch.testing.assert_close(lesson00.softmax_reference(table), expected)
    # the lesson's prose quotes these, rounded
    assert round(first.sum().item(), 3) == 1.503
    assert [round(w, 3) for w in expected[0].tolist()] == [0.090, 0.245, 0.665]
    # the worked example is not one of the checker's cases
    assert not any(torch.equal(case.args[0], table) for case in lesson00.SOFTMAX.cases())


def test_shifting_the_scores_changes_no_weight_and_scaling_sharpens_them():
    scores = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0])  # the five words
    weights = torch.softmax(scores, dim=-1)
    torch.testing.assert_close(torch.softmax(scores + 10, dim=-1), weights)
    sharper = torch.softmax(scores * 3, dim=-1)
    # the lesson quotes cat 0.563 -> 0.940, and mat rounding to 0.000
    assert (round(weights[0].item(), 3), round(sharper[0].item(), 3)) == (0.563, 0.940)
    assert round(sharper[-1].item(), 3) == 0.0
    assert sharper.max() > weights.max() and sharper.min() < weights.min()
