"""The learner's workspace: copies of the lessons with exercise solutions replaced by stubs.

`python -m course_lib.workspace DIR` writes a copy of every lesson that is not in DIR yet, and
never touches one that is: a learner's edits survive every update, and lessons added later
appear. The lessons are the course's own (`course_lib.paths.LESSONS_DIR`: the repository's
notebooks/, or the installed package's copy); `python -m course_lib.workspace LESSONS DIR`
reads another folder (`make lab` and `make workspace` run `... notebooks workspace`).

In the course's own notebooks, the code a learner should write sits between the lines
`# BEGIN SOLUTION` and `# END SOLUTION`. In the copy, that region becomes a stub that
raises NotImplementedError naming the exercise, and the Colab cell comes before the first code
cell (`course_lib.colab`: on Colab it installs the course and runs `colab_folder`; anywhere
else it does nothing). The committed learner copies in learner/ are what `make learner` writes.
"""

import os
import re
import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell

from course_lib import colab
from course_lib.exercises.stub import stub_source
from course_lib.paths import LESSONS_DIR

BEGIN = "# BEGIN SOLUTION"
END = "# END SOLUTION"
_DEF = re.compile(r"^(?:def|class)\s+(\w+)\b")  # a top-level function or class: the exercise


def stub_solutions(source: str, where: str = "this cell") -> str:
    """Replace each BEGIN/END SOLUTION region of a cell's source with a NotImplementedError stub."""
    out, exercise, inside = [], None, False
    for number, line in enumerate(source.splitlines(), start=1):
        stripped = line.strip()
        if stripped == BEGIN:
            if inside:
                raise ValueError(f"{where}, line {number}: {BEGIN} inside another solution region")
            inside = True
            indent = line[: len(line) - len(line.lstrip())]
            out.extend(stub_source(exercise, indent).splitlines())
            continue
        if stripped == END:
            if not inside:
                raise ValueError(f"{where}, line {number}: {END} without {BEGIN}")
            inside = False
            continue
        if inside:
            continue
        match = _DEF.match(line)
        if match:
            exercise = match.group(1)
        out.append(line)
    if inside:
        raise ValueError(f"{where}: {BEGIN} is never closed by {END}")
    return "\n".join(out)


def learner_copy(notebook: nbformat.NotebookNode, name: str = "notebook") -> nbformat.NotebookNode:
    """A copy with solutions stubbed, every output cleared and the Colab cell first among the
    code cells, ready for a learner to run."""
    copy = nbformat.from_dict(notebook)
    for index, cell in enumerate(copy.cells):
        if cell.cell_type != "code":
            continue
        cell.source = stub_solutions(cell.source, where=f"{name}, cell {index}")
        cell.outputs = []
        cell.execution_count = None
    first_code = next((i for i, c in enumerate(copy.cells) if c.cell_type == "code"), 0)
    copy.cells.insert(first_code, new_code_cell(colab.cell_source(), id=colab.CELL_ID))
    copy.metadata.pop("widgets", None)
    return copy


def prepare(lessons: Path, workspace: Path) -> list[Path]:
    """Write learner copies of lessons/*.ipynb that workspace lacks; return the new files."""
    lessons, workspace = Path(lessons), Path(workspace)
    if not lessons.is_dir():
        raise ValueError(f"lessons: expected a folder of notebooks, got {lessons}")
    workspace.mkdir(parents=True, exist_ok=True)
    written = []
    for source in sorted(lessons.glob("*.ipynb")):
        target = workspace / source.name
        if target.exists():
            continue
        notebook = nbformat.read(source, as_version=4)
        nbformat.write(learner_copy(notebook, source.name), target)
        written.append(target)
    return written


def colab_folder(folder=None) -> Path:
    """On Colab (the Colab cell calls it): every lesson in one folder, by default on your Google
    Drive (mounted first: Colab asks you to allow it), and this notebook running there, so that
    `earlier_work` reads your earlier lessons from it. Copies only the lessons the folder lacks,
    as `python -m course_lib.workspace` does: your work there is never overwritten."""
    folder = Path(colab.FOLDER if folder is None else folder)
    on_drive = folder.is_relative_to(colab.DRIVE)
    if on_drive and not (colab.DRIVE / "MyDrive").is_dir():
        from google.colab import drive  # Colab's own module, on Colab only

        drive.mount(str(colab.DRIVE))
    written = prepare(LESSONS_DIR, folder)
    os.chdir(folder)
    kept = len(list(folder.glob("*.ipynb"))) - len(written)
    print(f"Your lessons are in {folder} ({len(written)} new, {kept} kept as they were).")
    where = " (File > Open notebook > Google Drive)" if on_drive else ""
    print(f"Open them from there{where} and work in those copies: later lessons read")
    print("the functions you write from that folder.")
    return folder


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print("usage: python -m course_lib.workspace [LESSONS_DIR] WORKSPACE_DIR", file=sys.stderr)
        return 2
    lessons = argv[0] if len(argv) == 2 else LESSONS_DIR
    workspace = argv[-1]
    written = prepare(Path(lessons), Path(workspace))
    kept = len(list(Path(workspace).glob("*.ipynb"))) - len(written)
    print(f"workspace: {len(written)} new lesson(s) copied, {kept} existing kept untouched")
    for path in written:
        print(f"  + {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
