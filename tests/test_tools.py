"""tools/ is a package: its scripts run as `python -m tools.<name>` and are imported as
`tools.<name>`, so nothing in the course edits sys.path to find them (or any helper code).
tools/run_notebooks.py's `execute` is the one place a notebook is run with nbclient."""

from pathlib import Path

import nbformat
import pytest
from nbclient.exceptions import CellExecutionError
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from helpers import tree_files
from tools.run_notebooks import execute

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.path_independent


def test_tools_is_a_package():
    assert (ROOT / "tools" / "__init__.py").is_file()


def test_no_module_edits_sys_path():
    here = Path(__file__).resolve().relative_to(ROOT).as_posix()
    edits = [
        name
        for name in tree_files("*.py")
        if name != here
        and any(f"sys.path.{verb}(" in (ROOT / name).read_text() for verb in ("insert", "append"))
    ]
    assert edits == [], f"sys.path edited in {edits}: import tools.<name> from the repository root"


def test_notebooks_are_run_in_one_place():
    here = Path(__file__).resolve().relative_to(ROOT).as_posix()
    found = [
        name
        for name in tree_files("*.py")
        if name != here and "NotebookClient(" in (ROOT / name).read_text()
    ]
    assert found == ["tools/run_notebooks.py"], f"a NotebookClient is set up in {found}"


@pytest.mark.slow
def test_execute_runs_a_notebook_in_its_folder_and_times_its_cells(tmp_path):
    (tmp_path / "data.txt").write_text("read from the notebook's folder")
    path = tmp_path / "tiny.ipynb"
    cells = [new_markdown_cell("# Tiny"), new_code_cell("print(open('data.txt').read())"),
             new_code_cell("import time; time.sleep(0.2); 6 * 7")]  # fmt: skip
    nbformat.write(new_notebook(cells=cells), path)
    notebook, seconds = execute(path, timeout=60)
    assert notebook.cells[1].outputs[0].text == "read from the notebook's folder\n"
    assert notebook.cells[2].outputs[0].data["text/plain"] == "42"
    assert [c.execution_count for c in notebook.cells[1:]] == [1, 2]
    assert notebook.metadata.language_info.name == "python"
    assert "execution" not in notebook.cells[1].metadata  # no timing metadata stored
    assert 0.2 <= seconds < 30
    nbformat.write(new_notebook(cells=[new_code_cell("1 / 0")]), path)
    with pytest.raises(CellExecutionError):
        execute(path, timeout=60)
    with pytest.raises(ValueError, match="timeout"):
        execute(path, timeout=0)
