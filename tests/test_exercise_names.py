"""An exercise never rebinds a name that cells above it use.

If it did, re-running one of those cells after the exercise (or with the exercise still a
stub) would call the learner's function where the lesson meant the course's: lesson 05 once
rebound `layer_norm` and its padding cells above then raised a TypeError.
"""

import ast
from pathlib import Path

import nbformat
import pytest

from course_lib.exercises import all_exercises, lesson_key

pytestmark = pytest.mark.path_independent

LESSONS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("[0-9][0-9]*_*.ipynb"))


def _tree(source: str) -> ast.Module:
    lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
    return ast.parse("\n".join(lines))


def _names_used(tree: ast.Module) -> set[str]:
    """Every name a cell reads, binds, defines or imports."""
    used = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            used.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            used.add(node.name)
        elif isinstance(node, ast.alias):
            used.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.arg):
            used.add(node.arg)
    return used


def _exercise_cells(notebook):
    code = [c for c in notebook.cells if c.cell_type == "code"]
    for index, cell in enumerate(code):
        if cell.metadata.get("nbgrader", {}).get("solution"):
            defined = [
                n.name for n in _tree(cell.source).body
                if isinstance(n, ast.FunctionDef | ast.ClassDef)
            ]  # fmt: skip
            yield index, defined, code


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_no_exercise_shadows_a_name_used_above_it(path):
    notebook = nbformat.read(path, as_version=4)
    for index, defined, code in _exercise_cells(notebook):
        above = set().union(*(_names_used(_tree(c.source)) for c in code[:index]))
        clash = sorted(set(defined) & above)
        assert not clash, f"{path.name}: exercise cell {index} rebinds {clash}, used above it"


def test_every_exercise_of_the_course_is_defined_in_its_lesson():
    defined = {}
    for path in LESSONS:
        for _, names, _ in _exercise_cells(nbformat.read(path, as_version=4)):
            for name in names:
                defined[name] = lesson_key(path.stem)  # the notebook's name
    for exercise in all_exercises():
        assert defined.get(exercise.name) == exercise.lesson, (
            f"exercise {exercise.name} (lesson {exercise.lesson}) is not an exercise cell's "
            "function or class in that lesson"
        )
