"""The learner's workspace runs top to bottom, unsolved and solved (issue 14, section 5).

Unsolved: every exercise is still the stub that `make lab` writes. Run All must reach the end
of every lesson without a traceback, each checker saying "not implemented yet": skipping an
exercise never blocks the lesson, and later lessons fall back to the course's functions.

Solved: every stub filled with the course's own solution, as a learner who solved everything
would have it. Every checker passes, and lessons 03-06 build on those functions through
course_lib.mywork (the lesson 06 model is made of them).

Both runs execute every lesson in a fresh kernel (about a minute each).
"""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from course_lib.workspace import BEGIN, END, prepare

pytestmark = [pytest.mark.slow, pytest.mark.path_independent]

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
LESSONS = sorted(p.name for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
STUB = 'raise NotImplementedError("Exercise'


def execute(path: Path) -> nbformat.NotebookNode:
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook, timeout=600, kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        record_timing=False, store_widget_state=False,
    )  # fmt: skip
    try:
        client.execute()
    except CellExecutionError as err:
        pytest.fail(f"{path.name} stopped with a traceback:\n{str(err)[:3000]}")
    return notebook


def checker_outputs(notebook) -> list[str]:
    """The printed text of every checker cell (nbgrader marks them as graded)."""
    texts = []
    for cell in notebook.cells:
        if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("grade"):
            texts.append("".join(o.get("text", "") for o in cell.outputs))
    return texts


def errors(notebook) -> list[str]:
    return [
        f"{o.ename}: {o.evalue}"
        for cell in notebook.cells if cell.cell_type == "code"
        for o in cell.outputs if o.output_type == "error"
    ]  # fmt: skip


def fill_stubs(copy, course) -> None:
    """Put the course's solution back where the workspace copy has a stub, cell by cell."""
    for mine, theirs in zip(copy.cells, course.cells, strict=True):
        if mine.cell_type != "code" or STUB not in mine.source:
            continue
        out, regions = [], iter(_regions(theirs.source.splitlines()))
        for line in mine.source.splitlines():
            if line.strip() == "# YOUR CODE HERE":
                continue
            if line.strip().startswith(STUB):
                out.extend(next(regions))
                continue
            out.append(line)
        mine.source = "\n".join(out)


def _regions(lines):
    region = None
    for line in lines:
        if line.strip() == BEGIN:
            region = []
        elif line.strip() == END:
            yield region
            region = None
        elif region is not None:
            region.append(line)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    folder = tmp_path_factory.mktemp("workspace")
    prepare(NOTEBOOKS, folder)
    return folder


@pytest.mark.parametrize("name", LESSONS)
def test_unsolved_workspace_runs_to_the_end(workspace, name):
    notebook = execute(workspace / name)
    assert not errors(notebook)
    outputs = checker_outputs(notebook)
    assert outputs, f"{name} has no checker cell"
    for text in outputs:
        verdicts = [line for line in text.splitlines() if line.startswith(("PASS", "TRY AGAIN"))]
        assert verdicts and all("not implemented yet" in v for v in verdicts), (name, text)


@pytest.fixture(scope="module")
def solved(tmp_path_factory):
    folder = tmp_path_factory.mktemp("solved")
    prepare(NOTEBOOKS, folder)
    for name in LESSONS:
        copy = nbformat.read(folder / name, as_version=4)
        course = nbformat.read(NOTEBOOKS / name, as_version=4)
        fill_stubs(copy, course)
        for mine, theirs in zip(copy.cells, course.cells, strict=True):
            markers = (BEGIN, END)
            expected = "\n".join(
                line for line in theirs.source.splitlines() if line.strip() not in markers
            )
            assert mine.source == expected, (name, mine.source[:200])
        nbformat.write(copy, folder / name)
    return folder


@pytest.mark.parametrize("name", LESSONS)
def test_solved_workspace_passes_every_check(solved, name):
    notebook = execute(solved / name)
    assert not errors(notebook)
    outputs = checker_outputs(notebook)
    assert outputs, f"{name} has no checker cell"
    for text in outputs:
        verdicts = [line for line in text.splitlines() if line.startswith(("PASS", "TRY AGAIN"))]
        assert verdicts and all(v.startswith("PASS") for v in verdicts), (name, text)
