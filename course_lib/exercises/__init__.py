"""Every exercise of the course as data: one module of entries per lesson, on a shared core.

`core` holds the Exercise/Bug/Verdict types and `run`, which checks a learner's function and
returns a Verdict without printing. `lessonNN` holds lesson NN's entries in `EXERCISES`.
`stub` writes and recognises the stub a learner's copy holds, and decides yours or the
course's (for the checkers, the explorers, course_lib.mywork, the workspace and nbgrader).
`course_lib.checks` turns each entry into the `check_<name>` a lesson calls, which prints.
"""

import importlib

from course_lib.exercises.core import Bug, Case, Exercise, Verdict, run

LESSONS = ("00", "01", "02", "03", "04", "05", "06", "13")

__all__ = ["Bug", "Case", "Exercise", "Verdict", "run", "all_exercises", "by_name", "LESSONS"]


def all_exercises() -> list[Exercise]:
    """Every exercise of every lesson, in course order."""
    found = []
    for lesson in LESSONS:
        module = importlib.import_module(f"course_lib.exercises.lesson{lesson}")
        found.extend(module.EXERCISES)
    return found


def by_name(name: str) -> Exercise:
    """The exercise whose function is called name (say "attention")."""
    for exercise in all_exercises():
        if exercise.name == name:
            return exercise
    names = ", ".join(e.name for e in all_exercises())
    raise ValueError(f"name: expected one of {names}; got {name!r}")
