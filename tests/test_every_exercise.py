"""Every exercise of the course (course_lib.exercises.all_exercises), each tested the same way:
the entry is complete and named once, its reference passes its own check, no hint is dead, a
check_<name> runs it, and the lesson's own solution passes that check.

These are the tests each lesson's test file once held a copy of. Where a lesson differs, the
difference is a row in a table here, keyed by lesson or exercise; what only one lesson has
stays in its own file (tests/test_exercises_lesson*.py).
"""

import warnings

import pytest

from course_lib import checks
from course_lib.exercises import all_exercises, by_name
from course_lib.exercises.core import run
from helpers import notebook_functions

EXERCISES = all_exercises()


def _each(exercises, slow=()):
    """`exercises` as test parameters named after them, those named in `slow` marked slow
    (they run in `make test`, not in `make quick`)."""
    return [
        pytest.param(e, id=e.name, marks=[pytest.mark.slow] if e.name in slow else [])
        for e in exercises
    ]


def _check_of(exercise):
    """The check_<name> that the exercise's lesson calls: it runs the entry and prints."""
    (check,) = [
        c for name, c in vars(checks).items()
        if name.startswith("check_") and getattr(c, "exercise", None) is exercise
    ]  # fmt: skip
    return check


def test_every_exercise_is_complete_and_named_once():
    names = [e.name for e in EXERCISES]
    assert len(names) == len(set(names)), names
    for exercise in EXERCISES:
        assert exercise.case_list(), f"{exercise.name}: no cases"
        assert exercise.bugs, f"{exercise.name}: no known bugs, so no specific hint"
        assert exercise.idea and exercise.idea != f"lesson {exercise.lesson}", exercise.name
        assert by_name(exercise.name) is exercise
        for bug in exercise.bugs:
            assert bug.symptom and bug.cause, (exercise.name, bug.name)
            assert bug.symptom != bug.cause, (exercise.name, bug.name)
        assert len({b.name for b in exercise.bugs}) == len(exercise.bugs), exercise.name


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.name)
def test_the_reference_passes_its_own_check(exercise):
    assert run(exercise, exercise.reference, reference_ok=True).passed


# each runs a model or a training loop once per bug: in `make test`, not `make quick`
SLOW_HINT_CHECKS = {"train_loop", "generate", "generate_cached", "train_step"}


@pytest.mark.parametrize("exercise", _each(EXERCISES, SLOW_HINT_CHECKS))
def test_no_hint_is_dead(exercise):
    """Every bug differs from the reference on some case, and handing in the bug itself gets
    that bug's own hint (not an earlier bug's, not a pass); checking it warns about nothing
    (a warning from the checker itself would be an error; the learner's code may warn)."""
    for bug in exercise.bugs:
        with warnings.catch_warnings():
            warnings.filterwarnings("error", module=r"course_lib\.exercises\.core")
            verdict = run(exercise, bug.wrong)
        assert not verdict.passed, f"{exercise.name}: bug {bug.name} passes every case"
        assert verdict.bug == bug.name, (exercise.name, bug.name, verdict.message)
        assert verdict.steps[0] == bug.cause and verdict.steps[-1].startswith("See ")


def test_every_exercise_has_its_checker_in_checks():
    checkers = {name: getattr(checks, name) for name in dir(checks) if name.startswith("check_")}
    for exercise in EXERCISES:
        found = [c for c in checkers.values() if getattr(c, "exercise", None) is exercise]
        assert found, f"no check_* in course_lib.checks runs exercise {exercise.name}"


# ---------------------------------------------------------------- each lesson's own solution

# lesson 12's check measures a trained model's heads on every case: in `make test` only
SLOW_SOLUTIONS = {"head_detector"}


@pytest.mark.parametrize("exercise", _each(EXERCISES, SLOW_SOLUTIONS))
def test_the_lessons_solution_passes(exercise, capsys):
    """The lesson's exercise cell, read the way a later lesson gets it (course_lib.mywork), passes
    the check the lesson calls, which prints its PASS line. (Lessons 11a and 11b also check
    theirs on the course's own earlier functions, in their files.)"""
    names = [e.name for e in EXERCISES if e.lesson == exercise.lesson]
    solution = notebook_functions(*names)[exercise.name]
    result = _check_of(exercise)(solution)
    assert result.passed, result.message
    assert capsys.readouterr().out.startswith(f"PASS  {exercise.name}: passed all")
