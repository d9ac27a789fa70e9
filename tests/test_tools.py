"""tools/ is a package: its scripts run as `python -m tools.<name>` and are imported as
`tools.<name>`, so nothing in the course edits sys.path to find them (or any helper code)."""

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# the integrator's part of the refactor: test_static_site imports tools.build_site there
NOT_YET = {"tests/browser/test_static_site.py"}

pytestmark = pytest.mark.path_independent


def python_files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "*.py"],
        cwd=ROOT, check=True, capture_output=True,
    ).stdout.decode()  # fmt: skip
    return [name for name in listed.split("\0") if name and (ROOT / name).is_file()]


def test_tools_is_a_package():
    assert (ROOT / "tools" / "__init__.py").is_file()


def test_no_module_edits_sys_path():
    here = Path(__file__).resolve().relative_to(ROOT).as_posix()
    edits = [
        name
        for name in python_files()
        if name != here
        and name not in NOT_YET
        and any(f"sys.path.{verb}(" in (ROOT / name).read_text() for verb in ("insert", "append"))
    ]
    assert edits == [], f"sys.path edited in {edits}: import tools.<name> from the repository root"
