"""Every exercise entry of the course (course_lib.exercises.all_exercises), each tested the same
way: complete and named once, its reference passes its own check, no hint is dead, and a
lesson's check_<name> runs it."""

import warnings

import pytest

from course_lib import checks
from course_lib.exercises import all_exercises, by_name
from course_lib.exercises.core import run

EXERCISES = all_exercises()


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


@pytest.mark.parametrize(
    "exercise",
    [
        pytest.param(e, marks=pytest.mark.slow) if e.name in SLOW_HINT_CHECKS else e
        for e in EXERCISES
    ],
    ids=lambda e: e.name,
)
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
