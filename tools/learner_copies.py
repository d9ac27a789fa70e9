"""The Colab links and the committed learner copies, written again from course_lib/colab.py.

`make learner` (after changing a lesson, or REPOSITORY or BRANCH in course_lib/colab.py):
1. each lesson's first markdown cell gets its "Open in Colab" link under the title (a markdown
   edit through nbformat: every stored output stays as it is);
2. the README's Colab links, between its two marker lines;
3. learner/: every lesson's learner copy, written afresh by course_lib.workspace (a copy
   there is never edited by hand: it is what a Colab link opens).
tests/test_colab.py fails while any of them is out of date.
"""

import sys
from pathlib import Path

import nbformat

from course_lib import colab
from course_lib.workspace import prepare

ROOT = Path(__file__).resolve().parents[1]
BEGIN = "<!-- Colab links: written by `make learner` from course_lib/colab.py -->"
END = "<!-- end of Colab links -->"


def title(notebook: nbformat.NotebookNode) -> str:
    """A lesson's title, its first line without the '#': '01 · Query, Key, Value'."""
    return notebook.cells[0].source.splitlines()[0].lstrip("#").strip()


def readme_block(lessons: list[Path]) -> str:
    """The README's lines between the markers: one Colab link per lesson."""
    lines = [
        f"- [{title(nbformat.read(p, as_version=4))}]({colab.colab_url(p.name)})" for p in lessons
    ]
    return "\n".join([BEGIN, *lines, END])


def with_readme_block(readme: str, lessons: list[Path]) -> str:
    start, end = readme.index(BEGIN), readme.index(END) + len(END)
    return readme[:start] + readme_block(lessons) + readme[end:]


def link_lessons(lessons: list[Path]) -> list[Path]:
    """Put each lesson's Colab link in its first markdown cell; return the files changed."""
    changed = []
    for path in lessons:
        notebook = nbformat.read(path, as_version=4)
        first = next(c for c in notebook.cells if c.cell_type == "markdown")
        linked = colab.with_link(first.source, path.name)
        if linked != first.source:
            first.source = linked
            nbformat.write(notebook, path)
            changed.append(path)
    return changed


def write_learner(lessons_dir: Path, learner_dir: Path) -> list[Path]:
    """learner/ afresh: a learner copy of every lesson, and nothing else."""
    for old in learner_dir.glob("*.ipynb"):
        old.unlink()
    return prepare(lessons_dir, learner_dir)


def main(root: Path = ROOT) -> int:
    lessons = sorted((root / "notebooks").glob("*.ipynb"))
    for path in link_lessons(lessons):
        print(f"linked   {path.relative_to(root)}")
    readme = root / "README.md"
    readme.write_text(with_readme_block(readme.read_text(encoding="utf-8"), lessons), "utf-8")
    written = write_learner(root / "notebooks", root / colab.LEARNER_DIR)
    print(f"learner: {len(written)} learner copies written, links to {colab.REPOSITORY}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
