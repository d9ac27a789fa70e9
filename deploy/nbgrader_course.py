"""Set up an nbgrader course folder from the course's lessons. Run it with the course's Python.

    .venv/bin/python -m deploy.nbgrader_course GRADING_DIR [LESSON ...] [--lessons FOLDER]

(from the course folder, which holds deploy/ and tools/).

In GRADING_DIR it writes nbgrader_config.py (from deploy/), source/<lesson>/<lesson>.ipynb for
each lesson (default: every lesson with exercises in notebooks/, or in --lessons; copied again
on every run, so a course update reaches the next release), a kernel spec `python3` that runs
this Python (the lessons import torch and course_lib), and `./nbgrader`, which runs nbgrader
from `make grader`'s environment with that kernel. Then, in GRADING_DIR:

    ./nbgrader generate_assignment 00_start_here      # release/: the learner version (stubs)
    # learners' notebooks go to submitted/<learner>/00_start_here/00_start_here.ipynb
    ./nbgrader autograde 00_start_here --create       # autograded/ and gradebook.db
    ./nbgrader export                                 # grades.csv
"""

import argparse
import json
import stat
import sys
from pathlib import Path

import nbformat

from course_lib.exercises.stub import stub_source
from tools.nbgrader_metadata import apply

COURSE = Path(__file__).resolve().parents[1]

GRADER = COURSE / ".class" / "grader" / "bin"
WRAPPER = """#!/bin/sh
# nbgrader from the course's grading environment (`make grader`); lessons run in the course's kernel
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
PATH="{grader}:$PATH" JUPYTER_PATH="$here/jupyter" exec "{grader}/nbgrader" "$@"
"""


def lessons_with_exercises(folder: Path) -> list[Path]:
    return [
        path
        for path in sorted(folder.glob("[0-9][0-9]*_*.ipynb"))
        if "BEGIN SOLUTION" in path.read_text(encoding="utf-8")
    ]


def prepare(folder: Path, lessons: list[Path]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    config = (COURSE / "deploy" / "nbgrader_config.py").read_text(encoding="utf-8")
    # nbgrader's stub cannot name the exercise: stub_source() writes the unnamed stub, which a
    # checker reads as "not implemented yet", as it reads the workspace's named one
    stub = f"c.ClearSolutions.code_stub = {{'python': {stub_source()!r}}}\n"
    (folder / "nbgrader_config.py").write_text(config + stub, encoding="utf-8")
    for lesson in lessons:  # graded copies: each checker cell asserts its verdict
        target = folder / "source" / lesson.stem / lesson.name
        target.parent.mkdir(parents=True, exist_ok=True)
        notebook = nbformat.read(lesson, as_version=4)
        apply(notebook, lesson.name, grading=True)
        nbformat.write(notebook, target)
    # the lessons' kernelspec is "python3": here it is this Python, whatever nbgrader's own is
    spec = folder / "jupyter" / "kernels" / "python3" / "kernel.json"
    spec.parent.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    spec.write_text(
        json.dumps({"argv": argv, "display_name": "Python 3 (course)", "language": "python"})
    )
    wrapper = folder / "nbgrader"
    wrapper.write_text(WRAPPER.format(grader=GRADER))
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="the nbgrader course folder to set up")
    parser.add_argument("names", nargs="*", help="lessons, e.g. 00_start_here (default: all)")
    parser.add_argument("--lessons", type=Path, default=COURSE / "notebooks")
    args = parser.parse_args(argv)
    lessons = lessons_with_exercises(args.lessons)
    if args.names:
        lessons = [p for p in lessons if p.stem in args.names]
        missing = sorted(set(args.names) - {p.stem for p in lessons})
        if missing:
            print(f"no lesson with exercises named {', '.join(missing)}", file=sys.stderr)
            return 2
    folder = args.folder.resolve()
    prepare(folder, lessons)
    print(
        f"{folder}: {len(lessons)} assignment(s) in source/: " + ", ".join(p.stem for p in lessons)
    )
    if not (GRADER / "nbgrader").exists():
        print("nbgrader is not installed yet: run `make grader` in the course folder")
    return 0


if __name__ == "__main__":
    sys.exit(main())
