"""The checkers' core: strict comparisons, hints in steps, the errors many exercises meet. The
tests every exercise entry of the course shares are tests/test_every_exercise.py's."""

import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from course_lib import checks
from course_lib.exercises import by_name, core
from course_lib.exercises.core import Bug, Case, Exercise, run
from course_lib.exercises.errors import COMMON_ERRORS


def _double(x):
    return x * 2


TOY = Exercise(
    name="double",
    lesson="00_start_here",
    reference=_double,
    cases=lambda: [Case((torch.arange(6.0).view(2, 3),), label="a 2-D x"), (torch.ones(3),)],
    idea="the toy cell",
    bugs=(
        Bug("triple", lambda x: x * 3, "your numbers are too large", "you multiply by 3."),
        Bug("same", lambda x: x + 0, "nothing changed", "you return x as it is."),
    ),
    hints=("Twice x is x added to itself.",),
)


# ---------------------------------------------------------------- the core


def test_a_right_function_passes_and_says_how_many_cases():
    verdict = run(TOY, lambda x: x + x)
    assert verdict.passed and verdict.status == core.PASSED
    assert verdict.message == "double: passed all 2 cases. Well done!"


def test_a_known_bug_gives_its_symptom_then_its_cause_then_the_lesson_cell():
    verdict = run(TOY, lambda x: 3 * x)
    assert not verdict.passed and verdict.bug == "triple"
    assert verdict.message.startswith("double: your numbers are too large (case: a 2-D x; x shape")
    assert verdict.steps == ("you multiply by 3.", "See the toy cell.")


def test_an_unknown_mistake_gives_the_gap_then_the_general_hints():
    verdict = run(TOY, lambda x: x * 2 + 1)
    assert verdict.bug is None
    assert "the numbers differ from the course's: largest difference 1" in verdict.message
    assert verdict.steps == ("Twice x is x added to itself.", "See the toy cell.")


def test_an_error_a_known_bug_raises_too_gets_that_bugs_hint():
    def rows(ids, w):
        return w[ids]

    exercise = Exercise(
        name="rows",
        lesson="00_start_here",
        reference=rows,
        cases=lambda: [Case((torch.tensor([[0, 1]]), torch.ones(3, 2)), label="2-D ids")],
        idea="the toy cell",
        bugs=(Bug("flat", lambda ids, w: w.index_select(0, ids), "only 1-D ids", "it is flat."),),
    )
    verdict = run(exercise, lambda ids, w: torch.index_select(w, 0, ids))
    assert verdict.bug == "flat" and verdict.steps == ("it is flat.", "See the toy cell.")
    assert verdict.message.startswith("rows: your function raised IndexError: index_select()")
    # another error on the same case keeps the general hint
    verdict = run(exercise, lambda ids, w: w[ids.float()])
    assert verdict.bug is None and "promises this case works" in verdict.steps[0]


def _view_after_transpose(x):
    return x.transpose(0, 1).view(-1) * 0 + 2 * x.reshape(-1)


def _cos_of_a_number(x):
    return x * 2 + torch.cos(float(x.shape[-1])) * 0


def _none_compared(x, limit=None):
    return x * 2 if limit > 0 else x


@pytest.mark.parametrize(
    ("wrong", "name", "words"),
    [
        (_view_after_transpose, "view of a non-contiguous tensor", "`.reshape`"),
        (_cos_of_a_number, "a torch function given a Python number", "math module"),
        (_none_compared, "None used as a number", "`is None`"),
        (lambda x: x @ torch.ones(2, 3), "a matrix product of mismatched shapes", "`.mT`"),
        (lambda x: x + torch.ones(5), "shapes that do not line up", "`.mT`"),
    ],
)
def test_errors_many_exercises_meet_get_their_own_hint_before_the_general_one(wrong, name, words):
    verdict = run(TOY, wrong)
    assert verdict.bug == name, verdict.message
    assert words in verdict.steps[0] and "promises this case works" not in verdict.steps[0]
    assert verdict.steps[1:] == ("Twice x is x added to itself.", "See the toy cell.")
    assert verdict.message.startswith("double: your function raised ")


def _scores_by_star(q, k, v, mask=None):  # `*` where the scores need `@`
    scores = q * k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def _values_by_star(q, k, v, mask=None):  # `*` where the average of the values needs `@`
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights * v, weights


def _multihead_dot_T(x, qkv, out, num_heads, mask=None, rope=None):  # k.T on (B, H, T, d)
    B, T, D = x.shape
    d = D // num_heads
    q, k, v = (
        t.reshape(B, T, num_heads, d).transpose(1, 2) for t in qkv(x).split(D, dim=-1)
    )  # each (B, H, T, d)
    if rope is not None:
        q, k = rope(q), rope(k)
    scores = q @ k.T / math.sqrt(d)  # k.T is (d, T, H, B): every axis reversed
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    y = torch.softmax(scores, dim=-1) @ v  # (B, H, T, d)
    return out(y.transpose(1, 2).reshape(B, T, D))  # (B, T, D)


@pytest.mark.parametrize(
    ("exercise", "wrong"),
    [
        ("attention", _scores_by_star),
        ("attention", _values_by_star),
        ("multihead", _multihead_dot_T),
    ],
    ids=["attention: q * k^T", "attention: weights * v", "multihead: q @ k.T"],
)
def test_shapes_that_do_not_line_up_get_the_broadcast_hint_on_real_exercises(exercise, wrong):
    """torch's "The size of tensor a (..) must match the size of tensor b (..)": the hint says
    the shapes do not line up, and what `.T` does to a tensor with batch axes."""
    verdict = run(by_name(exercise), wrong)
    assert not verdict.passed and verdict.bug == "shapes that do not line up", verdict.message
    assert "must match the size of tensor b" in verdict.message
    hint = verdict.steps[0]
    assert hint == dict((name, h) for name, *_, h in COMMON_ERRORS)["shapes that do not line up"]
    for words in ("a product or a sum do not line up", "`.T`", "reversed every axis",
                  "`.transpose(-2, -1)`", "`.mT`"):  # fmt: skip
        assert words in hint, words


def test_an_exercises_own_bug_comes_before_a_common_error():
    own = Bug("viewed", _view_after_transpose, "a view of a transpose", "use reshape here.")
    verdict = run(replace(TOY, bugs=(own,)), _view_after_transpose)
    assert verdict.bug == "viewed" and verdict.steps[0] == "use reshape here."


def test_the_courses_own_version_handed_in_or_wrapped_fails_with_its_own_hint():
    # earlier_work hands back the course's version of an exercise not yet written: passing it
    # on, or calling it inside a function, must not pass the check
    alias = TOY.reference
    for fn in (TOY.reference, lambda x: alias(x), lambda x: alias(x) + 0.0):
        verdict = run(TOY, fn)
        assert not verdict.passed and verdict.bug == "course's own", verdict.message
        assert "the course's own _double" in verdict.message
        assert verdict.steps[0] == core.COURSE_OWN
    # a wrong answer built on it still gets the hint of its mistake
    assert run(TOY, lambda x: alias(x) * 1.5).bug == "triple"
    assert run(TOY, TOY.reference, reference_ok=True).passed


def test_a_result_without_its_gradient_fails_with_its_own_hint():
    exercise = Exercise(
        name="double",
        lesson="00_start_here",
        reference=_double,
        cases=lambda: [Case((torch.ones(3, requires_grad=True),), label="x needs a gradient")],
        idea="the toy cell",
        needs_grad=True,
    )
    assert run(exercise, lambda x: x + x).passed

    @torch.no_grad()
    def double(x):
        return x * 2

    verdict = run(exercise, double)
    assert not verdict.passed and verdict.bug == "no gradient"
    assert verdict.steps[0] == core.NO_GRADIENT[1]
    # where the course's result carries none, or the exercise does not feed training (a
    # forward pass under no_grad), neither need the learner's
    assert run(TOY, double).passed
    assert run(replace(exercise, needs_grad=False), double).passed


def test_dtype_is_compared_not_cast():
    verdict = run(TOY, lambda x: (x * 2).double())
    assert not verdict.passed
    assert "expected dtype torch.float32, got torch.float64" in verdict.message
    assert "dtype is part of the result" in verdict.steps[0]


def test_a_function_that_changes_its_input_in_place_is_caught():
    def doubles_in_place(x):
        x.mul_(2)
        return x

    verdict = run(TOY, doubles_in_place)
    assert not verdict.passed and verdict.bug == "in place"
    assert "changed its argument `x` in place" in verdict.message


def test_shape_type_stub_crash_and_non_function_are_each_named():
    assert "expected shape (2, 3), got (3, 2)" in run(TOY, lambda x: (2 * x).T).message
    assert "expected a torch.Tensor, got 2.0" in run(TOY, lambda x: 2.0).message

    def stub(x):
        raise NotImplementedError("Exercise double: write your code here")

    stubbed = run(TOY, stub)
    assert stubbed.status == core.NOT_IMPLEMENTED and "not implemented yet" in stubbed.message
    crashed = run(TOY, lambda x: x.nonexistent())
    assert "raised AttributeError" in crashed.message and "(case: a 2-D x" in crashed.message
    assert "expected a function, got 'double'" in run(TOY, "double").message


def test_dead_bugs_finds_a_bug_equal_to_the_reference_and_a_shadowed_one():
    shadowed = Exercise(
        "double", "00", _double, TOY.cases, "the toy cell",
        bugs=(
            Bug("alive", lambda x: x * 3, "s", "c"),
            Bug("dead", lambda x: x + x, "s", "c"),  # the reference itself
            Bug("shadowed", lambda x: x * 3.0, "s", "c"),  # same numbers as "alive", listed after
        ),
    )  # fmt: skip
    assert core.dead_bugs(shadowed) == ["dead", "shadowed"]


def test_hint_walks_through_the_steps_and_stops_at_the_last(capsys):
    check = checks.checker(TOY)
    check(lambda x: x * 3)
    first = capsys.readouterr().out
    assert first.startswith("TRY AGAIN  double: your numbers are too large")
    assert "run hint() for a more specific hint: 2 more" in first
    checks.hint()
    assert capsys.readouterr().out.startswith("HINT 1/2  double: you multiply by 3.")
    checks.hint("double")
    assert capsys.readouterr().out.strip() == "HINT 2/2  double: See the toy cell."
    checks.hint()
    assert "HINT 2/2" in capsys.readouterr().out  # the last hint stays the last
    check(lambda x: x + x)
    assert capsys.readouterr().out.startswith("PASS  double")
    checks.hint("double")
    assert "No failed check of double" in capsys.readouterr().out


def test_a_stub_called_from_inside_is_named():
    def helper(x):
        raise NotImplementedError("Exercise helper: write your code here")

    verdict = run(TOY, lambda x: helper(x) * 2)
    assert verdict.status == core.NOT_IMPLEMENTED
    assert verdict.message.startswith("double: it calls helper, which is not implemented yet")


def test_no_exercise_module_is_over_500_lines():
    """A lesson with several long exercises keeps one module per exercise (lessons 03, 04, 06)."""
    folder = Path(core.__file__).parent
    sizes = {
        str(p.relative_to(folder)): len(p.read_text(encoding="utf-8").splitlines())
        for p in sorted(folder.rglob("*.py"))
    }
    assert {name: n for name, n in sizes.items() if n > 500} == {}


def test_a_forbidden_function_is_seen_however_the_learner_reached_it():
    """A name imported from the module before the check, a builtin under another name: each
    is seen; the module and the profiler hook are restored after."""
    import sys

    from course_lib import attention
    from course_lib.attention import causal_mask as imported

    fused = torch.nn.functional.scaled_dot_product_attention  # a builtin, under another name
    watched = replace(
        TOY,
        forbidden=(
            (attention, "causal_mask"),
            (torch.nn.functional, "scaled_dot_product_attention"),
        ),
        forbidden_hint="write it yourself",
    )

    def by_imported_name(x):
        return x + x + 0 * imported(1).sum()

    def by_builtin_alias(x):
        q = torch.ones(1, 1)
        return x + x + 0 * fused(q, q, q).sum()

    for fn in (by_imported_name, by_builtin_alias):
        verdict = run(watched, fn)
        assert verdict.bug == "forbidden" and verdict.steps[0] == "write it yourself", fn
    assert attention.causal_mask is imported and sys.getprofile() is None
    assert run(watched, lambda x: x + x).passed
