"""The course as a learner installs it (`pip install .`, `pip install git+URL`): a wheel built
from the files a clone holds, installed into a fresh virtual environment with the pinned
stack, runs every lesson under strict nbval in a folder outside the repository, and writes a
learner's workspace with `python -m course_lib.workspace DIR`.

It takes minutes (a 1.3 GB environment, every lesson), so only `make portable` runs it: there
it is the lessons' run on this CPU's kernels with the default thread count.
"""

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

from helpers import ROOT, build_script, tree_files

pytestmark = [pytest.mark.wheel, pytest.mark.slow]

# what the installed lessons run with: the wheel's own dependencies plus a kernel and nbval
KERNEL_AND_TESTS = ["ipykernel", "nbval", "pytest", "pytest-xdist"]
# the repository's conftest.py skips stderr for the same reason (it also needs tools/)
NBVAL_CONFTEST = """def pytest_collectstart(collector):
    # warnings and progress-bar redraws on stderr differ by machine; the rest is compared
    if collector.fspath and collector.fspath.ext == ".ipynb":
        collector.skip_compare += ("stderr",)
"""


def run(args, cwd, timeout=600) -> str:
    """Run args in cwd (outside the repository, nothing of it on the import path); its output."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(
        args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        timeout=timeout,
    )  # fmt: skip
    assert done.returncode == 0, f"{args}: rc {done.returncode}\n{done.stdout[-6000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(the built wheel, the fresh environment's python), all under a temporary folder."""
    base = tmp_path_factory.mktemp("wheel")
    source, dist, venv = base / "clone", base / "dist", base / "venv"
    for name in tree_files():  # the files a clone has, and new ones: no build/, no .venv
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    pip = ["-m", "pip", "--disable-pip-version-check", "-q"]
    run([sys.executable, *pip, "wheel", "--no-deps", "--no-build-isolation", "-w", dist, source],
        cwd=base)  # fmt: skip
    (wheel,) = dist.glob("*.whl")
    constraints = base / "constraints.txt"  # the pins, without the editable install of the course
    pins = ROOT.joinpath("requirements.txt").read_text(encoding="utf-8").splitlines()
    constraints.write_text("\n".join(line for line in pins if not line.startswith("-e")) + "\n")
    run([sys.executable, "-m", "venv", venv], cwd=base)
    python = venv / "bin" / "python"
    run([python, *pip, "install", "-c", constraints, wheel, *KERNEL_AND_TESTS], cwd=base)
    yield wheel, python
    shutil.rmtree(base)  # pytest keeps its last three temporary folders: not 1.3 GB each


def test_the_wheel_holds_every_package_data_file_and_lesson_and_nothing_else(installed):
    wheel, _ = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    code = set(tree_files("course_lib/*.py", "course_server/*.py"))
    carried = {f"course_lib/_files/{p.as_posix()}" for p in build_script().carried(ROOT)}
    assert code | carried <= names, sorted((code | carried) - names)
    tops = {name.split("/")[0] for name in names if not name.startswith("course_lib-")}
    assert tops == {"course_lib", "course_server"}  # no benchmarks/, tools/ or tests/


def test_the_installed_package_reads_its_own_copy(installed, tmp_path):
    _, python = installed
    venv = python.parents[1].resolve()
    code = "from course_lib import paths; print(paths.ROOT)"
    root = Path(run([python, "-c", code], cwd=tmp_path).strip())
    assert root.is_relative_to(venv) and root.name == "_files", root


def test_the_installed_workspace_command_writes_every_lesson_stubbed(installed, tmp_path):
    _, python = installed
    said = run([python, "-m", "course_lib.workspace", "mine"], cwd=tmp_path)
    lessons = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert f"{len(lessons)} new lesson(s) copied" in said
    assert sorted(p.name for p in (tmp_path / "mine").glob("*.ipynb")) == lessons
    for name in lessons:  # each exercise a stub in the learner's copy; parts without none
        cells = nbformat.read(tmp_path / "mine" / name, as_version=4).cells
        stubbed = any("raise NotImplementedError" in cell.source for cell in cells)
        assert stubbed == _has_exercises(name), name


def test_every_installed_lesson_passes_strict_nbval_outside_the_repository(installed, tmp_path):
    _, python = installed
    code = "from course_lib import paths; print(paths.LESSONS_DIR)"
    for lesson in sorted(Path(run([python, "-c", code], cwd=tmp_path).strip()).glob("*.ipynb")):
        shutil.copy2(lesson, tmp_path / lesson.name)
    shutil.copy2(ROOT / "tests" / "sanitize.cfg", tmp_path / "sanitize.cfg")
    (tmp_path / "conftest.py").write_text(NBVAL_CONFTEST, encoding="utf-8")
    nbval = ["--nbval", "--nbval-current-env", "--nbval-cell-timeout=300",
             "--nbval-sanitize-with", "sanitize.cfg"]  # fmt: skip
    xdist = ["-n", "2", "--dist", "loadfile"]  # one lesson's cells stay in one kernel
    run([python, "-m", "pytest", "-rs", "-p", "no:cacheprovider", *xdist, *nbval, "."],
        cwd=tmp_path, timeout=1800)  # fmt: skip


def _has_exercises(name: str) -> bool:
    """Whether lesson `name` has exercises of its own (04b, 07b and 15b have none)."""
    import importlib

    from course_lib.exercises import LESSONS, lesson_key

    stem = name.removesuffix(".ipynb")
    return bool(
        importlib.import_module(f"course_lib.exercises.{LESSONS[lesson_key(stem)]}").EXERCISES
    )
