"""Where the course's files are (course_lib/paths.py), and what a wheel carries (setup.py): one
rule, which finds data/ and the lessons in the repository and inside an installed package.
tests/test_wheel.py builds a real wheel and runs the lessons from it (`make portable`)."""

import re
from pathlib import Path

import pytest

from course_lib import corpus, model, paths, train, variants
from helpers import ROOT, build_script, tree_files

# files and paths only: the same on every kernel path (`make test` runs it on one)
pytestmark = pytest.mark.path_independent


def test_in_the_repository_data_and_lessons_are_at_its_top():
    assert paths.ROOT == ROOT
    assert paths.DATA_DIR == ROOT / "data" and paths.LESSONS_DIR == ROOT / "notebooks"
    assert (paths.DATA_DIR / "language" / "vocab.txt").is_file()
    assert (paths.LESSONS_DIR / "00_start_here.ipynb").is_file()


def test_every_module_finds_them_by_that_rule():
    assert corpus.DIRECTORY == paths.DATA_DIR / "language"
    assert model.CHECKPOINT_DIR == paths.DATA_DIR / "checkpoints"
    assert variants.RESULTS.parent == paths.DATA_DIR
    # and none looks for files beside itself: a second rule would miss the installed copy
    others = [
        path.relative_to(ROOT).as_posix()
        for path in sorted((ROOT / "course_lib").rglob("*.py"))
        if path.name != "paths.py"
        and re.search(r"(?<![.\w])__file__", path.read_text(encoding="utf-8"))  # not torch.__file__
    ]
    assert others == []


def test_an_installed_package_holds_them_inside_itself(tmp_path):
    package = tmp_path / "site-packages" / "course_lib"
    (package / paths.INSTALLED).mkdir(parents=True)
    assert paths.course_root(package) == package / paths.INSTALLED
    repository = tmp_path / "repository"
    (repository / "course_lib").mkdir(parents=True)
    assert paths.course_root(repository / "course_lib") == repository


def test_the_wheel_carries_every_data_file_and_lesson_where_the_rule_looks():
    build = build_script()
    assert build.INSTALLED == Path("course_lib", paths.INSTALLED)
    carried = [path.as_posix() for path in build.carried(ROOT)]
    assert carried == sorted(tree_files("data", "notebooks/*.ipynb"))
    for name in train.shipped_checkpoints():
        assert f"data/checkpoints/{name}.pt" in carried
    lessons = [name for name in carried if name.startswith("notebooks/")]
    assert lessons == [f"notebooks/{p.name}" for p in sorted(paths.LESSONS_DIR.glob("*.ipynb"))]
