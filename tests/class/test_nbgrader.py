"""Grading with nbgrader, from the course's own notebooks (deploy/nbgrader_course.py).

On a temporary nbgrader course folder: `generate_assignment` turns every lesson with exercises
into its learner version (stubs), and `autograde` scores three learners' submissions of
lessons 00 and 02b: the course's own solutions (full marks), the learner version untouched
(zero on every exercise), and the solutions with one known bug in lesson 02b's attention
(exactly that exercise's point lost). Needs `make grader` (nbgrader in .class/grader).
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

COURSE = Path(__file__).resolve().parents[2]
GRADER = COURSE / ".class" / "grader" / "bin"
GRADED = ["00_start_here", "02b_attention_in_batches"]
SCALE = " / math.sqrt(q.shape[-1])"  # in lesson 02b's attention solution; the bug drops it
SCORES = """
import json, sys
from nbgrader.api import Gradebook
scores = {}
with Gradebook("sqlite:///gradebook.db") as book:
    for student in book.students:
        for assignment in book.assignments:
            for notebook in assignment.notebooks:
                try:
                    found = book.find_submission_notebook(
                        notebook.name, assignment.name, student.id
                    )
                except Exception:  # this learner submitted no such notebook
                    continue
                for grade in found.grades:
                    scores.setdefault(student.id, {})[grade.name] = [grade.score, grade.max_score]
json.dump(scores, sys.stdout)
"""


def nbgrader(folder: Path, *args: str) -> str:
    done = subprocess.run(
        [str(folder / "nbgrader"), *args], cwd=folder, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout + done.stderr


def submit(folder: Path, student: str, lesson: str, notebook) -> None:
    target = folder / "submitted" / student / lesson / f"{lesson}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, target)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    if not (GRADER / "nbgrader").exists():
        pytest.fail("nbgrader is missing: `make grader` installs it into .class/grader")
    folder = tmp_path_factory.mktemp("grading")
    # the course's Python (this one) runs the lessons; nbgrader runs from its own venv
    subprocess.run(
        [sys.executable, "-m", "deploy.nbgrader_course", str(folder)], cwd=COURSE, check=True
    )
    nbgrader(folder, "generate_assignment", "*")
    for lesson in GRADED:
        source = nbformat.read(folder / "source" / lesson / f"{lesson}.ipynb", 4)
        release = nbformat.read(folder / "release" / lesson / f"{lesson}.ipynb", 4)
        submit(folder, "solutions", lesson, source)
        submit(folder, "learner-version", lesson, release)
        buggy = nbformat.from_dict(source)
        for cell in buggy.cells:
            if cell.metadata.get("nbgrader", {}).get("grade_id") == "attention":
                assert SCALE in cell.source
                cell.source = cell.source.replace(SCALE, "")
        submit(folder, "one-bug", lesson, buggy)
    nbgrader(folder, "autograde", "*", "--create")
    scores = subprocess.run(
        [str(GRADER / "python"), "-c", SCORES],
        cwd=folder,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    yield folder, json.loads(scores)
    shutil.rmtree(folder, ignore_errors=True)


def test_the_learner_version_has_stubs_where_the_solutions_were(graded):
    folder, _ = graded
    lessons = sorted(p.name for p in (folder / "source").iterdir())
    assert lessons == sorted(p.name for p in (folder / "release").iterdir())
    assert len(lessons) >= 6
    for lesson in lessons:
        source = nbformat.read(folder / "source" / lesson / f"{lesson}.ipynb", 4)
        release = nbformat.read(folder / "release" / lesson / f"{lesson}.ipynb", 4)
        assert len(source.cells) == len(release.cells)
        for original, learner in zip(source.cells, release.cells, strict=True):
            marked = original.metadata.get("nbgrader", {})
            if marked.get("solution"):
                assert "BEGIN SOLUTION" not in learner.source
                assert "raise NotImplementedError" in learner.source
            elif original.cell_type == "code":
                assert learner.source == original.source  # checker cells and lesson code as is
                assert learner.outputs == []


def test_the_courses_own_solutions_get_full_marks(graded):
    _, scores = graded
    solutions = scores["solutions"]
    assert len(solutions) == 3  # softmax; attention, padding_mask
    assert all(score == top > 0 for score, top in solutions.values()), solutions


def test_the_learner_version_gets_zero_on_every_exercise(graded):
    _, scores = graded
    stubs = scores["learner-version"]
    assert stubs.keys() == scores["solutions"].keys()
    assert all(score == 0 for score, _ in stubs.values()), stubs


def test_one_known_bug_loses_exactly_that_exercises_points(graded):
    _, scores = graded
    buggy, solutions = scores["one-bug"], scores["solutions"]
    lost = {grade: solutions[grade][0] - score for grade, (score, _) in buggy.items()}
    assert lost == {grade: 0 for grade in solutions} | {"check-attention": 1}, buggy
