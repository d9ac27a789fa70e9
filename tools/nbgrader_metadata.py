"""Make the course's notebooks nbgrader-ready: mark exercise cells and the checker cells.

    python -m tools.nbgrader_metadata notebooks/*.ipynb          # write (twice changes nothing)
    python -m tools.nbgrader_metadata --check notebooks/*.ipynb  # exit 1 if one is not up to date

Run it again after regenerating or adding a lesson (`make nbgrader-metadata`).

An exercise cell holds a `# BEGIN SOLUTION` ... `# END SOLUTION` region (the markers that
`course_lib.workspace` and nbgrader both read). The next code cell is its checker cell and
holds only checker calls. In the lessons a checker call only prints its PASS or TRY AGAIN
line, so a learner who skips an exercise can still run the lesson to the end. In the copy
that nbgrader grades (deploy/nbgrader_course.py, `apply(..., grading=True)`) each call becomes
`assert check_<name>(<function>).passed`: the same line is printed, and the cell raises when
the check fails, which nbgrader's autograder scores as zero. So:

- exercise cell: `solution` (nbgrader replaces the region with a stub in the learner version);
- checker cell: `grade`, `locked` (nbgrader restores its source before grading), one point
  per checker call;
- every other cell: no nbgrader metadata.
"""

import argparse
import re
import sys
from pathlib import Path

import nbformat

from course_lib.workspace import BEGIN, END

SCHEMA_VERSION = 3
_CHECK = re.compile(r"^(?:assert )?(check_\w+)\((\w+)\)(?:\.passed)?$")
_DEF = re.compile(r"^(?:def|class)\s+(\w+)\b", re.MULTILINE)  # top-level functions and classes


def is_exercise(cell) -> bool:
    return cell.cell_type == "code" and any(
        line.strip() == BEGIN for line in cell.source.splitlines()
    )


def checker_calls(cell) -> list[tuple[str, str]] | None:
    """(checker, function) for each line of a checker cell, or None if it is not one."""
    lines = [line.strip() for line in cell.source.splitlines() if line.strip()]
    matches = [_CHECK.match(line) for line in lines]
    if cell.cell_type != "code" or not lines or not all(matches):
        return None
    return [m.groups() for m in matches]


def asserted(calls: list[tuple[str, str]]) -> str:
    return "\n".join(f"assert {checker}({function}).passed" for checker, function in calls)


def printed(calls: list[tuple[str, str]]) -> str:
    return "\n".join(f"{checker}({function})" for checker, function in calls)


def exercise_metadata(grade_id: str) -> dict:
    return {
        "grade": False,
        "grade_id": grade_id,
        "locked": False,
        "schema_version": SCHEMA_VERSION,
        "solution": True,
    }


def checker_metadata(grade_id: str, points: int) -> dict:
    return {
        "grade": True,
        "grade_id": grade_id,
        "locked": True,
        "points": points,
        "schema_version": SCHEMA_VERSION,
        "solution": False,
    }


def apply(notebook, name: str = "notebook", *, grading: bool = False) -> list[str]:
    """Set nbgrader metadata in place (and, for grading, asserting checker cells); return the
    grade ids."""
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    for cell in notebook.cells:
        cell.metadata.pop("nbgrader", None)
    graded = []
    for index, cell in enumerate(code):
        if not is_exercise(cell):
            continue
        if END not in cell.source:
            raise ValueError(f"{name}: an exercise cell has {BEGIN} without {END}")
        functions = _DEF.findall(cell.source)
        if not functions:
            raise ValueError(
                f"{name}: an exercise cell defines no function or class: {cell.source[:60]!r}"
            )
        following = code[index + 1] if index + 1 < len(code) else None
        calls = checker_calls(following) if following is not None else None
        if not calls:
            raise ValueError(
                f"{name}: the exercise defining {', '.join(functions)} is not followed by a "
                "checker cell (a code cell of `check_<name>(<function>)` lines only)"
            )
        grade_id = "-".join(functions)
        cell.metadata["nbgrader"] = exercise_metadata(grade_id)
        following.source = asserted(calls) if grading else printed(calls)
        following.metadata["nbgrader"] = checker_metadata(f"check-{grade_id}", len(calls))
        graded.append(f"check-{grade_id}")
    return graded


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    args = parser.parse_args(argv)
    stale = []
    for path in args.notebooks:
        before = path.read_text(encoding="utf-8")
        notebook = nbformat.reads(before, as_version=4)
        graded = apply(notebook, path.name)
        after = nbformat.writes(notebook)
        after += "" if after.endswith("\n") else "\n"  # as nbformat.write ends a file
        changed = after != before
        if changed:
            stale.append(path)
            if not args.check:
                path.write_text(after, encoding="utf-8")
        state = ("stale" if args.check else "updated") if changed else "up to date"
        print(f"{path}: {len(graded)} graded check cell(s), {state}")
    if args.check and stale:
        print(f"run `make nbgrader-metadata`: {len(stale)} notebook(s) lack nbgrader metadata")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
