"""Colab: the links that open a learner's copy of each lesson, and the cell that sets Colab up.

REPOSITORY is the one setting: every "Open in Colab" link (the README's, each lesson's first
cell) and the Colab cell's install command are made from it. A link opens the learner's copy
of a lesson (learner/, committed, written by `course_lib.workspace`: stubs, no outputs), never
the solved lesson in notebooks/. After changing REPOSITORY or BRANCH, `make learner` writes
the links and learner/ again.

A Colab runtime holds one notebook and forgets everything when it ends, so the Colab cell (the
first code cell of every learner copy, a no-op anywhere else) installs the course into it and
keeps every lesson in one folder on the learner's Google Drive, where a later lesson's
`earlier_work` finds the functions written in earlier ones (`course_lib.workspace.colab_folder`).
"""

import importlib
import re
from pathlib import Path, PurePosixPath

# The course's public git repository, on GitHub (Colab opens notebooks from GitHub by path).
# A placeholder until the course is published: set it, then run `make learner`.
REPOSITORY = "https://github.com/YOUR-GITHUB-ACCOUNT/transformer-course"
BRANCH = "main"  # the branch the links open and the Colab cell installs from
LEARNER_DIR = "learner"  # the committed learner copies, in the repository
ENV_VARIABLE = "COLAB_RELEASE_TAG"  # set in Colab's runtimes (the variable tools check for Colab)
DRIVE = Path("/content/drive")  # where Colab mounts the learner's Google Drive
FOLDER = DRIVE / "MyDrive" / "transformer-course"  # the one folder every lesson runs in
CELL_ID = "colab-setup"  # the Colab cell's id in each learner copy

_GITHUB = re.compile(r"https://github\.com/([\w.-]+)/([\w.-]+?)(?:\.git)?/?")
_LINK_TEXT = "Open in Colab"
_LINK_LINE = re.compile(r"^\[Open in Colab\]\(https://colab\.research\.google\.com/[^)]*\).*$")


def github_path(repository: str | None = None) -> str:
    """'owner/name' of a GitHub repository URL (default: REPOSITORY)."""
    repository = REPOSITORY if repository is None else repository
    match = _GITHUB.fullmatch(repository)
    if not match:
        raise ValueError(f"repository: expected https://github.com/OWNER/NAME, got {repository!r}")
    return f"{match[1]}/{match[2]}"


def colab_url(lesson: str) -> str:
    """The Colab address of the learner's copy of `lesson` (a file name, 01_attention_qkv.ipynb)."""
    path = PurePosixPath(LEARNER_DIR, lesson)
    return f"https://colab.research.google.com/github/{github_path()}/blob/{BRANCH}/{path}"


def link_line(lesson: str) -> str:
    """The markdown line each lesson's first cell carries under its title: "exercises unsolved"
    only where the lesson has exercises."""
    from course_lib.exercises import LESSONS, lesson_key

    key = lesson_key(PurePosixPath(lesson).stem)
    module = importlib.import_module(f"course_lib.exercises.{LESSONS[key]}") if key else None
    solved = "exercises unsolved" if getattr(module, "EXERCISES", ()) else "to run and change"
    return f"[{_LINK_TEXT}]({colab_url(lesson)}): your own copy of this lesson, {solved}."


def with_link(markdown: str, lesson: str) -> str:
    """A first markdown cell with its Colab link under the title, once (an old link goes)."""
    title, *rest = markdown.splitlines() or [""]
    body = "\n".join(line for line in rest if not _LINK_LINE.match(line)).strip("\n")
    return f"{title}\n\n{link_line(lesson)}" + (f"\n\n{body}" if body else "")


def install_requirement() -> str:
    """What pip installs on Colab: the course from its repository, as a package (not editable)."""
    return f"course_lib @ git+{REPOSITORY}@{BRANCH}"


def cell_source() -> str:
    """The Colab cell: on Colab, install the course beside Colab's own torch, then work in the
    one folder; anywhere else it does nothing and prints nothing."""
    return f"""\
# On Colab only (anywhere else this cell does nothing): install the course and keep every
# lesson in one folder on your Google Drive, where later lessons find your earlier work.
import os

if "{ENV_VARIABLE}" in os.environ:
    import importlib.util
    import subprocess
    import sys
    from importlib.metadata import version

    if importlib.util.find_spec("course_lib") is None:
        course = "{install_requirement()}"
        keep_torch = f"torch=={{version('torch')}}"  # the torch Colab ships stays as it is
        pip = [sys.executable, "-m", "pip", "install", "-q"]
        subprocess.run([*pip, course, keep_torch], check=True)
        importlib.invalidate_caches()
    from course_lib.workspace import colab_folder

    colab_folder()"""
