"""pyproject.toml's requires-python admits exactly the Pythons the README says the course has
run on (README, "Python and torch versions"): a new Python is claimed once it has run."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SECTION = "## Python and torch versions"


def minors_that_ran(readme: str) -> list[int]:
    """The minor versions of Python 3 in the section's table, one row per run (`| 3.12.1 |`)."""
    section = readme.split(SECTION, 1)[1].split("\n## ", 1)[0]
    return sorted({int(minor) for minor in re.findall(r"^\| 3\.(\d+)\.\d+ \|", section, re.M)})


def test_the_table_is_read_row_by_row():
    readme = f"{SECTION}\n\n| Python | torch |\n|---|---|\n| 3.11.7 | a |\n| 3.13.0 | b |\n| 3.11.7 | c |\n\n## Next\n| 3.14.0 | d |\n"  # noqa: E501
    assert minors_that_ran(readme) == [11, 13]


def test_requires_python_admits_the_versions_that_ran_and_no_others():
    minors = minors_that_ran(ROOT.joinpath("README.md").read_text(encoding="utf-8"))
    assert minors == list(range(minors[0], minors[-1] + 1)), f"a Python between never ran: {minors}"
    project = tomllib.loads(ROOT.joinpath("pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["requires-python"] == f">=3.{minors[0]},<3.{minors[-1] + 1}"
