"""The learner's workspace: solutions become stubs, existing copies are never overwritten."""

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from course_lib import colab
from course_lib.workspace import BEGIN, END, main, prepare, stub_solutions

# notebook files only: the same on every kernel path (`make test` runs it on one)
pytestmark = pytest.mark.path_independent

SOLVED = """def attention(q, k, v):
    \"\"\"Your turn.\"\"\"
    # BEGIN SOLUTION
    scores = q @ k.T
    return scores.softmax(-1) @ v
    # END SOLUTION
"""


def lesson(path, source=SOLVED):
    nb = new_notebook(
        cells=[new_markdown_cell("# Lesson"), new_code_cell(source, execution_count=1)]
    )
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", text="solution output\n")]
    nbformat.write(nb, path)


def test_stub_replaces_the_region_and_names_the_exercise():
    out = stub_solutions(SOLVED)
    assert "q @ k.T" not in out and "BEGIN SOLUTION" not in out
    assert '    raise NotImplementedError("Exercise attention: write your code here")' in out
    assert out.startswith("def attention(q, k, v):")
    namespace = {}
    exec(out, namespace)  # the stubbed cell is still valid Python
    with pytest.raises(NotImplementedError, match="attention"):
        namespace["attention"](1, 2, 3)


@pytest.mark.parametrize(
    "source,message",
    [
        ("# BEGIN SOLUTION\nx = 1\n", "never closed"),
        ("x = 1\n# END SOLUTION\n", "without"),
        ("# BEGIN SOLUTION\n# BEGIN SOLUTION\n# END SOLUTION\n", "inside another"),
    ],
)
def test_unbalanced_markers_are_reported(source, message):
    with pytest.raises(ValueError, match=message):
        stub_solutions(source)


def test_prepare_copies_stubs_and_clears_outputs(tmp_path):
    lessons, workspace = tmp_path / "notebooks", tmp_path / "workspace"
    lessons.mkdir()
    lesson(lessons / "01_a.ipynb")
    assert prepare(lessons, workspace) == [workspace / "01_a.ipynb"]
    copy = nbformat.read(workspace / "01_a.ipynb", as_version=4)
    markdown, setup, code = copy.cells
    assert markdown.source == "# Lesson"
    assert setup.id == colab.CELL_ID and setup.source == colab.cell_source()  # first code cell
    assert "NotImplementedError" in code.source and "q @ k.T" not in code.source
    assert code.outputs == [] and code.execution_count is None
    # the course's own notebook keeps its solution
    assert "q @ k.T" in nbformat.read(lessons / "01_a.ipynb", as_version=4).cells[1].source


def test_learner_edits_survive_and_new_lessons_appear(tmp_path, capsys):
    lessons, workspace = tmp_path / "notebooks", tmp_path / "workspace"
    lessons.mkdir()
    lesson(lessons / "01_a.ipynb")
    prepare(lessons, workspace)
    mine = workspace / "01_a.ipynb"
    edited = nbformat.read(mine, as_version=4)
    edited.cells[2].source = "def attention(q, k, v):\n    return 'my own attempt'"
    nbformat.write(edited, mine)
    before = mine.read_bytes()

    lesson(lessons / "01_a.ipynb", SOLVED + "\n# the course was updated\n")
    lesson(lessons / "02_b.ipynb")
    assert main([str(lessons), str(workspace)]) == 0
    assert mine.read_bytes() == before
    assert (workspace / "02_b.ipynb").exists()
    assert "1 new lesson(s) copied, 1 existing kept untouched" in capsys.readouterr().out


def test_one_folder_given_is_the_workspace_for_the_course_lessons(tmp_path, capsys):
    # `python -m course_lib.workspace DIR`, as a learner with the installed package runs it
    from course_lib.paths import LESSONS_DIR

    assert main([str(tmp_path / "mine")]) == 0
    names = sorted(p.name for p in (tmp_path / "mine").glob("*.ipynb"))
    assert names == sorted(p.name for p in LESSONS_DIR.glob("*.ipynb")) and names
    said = capsys.readouterr().out
    assert f"{len(names)} new lesson(s) copied, 0 existing kept untouched" in said
    assert main([]) == main(["a", "b", "c"]) == 2  # usage


def test_every_course_notebook_stubs_cleanly(tmp_path):
    from pathlib import Path

    notebooks = Path(__file__).resolve().parents[1] / "notebooks"
    written = prepare(notebooks, tmp_path)
    assert len(written) == len(list(notebooks.glob("*.ipynb"))) > 0
    for path in written:
        for cell in nbformat.read(path, as_version=4).cells:
            assert "BEGIN SOLUTION" not in cell.source and "END SOLUTION" not in cell.source


def _solution_regions(lines):
    region = None
    for line in lines:
        if line.strip() == BEGIN:
            region = []
        elif line.strip() == END:
            yield region
            region = None
        elif region is not None:
            region.append(line)


def test_filling_each_stub_with_the_solution_gives_back_the_course_lesson(tmp_path):
    """A learner who writes the course's solution into every stub has the course's lesson,
    marker lines aside: so the lessons' strict nbval run also proves that a fully solved
    workspace passes every check (there is no separate execution of it). The unsolved copies
    run top to bottom in JupyterLab in the browser test."""
    from pathlib import Path

    notebooks = Path(__file__).resolve().parents[1] / "notebooks"
    for path in prepare(notebooks, tmp_path):
        course = nbformat.read(notebooks / path.name, as_version=4)
        copy = nbformat.read(path, as_version=4)
        cells = [cell for cell in copy.cells if cell.id != colab.CELL_ID]  # the one cell added
        for mine, theirs in zip(cells, course.cells, strict=True):
            solutions = iter(_solution_regions(theirs.source.splitlines()))
            filled = []
            for line in mine.source.splitlines():
                if line.strip() == "# YOUR CODE HERE":
                    continue
                if line.strip().startswith('raise NotImplementedError("Exercise'):
                    filled.extend(next(solutions))
                    continue
                filled.append(line)
            expected = [
                line for line in theirs.source.splitlines() if line.strip() not in (BEGIN, END)
            ]
            assert filled == expected, (path.name, mine.source[:200])
