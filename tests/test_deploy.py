"""The class set-up's small pieces (deploy/): the nbgitpuller link, the capacity section of
benchmarks/RESULTS.md, and deploy/ holding only what an instructor deploys. The hub itself is
tested live by `make class-test` (tests/class/, with its harness in tests/class/localhub/).
"""

import ast
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from benchmarks.class_capacity import END, START, kept_section, with_section
from deploy.nbgitpuller_link import link

pytestmark = pytest.mark.path_independent

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
# what only a test harness imports: pytest, and the clients the class test drives a hub with
TEST_ONLY = {"pytest", "psutil", "websocket", "playwright", "localhub", "tests"}


def test_the_link_clones_into_course_and_opens_lesson_00():
    url = urlsplit(link("https://hub.example.org/", "https://git.example.org/course.git", "spring"))
    assert url.path == "/hub/user-redirect/git-pull"
    assert parse_qs(url.query) == {
        "repo": ["https://git.example.org/course.git"],
        "branch": ["spring"],
        "targetpath": ["course"],
        "urlpath": ["lab/tree/course/notebooks/00_start_here.ipynb"],
    }


def test_the_capacity_section_is_replaced_in_place_and_kept_by_make_bench(tmp_path):
    section = f"{START}\nclass table\n{END}\n"
    results = tmp_path / "RESULTS.md"
    results.write_text(with_section("# Benchmark results\n\nexplorers\n", section))
    assert results.read_text() == f"# Benchmark results\n\nexplorers\n\n{section}"
    newer = section.replace("class table", "newer table")
    results.write_text(with_section(results.read_text(), newer))
    assert results.read_text().count(START) == 1 and "newer table" in results.read_text()
    # `make bench` rewrites everything else and keeps the section
    assert with_section("# Benchmark results\n\nnew figures\n", kept_section(results)).endswith(
        newer
    )


def test_deploy_holds_no_test_harness():
    """deploy/ is what an instructor deploys; the class test's hub lives in tests/class/."""
    for path in sorted(DEPLOY.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {
            name.split(".")[0]
            for node in ast.walk(tree)
            for name in (
                [alias.name for alias in node.names] if isinstance(node, ast.Import)
                else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            )
        }  # fmt: skip
        assert not imported & TEST_ONLY, f"{path.name} imports {sorted(imported & TEST_ONLY)}"
        classes = {node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
        assert not classes & {"LocalHub", "Learner", "Kernel", "Accounts", "CourseRepo"}, (
            f"{path.name} defines the class test's harness: {sorted(classes)}"
        )
