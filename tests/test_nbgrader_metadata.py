"""nbgrader metadata on the lessons (tools/nbgrader_metadata.py): exercises, and checker cells
that assert their verdict. Grading itself runs in the class test (tests/class/test_nbgrader.py).
"""

from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from course_lib.checks import check_softmax
from helpers import stub
from tools import nbgrader_metadata

ROOT = Path(__file__).resolve().parents[1]
LESSONS = sorted((ROOT / "notebooks").glob("[0-9][0-9]*_*.ipynb"))
EXERCISE = "def double(x):\n    # BEGIN SOLUTION\n    return 2 * x\n    # END SOLUTION"

# notebook files and one checker on fixed cases: the same on every kernel path
pytestmark = pytest.mark.path_independent


@pytest.fixture(scope="module")
def script():
    return nbgrader_metadata


def lesson(*cells):
    return new_notebook(cells=[new_markdown_cell("# Lesson"), *cells])


def test_every_lesson_is_up_to_date(script, capsys):
    code = script.main(["--check", *map(str, LESSONS)])  # what `make nbgrader-metadata` checks
    assert code == 0, capsys.readouterr().out + "\nrun `make nbgrader-metadata`"


def test_every_exercise_of_the_course_is_graded(script):
    for path in LESSONS:
        notebook = nbformat.read(path, as_version=4)
        exercises = [c for c in notebook.cells if script.is_exercise(c)]
        graded = [c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade")]
        assert len(graded) == len(exercises), path.name
        for cell in graded:  # the lessons print verdicts; only nbgrader's copy asserts them
            assert all(line.startswith("check_") for line in cell.source.splitlines())


def test_exercise_and_checker_cells_are_marked(script):
    notebook = lesson(
        new_code_cell("x = 1"), new_code_cell(EXERCISE), new_code_cell("check_double(double)")
    )
    assert script.apply(notebook) == ["check-double"]
    setup, exercise, checker = notebook.cells[1:]
    assert "nbgrader" not in setup.metadata
    assert exercise.metadata.nbgrader == script.exercise_metadata("double")
    assert checker.metadata.nbgrader == script.checker_metadata("check-double", 1)
    assert checker.source == "check_double(double)"  # a learner's Run All carries on
    before = nbformat.writes(notebook)
    script.apply(notebook)
    assert nbformat.writes(notebook) == before  # running it again changes nothing
    script.apply(notebook, grading=True)  # the copy nbgrader grades
    assert checker.source == "assert check_double(double).passed"
    assert checker.metadata.nbgrader == script.checker_metadata("check-double", 1)


def test_an_exercise_without_a_checker_cell_is_an_error(script):
    with pytest.raises(ValueError, match="not followed by a checker cell"):
        script.apply(lesson(new_code_cell(EXERCISE), new_code_cell("print(double(2))")))


def _learners_softmax(x):
    e = (x - x.max(dim=-1, keepdim=True).values).exp()
    return e / e.sum(dim=-1, keepdim=True)


def test_a_checker_cell_prints_the_same_line_and_raises_only_when_the_check_fails(capsys):
    namespace = {"check_softmax": check_softmax}
    namespace["softmax"] = _learners_softmax
    exec("assert check_softmax(softmax).passed", namespace)
    passed = capsys.readouterr().out
    check_softmax(_learners_softmax)
    assert passed == capsys.readouterr().out and passed.startswith("PASS")
    namespace["softmax"] = stub
    with pytest.raises(AssertionError):
        exec("assert check_softmax(softmax).passed", namespace)
    assert capsys.readouterr().out.startswith("TRY AGAIN")
