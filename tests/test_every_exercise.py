"""Every exercise of the course (course_lib.exercises.all_exercises), each tested the same way:
the entry is complete, its reference passes and no hint is dead; the lesson's own solution
passes the check the lesson calls; a stub, and the learner's copy of the lesson, are "not
implemented yet"; every bug runs on every case; no check warns, and none takes the course's
own function; the last hint names sections the lesson has.

These are the tests each lesson's test file once held a copy of. Where lessons differ, the
difference is a table here, keyed by lesson or exercise; what only one lesson tests stays in
its own file (tests/test_exercises_lesson*.py).
"""

import math
import re
import warnings
from functools import partial
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_lib import checks
from course_lib.attention import causal_mask
from course_lib.exercises import LESSONS, all_exercises, by_name, core, lesson_file
from course_lib.exercises.core import NOT_IMPLEMENTED, run, values_close
from course_lib.workspace import BEGIN
from helpers import (
    ROOT,
    assert_stubs_not_implemented,
    lesson_cells,
    lesson_code,
    notebook_functions,
    stub,
)

EXERCISES = all_exercises()
# the lessons that have exercises (04b, 07b and 15b have none)
LESSONS_WITH_EXERCISES = [key for key in LESSONS if any(e.lesson == key for e in EXERCISES)]


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


@pytest.mark.parametrize("exercise", _each(EXERCISES))
def test_the_reference_passes_its_own_check(exercise):
    assert run(exercise, exercise.reference, reference_ok=True).passed


# each runs a model or a training loop once per bug: in `make test`, not `make quick`
SLOW_HINT_CHECKS = {"train_loop", "generate", "generate_cached"}


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


# ---------------------------------------------------------------- not written yet


class _StubModel(nn.Module):
    """Lesson 11a's exercise as the learner's copy holds it: a class whose methods are stubs."""

    def __init__(self, vocab_size, d_model, num_heads, d_ff, num_layers):
        super().__init__()
        raise NotImplementedError("Exercise __init__: write your code here")

    def forward(self, idx):
        raise NotImplementedError("Exercise forward: write your code here")


# what a learner's copy holds where the exercise is a class, not a function
STUBS = {"MyTransformer": _StubModel}


@pytest.mark.parametrize("exercise", _each(EXERCISES))
def test_a_stub_is_not_implemented_yet(exercise, capsys):
    result = _check_of(exercise)(STUBS.get(exercise.name, stub))
    assert result.status == NOT_IMPLEMENTED and "not implemented yet" in result.message
    out = capsys.readouterr().out
    assert out.startswith("TRY AGAIN") and "not implemented yet" in out


def _references(*names) -> dict:
    """The course's own versions of the exercises `names`, by name."""
    return {name: by_name(name).reference for name in names}


# The names each lesson's exercise cells find defined above them (its imports): the learner's
# copy of those cells must run in them (lesson 11a's class needs nn.Module). Lesson 05's cells
# also see the earlier lessons' functions, and 13b's `mine` holds lesson 13a's.
CELL_GLOBALS = {
    "00_start_here": {"torch": torch},
    "01a_language_and_tokens": {"torch": torch, "F": F, "math": math},
    "01b_loss_and_floor": {"torch": torch, "F": F, "math": math},
    "02a_attention": {"torch": torch, "math": math},
    "02b_attention_in_batches": {"torch": torch, "math": math},
    "03a_why_scale": {"torch": torch, "math": math},
    "03b_scale_in_models": {"torch": torch, "math": math},
    "04a_multihead_layer": {"torch": torch, "nn": nn},
    "05_encoder_decoder": {"torch": torch, "math": math, "causal_mask": causal_mask,
                           **_references("attention", "split_heads", "merge_heads")},
    "06_sinusoidal_and_rope": {"torch": torch, "math": math},
    "07a_rope_in_a_model": {"torch": torch},
    "08_transformer_block": {"torch": torch, "F": F, "nn": nn},
    "09_feed_forward": {"torch": torch, "F": F, "nn": nn},
    "10_sampling_and_cost": {"torch": torch},
    "11a_build_your_model": {"torch": torch, "nn": nn, "F": F, "math": math, "partial": partial},
    "11b_train_your_model": {"torch": torch, "F": F, "nn": nn},
    "12_read_your_model": {"torch": torch},
    "13a_what_generation_recomputes": {"torch": torch, "F": F, "math": math},
    "13b_kv_cache": {"torch": torch, "F": F, "math": math,
                     "mine": SimpleNamespace(**_references("rope_from", "attend_cached"))},
    "13c_grouped_query_attention": {"torch": torch, "F": F, "math": math},
    "14_todays_block": {"torch": torch, "F": F, "math": math, "nn": nn},
    "15a_sliding_window": {"torch": torch, "F": F, "math": math, "nn": nn},
    "16a_interpolation_and_ntk": {"torch": torch, "math": math},
    "16b_yarn_compared": {"torch": torch, "math": math},
    "17a_online_softmax": {"torch": torch, "F": F, "math": math},
    "17b_tiled_memory_and_backward": {"torch": torch, "F": F, "math": math},
}  # fmt: skip


@pytest.mark.parametrize("lesson", LESSONS_WITH_EXERCISES)
def test_the_workspace_stubs_are_not_implemented_yet(lesson, capsys):
    """The learner's copy of the lesson holds a stub of each exercise, in the cells that hold the
    solutions and that nbgrader grades (one per exercise, or per pair written together), and
    each check says "not implemented yet" of it."""
    notebook = lesson_file(ROOT / "notebooks", lesson)
    cells = lesson_cells(notebook)
    graded = [c for c in cells if c.metadata.get("nbgrader", {}).get("solution")]
    assert graded == [c for c in cells if BEGIN in c.source]
    exercises = [e for e in EXERCISES if e.lesson == lesson]
    names = [name for c in graded for name in c.metadata["nbgrader"]["grade_id"].split("-")]
    assert names == [e.name for e in exercises]
    checks_run = [_check_of(e) for e in exercises]
    assert_stubs_not_implemented(notebook, checks_run, dict(CELL_GLOBALS[lesson]), capsys)


# ---------------------------------------------------------------- the bugs, run on every case

# The errors a lesson's bugs may raise on a case, each known by words of its message: the
# error a learner's own version of that mistake raises there, which core.run then names as
# that bug. The bugs of a lesson not listed raise nothing.
BUG_ERRORS = {
    "01a_language_and_tokens": ((RuntimeError, IndexError), ("shape", "size", "dtype", "vector")),
    "01b_loss_and_floor": ((RuntimeError, IndexError), ("shape", "size", "dtype", "vector")),
    "02a_attention": ((RuntimeError,), ("shape", "size")),
    "02b_attention_in_batches": ((RuntimeError,), ("size",)),
    "03a_why_scale": ((RuntimeError,), ("size", "Supports 1D or 2D")),
    "04a_multihead_layer": ((TypeError,), ("failed to unpack",)),
    "05_encoder_decoder": ((RuntimeError, ValueError), ("shape", "size")),
    "06_sinusoidal_and_rope": ((RuntimeError, AttributeError, ValueError),
                               ("size", "has no attribute 'cos'", "only one element tensors")),
    "07a_rope_in_a_model": ((ValueError, IndexError),
                            ("values to unpack", "out of bounds", "too many indices")),
    "10_sampling_and_cost": ((RuntimeError, ValueError), ("probability tensor", "size", "max_len")),
    "11b_train_your_model": ((TypeError,), ("expected a list of Python floats", "NoneType")),
}  # fmt: skip

# each runs a model or a training loop per bug and case: in `make test`, not `make quick`
SLOW_BUG_RUNS = {"generate", "train_loop"}


@pytest.mark.parametrize("exercise", _each(EXERCISES, SLOW_BUG_RUNS))
def test_every_bug_runs_on_every_case_and_differs_from_the_reference(exercise):
    """The checker runs the bugs on whichever case a learner's function fails, to name the
    mistake: there each bug runs, or raises only an error its lesson allows (BUG_ERRORS); and
    on some case it raises or gives other numbers than the reference, or its hint could never
    be given."""
    errors, words = BUG_ERRORS.get(exercise.lesson, ((), ()))
    cases = exercise.case_list()
    expected = [exercise.reference(*case.args, **case.kwargs) for case in cases]
    for bug in exercise.bugs:
        differs = False
        for case, want in zip(cases, expected, strict=True):
            try:  # on copies of the arguments, as the checker hands them to a bug
                got = bug.wrong(*core._copy_args(case.args), **case.kwargs)
            except errors as err:
                assert any(word in str(err) for word in words), (bug.name, err)
                differs = True
                continue
            differs |= not values_close(got, want, exercise.atol, exercise.rtol)
        assert differs, f"{exercise.name}: {bug.name} gives the reference's result on every case"


# ---------------------------------------------------------------- what every check does


@pytest.mark.parametrize("exercise", _each(EXERCISES, SLOW_HINT_CHECKS))
def test_the_checks_raise_no_warning(exercise):
    """A failed check of a loss that carries a gradient once printed a UserWarning (float() of
    such a tensor): the reference's check and every bug's run here with every warning an error,
    the bugs' own code's included."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert run(exercise, exercise.reference, reference_ok=True).passed
        for bug in exercise.bugs:
            assert not run(exercise, bug.wrong).passed, bug.name


@pytest.mark.parametrize("exercise", _each(EXERCISES))
def test_the_courses_own_function_handed_to_the_check_is_refused(exercise, capsys):
    result = _check_of(exercise)(exercise.reference)
    assert not result.passed, result.message
    out = capsys.readouterr().out
    assert out.startswith("TRY AGAIN") and "the course's own function" in out


# ---------------------------------------------------------------- where the last hint points

# exercises whose last hint names a section otherwise than by its whole heading in the lesson:
# 01a's by the heading's first words, 03b's in lesson 03a, 10's without the heading's
# backquotes (03b's and 10's own test files check theirs)
NAMED_OTHERWISE = {"token_embedding", "output_layer", "score_variance", "generate"}


@pytest.mark.parametrize("exercise", _each(e for e in EXERCISES if e.name not in NAMED_OTHERWISE))
def test_the_last_hint_names_sections_the_lesson_has(exercise):
    """Each section the last hint ("See ...") names in quotes is a heading of the lesson."""
    cells = lesson_cells(lesson_file(ROOT / "notebooks", exercise.lesson))
    headings = {
        line.lstrip("#").strip()
        for cell in cells
        if cell.cell_type == "markdown"
        for line in cell.source.splitlines()
        if line.startswith("#")
    }
    named = re.findall(r"(?<!\w)'([^']+)'(?!\w)", exercise.idea)  # not the 's of "lesson's"
    assert named and all(name in headings for name in named), (named, headings)


# ---------------------------------------------------------------- what a lesson's copy gives away

# The lessons whose "yours or the course's" cells get numbers back, never a function: no code
# cell calls yours_if_it_passes (which returns the course's reference) or reaches for bigram
# or the exercise modules
NUMBERS_NOT_FUNCTIONS = ["03a_why_scale", "03b_scale_in_models"]


@pytest.mark.parametrize("lesson", NUMBERS_NOT_FUNCTIONS)
def test_no_cell_hands_the_learner_the_courses_function(lesson):
    code = lesson_code(lesson_file(ROOT / "notebooks", lesson))
    for word in ("yours_if_it_passes", "bigram", "course_lib.exercises", "_reference", "by_name"):
        assert word not in code, word


# What a lesson's markdown cells and concept checks' answers (all in the learner's copy) never
# write, so that a learner who reads ahead does not find the solution: lesson 03's two parts,
# the softmax Jacobian's general entry and the score variance's formula (their worked examples
# are other cases: two keys, N(0, sigma^2) weights, a uniform number on (0, 1))
_LESSON_03 = ("delta", "w_i (", "w_i(", "w_j)", "1/3 +", "\\frac13 +", "\\frac{1}{3 d", "1/(3 d",
              "near 1/3", "near $1/3$", "a^2 / 3", "a^2/3")  # fmt: skip
ANSWERS_NOT_IN_THE_TEXT = {"03a_why_scale": _LESSON_03, "03b_scale_in_models": _LESSON_03}


@pytest.mark.parametrize("lesson", ANSWERS_NOT_IN_THE_TEXT)
def test_no_text_after_a_check_states_the_exercises_answer(lesson):
    cells = lesson_cells(lesson_file(ROOT / "notebooks", lesson))
    text = " ".join(c.source for c in cells if c.cell_type == "markdown" or "ConceptCheck(" in
                    c.source)  # fmt: skip
    for answer in ANSWERS_NOT_IN_THE_TEXT[lesson]:
        assert answer not in text, answer
