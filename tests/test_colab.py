"""Colab: every link opens a committed learner copy, learner/ is what course_lib.workspace writes
from the lessons, and the Colab cell installs the course (keeping the installed torch) and runs
every lesson in one folder, where a later lesson finds the learner's earlier work."""

import importlib.util
import json
import re
import subprocess
import sys
import types
from importlib.metadata import version
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from packaging.requirements import Requirement

from course_lib import colab, workspace
from course_lib.exercises import by_name, lesson_label
from course_lib.mywork import earlier_work
from helpers import ROOT, tree_files
from tools import learner_copies

# notebook files and a stand-in pip: the same on every kernel path (`make test` runs it on one)
pytestmark = pytest.mark.path_independent

LESSONS = sorted((ROOT / "notebooks").glob("*.ipynb"))
LEARNER = ROOT / colab.LEARNER_DIR
COLAB_LINK = re.compile(r"https://colab\.research\.google\.com/[^\s)\"\\]+")
OUT_OF_DATE = "run `make learner`"
REAL_RUN = subprocess.run  # the Colab tests replace subprocess.run with a list of commands


def test_the_learner_copies_are_a_fresh_generation_of_the_lessons(tmp_path):
    written = workspace.prepare(ROOT / "notebooks", tmp_path)
    assert sorted(p.name for p in LEARNER.iterdir()) == [p.name for p in written], OUT_OF_DATE
    for path in written:
        committed = (LEARNER / path.name).read_text(encoding="utf-8")
        assert committed == path.read_text(encoding="utf-8"), f"learner/{path.name}: {OUT_OF_DATE}"


def test_every_colab_link_opens_a_learner_copy():
    expected = {colab.colab_url(p.name) for p in LESSONS}
    assert len(expected) == len(LESSONS) > 0
    texts = {"README.md": (ROOT / "README.md").read_text(encoding="utf-8")}
    for path in [*LESSONS, *LEARNER.glob("*.ipynb")]:
        texts[str(path.relative_to(ROOT))] = path.read_text(encoding="utf-8")
    for name, text in texts.items():
        for link in COLAB_LINK.findall(text):
            assert link in expected, f"{name}: {link} is not a learner copy's link ({OUT_OF_DATE})"
            assert (LEARNER / link.rsplit("/", 1)[1]).is_file(), link
    assert set(COLAB_LINK.findall(texts["README.md"])) == expected, OUT_OF_DATE
    assert learner_copies.readme_block(LESSONS) in texts["README.md"], OUT_OF_DATE


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_each_lessons_first_cell_links_to_its_own_learner_copy(path):
    first = nbformat.read(path, as_version=4).cells[0]
    assert first.cell_type == "markdown"
    assert colab.link_line(path.name) in first.source.splitlines(), OUT_OF_DATE
    assert colab.with_link(first.source, path.name) == first.source  # once, under the title


def test_every_link_and_the_install_are_made_from_the_one_setting(monkeypatch):
    old = colab.with_link("# 01 · A lesson\n\nIts text.", "01_a.ipynb")
    monkeypatch.setattr(colab, "REPOSITORY", "https://github.com/a-teacher/course.git")
    monkeypatch.setattr(colab, "BRANCH", "spring")
    url = "https://colab.research.google.com/github/a-teacher/course/blob/spring/learner/01_a.ipynb"
    assert colab.colab_url("01_a.ipynb") == url
    assert (
        colab.with_link(old, "01_a.ipynb")
        == f"# 01 · A lesson\n\n{colab.link_line('01_a.ipynb')}\n\nIts text."
    )
    assert COLAB_LINK.findall(colab.link_line("01_a.ipynb")) == [url]
    requirement = Requirement(colab.install_requirement())  # what pip reads: name @ URL
    assert requirement.name == "course_lib"
    assert requirement.url == "git+https://github.com/a-teacher/course.git@spring"
    assert f'"{colab.install_requirement()}"' in colab.cell_source()
    with pytest.raises(ValueError, match="github.com/OWNER/NAME"):
        colab.github_path("https://gitlab.com/a-teacher/course")


def test_the_repository_is_named_in_no_other_code():
    repository = colab.github_path()  # owner/name: the README and the lessons hold it in links
    named = [name for name in tree_files("*.py", "Makefile", "*.toml", "*.cfg", "*.yaml")
             if repository in (ROOT / name).read_text(encoding="utf-8")]  # fmt: skip
    assert named == ["course_lib/colab.py"]


def run_cell(source: str) -> None:
    exec(compile(source, "colab-cell", "exec"), {"__name__": "__main__"})


def test_the_colab_cell_does_nothing_outside_colab(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv(colab.ENV_VARIABLE, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("installed outside Colab"))
    run_cell(colab.cell_source())
    assert capsys.readouterr() == ("", "")  # strict nbval would compare its output: none
    assert Path.cwd() == tmp_path and not any(tmp_path.iterdir())


# two lessons as today's names have them: the one that holds attention, and the one that
# holds split_heads, which calls it
ATTENTION = by_name("attention").lesson + ".ipynb"
HEADS = by_name("split_heads").lesson + ".ipynb"
SOLVED = {
    ATTENTION: '''def attention(q, k, v, mask=None):
    """Yours to write."""
    # BEGIN SOLUTION
    return "the course's", None
    # END SOLUTION''',
    HEADS: """def split_heads(x, num_heads):
    # BEGIN SOLUTION
    return attention(x, x, x)
    # END SOLUTION""",
}
MINE = 'def attention(q, k, v, mask=None):\n    return "mine", None'


def colab_cell(path: Path) -> str:
    """The first code cell of a lesson's learner copy, as its Colab link opens it."""
    copy = workspace.learner_copy(nbformat.read(path, as_version=4), path.name)
    return next(cell for cell in copy.cells if cell.cell_type == "code").source


@pytest.fixture
def on_colab(tmp_path, monkeypatch):
    """Two lessons as the installed package carries them, Colab's variable set, a Drive that
    Colab mounts when asked, and pip replaced by a list of the commands it was given."""
    lessons = tmp_path / "package" / "notebooks"
    lessons.mkdir(parents=True)
    for name, source in SOLVED.items():
        exercise = new_code_cell(source, metadata={"nbgrader": {"solution": True}})
        nbformat.write(new_notebook(cells=[new_markdown_cell(f"# {name[:2]}"), exercise]),
                       lessons / name)  # fmt: skip
    drive, mounted, installs = tmp_path / "drive", [], []

    def mount(at):  # as google.colab.drive.mount does, once the learner allows it
        mounted.append(at)
        (Path(at) / "MyDrive").mkdir(parents=True)

    google = types.ModuleType("google")
    google.colab = types.ModuleType("google.colab")
    google.colab.drive = types.SimpleNamespace(mount=mount)
    monkeypatch.setitem(sys.modules, "google", google)
    monkeypatch.setitem(sys.modules, "google.colab", google.colab)
    monkeypatch.setattr(workspace, "LESSONS_DIR", lessons)
    monkeypatch.setattr(colab, "DRIVE", drive)
    monkeypatch.setattr(colab, "FOLDER", drive / "MyDrive" / "transformer-course")
    monkeypatch.setenv(colab.ENV_VARIABLE, "release-2026")
    monkeypatch.setattr(subprocess, "run", lambda args, check: installs.append(args))
    find_spec = importlib.util.find_spec  # a fresh runtime: the course is not installed yet
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "course_lib" else find_spec(name, *a),
    )
    monkeypatch.chdir(tmp_path)  # where a Colab runtime starts (/content)
    return types.SimpleNamespace(lessons=lessons, mounted=mounted, installs=installs)


def test_on_colab_every_lesson_runs_in_one_folder_where_later_lessons_find_earlier_work(
    on_colab, tmp_path, monkeypatch, capsys
):
    run_cell(colab_cell(on_colab.lessons / ATTENTION))  # the lesson with attention, from its link
    (install,) = on_colab.installs
    assert install[:4] == [sys.executable, "-m", "pip", "install"]
    assert colab.install_requirement() in install
    assert f"torch=={version('torch')}" in install  # the torch already there, pinned as it is
    assert not {"-e", "--editable", "-U", "--upgrade", "--force-reinstall"} & set(install)
    folder = colab.FOLDER
    assert on_colab.mounted == [str(colab.DRIVE)] and Path.cwd() == folder
    assert sorted(p.name for p in folder.glob("*.ipynb")) == sorted(SOLVED)
    assert "(2 new, 0 kept as they were)" in capsys.readouterr().out

    mine = nbformat.read(folder / ATTENTION, as_version=4)  # the learner's work
    (exercise,) = [cell for cell in mine.cells if "raise NotImplementedError" in cell.source]
    exercise.source = MINE
    nbformat.write(mine, folder / ATTENTION)

    monkeypatch.chdir(tmp_path)  # the heads lesson in a runtime of its own, Drive still mounted
    run_cell(colab_cell(on_colab.lessons / HEADS))
    assert len(on_colab.installs) == 2 and len(on_colab.mounted) == 1 and Path.cwd() == folder
    assert "(0 new, 2 kept as they were)" in capsys.readouterr().out
    assert MINE in nbformat.read(folder / ATTENTION, as_version=4).cells[2].source
    found = earlier_work("attention", "split_heads")  # as lesson 04a calls it: its own folder
    assert found.attention(1, 2, 3) == ("mine", None)
    said = capsys.readouterr().out
    assert f"attention    lesson {lesson_label(ATTENTION[:-6])}: yours" in said
    assert f"split_heads  lesson {lesson_label(HEADS[:-6])}: the course's (yours is not" in said


@pytest.mark.slow
def test_pip_given_the_colab_cells_command_installs_the_course_alone_and_keeps_torch(
    on_colab, tmp_path
):
    """The cell's own pip command, run by pip with the repository in place of its URL (no
    network here) as a dry run: pip would install the course as a package, nothing else."""
    run_cell(colab_cell(on_colab.lessons / ATTENTION))
    (install,) = on_colab.installs
    here = [
        f"course_lib @ {ROOT.as_uri()}" if a == colab.install_requirement() else a for a in install
    ]
    report = tmp_path / "report.json"
    dry = ["--dry-run", "--no-index", "--no-build-isolation", "--disable-pip-version-check"]
    dry += ["--report", str(report)]
    result = REAL_RUN([*here[:4], *dry, *here[4:]], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (only,) = json.loads(report.read_text())["install"]
    assert only["metadata"]["name"] == "course_lib"
    assert only["download_info"]["dir_info"].get("editable", False) is False


def test_the_link_line_promises_unsolved_exercises_only_where_a_lesson_has_some():
    from course_lib.colab import link_line

    assert link_line("00_start_here.ipynb").endswith(
        "your own copy of this lesson, exercises unsolved."
    )
    assert link_line("15b_attention_sinks.ipynb").endswith(
        "your own copy of this lesson, to run and change."
    )
