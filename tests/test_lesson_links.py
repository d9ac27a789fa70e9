"""Every link a lesson's prose makes inside the course lands somewhere: a notebook link names a
notebook that exists (in notebooks/ for the course copy, learner/ for the learner's), a link to
the README names one of its headings, and each lesson but the last says where to go next."""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LESSONS = sorted((ROOT / "notebooks").glob("[0-9][0-9]*_*.ipynb"))
COPIES = sorted((ROOT / "learner").glob("[0-9][0-9]*_*.ipynb"))
LINK = re.compile(r"\]\(([^)\s]+)\)")


def prose(path: Path) -> str:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def slug(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading (where the README is read)."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def readme_anchors() -> set[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)  # a comment in a code block
    return {slug(m[1]) for m in re.finditer(r"^#+ (.+)$", text, re.M)}


def test_slug_matches_githubs_rule():
    assert (
        slug("The order, and lessons that were renamed")
        == "the-order-and-lessons-that-were-renamed"
    )
    assert slug("CI for a fork") == "ci-for-a-fork"


@pytest.mark.parametrize("path", LESSONS + COPIES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_course_link_lands(path):
    anchors = readme_anchors()
    broken = []
    for target in LINK.findall(prose(path)):
        if target.startswith(("http://", "https://", "#", "mailto:")):
            continue
        file, _, anchor = target.partition("#")
        if not (path.parent / file).exists():
            broken.append(target)
        elif file.endswith("README.md") and anchor and anchor not in anchors:
            broken.append(target)
    assert not broken, f"{path.name}: links that land nowhere: {broken}"


@pytest.mark.parametrize("path", LESSONS[:-1], ids=lambda p: p.stem)
def test_each_lesson_links_the_next_one(path):
    following = LESSONS[LESSONS.index(path) + 1].name
    assert f"]({following})" in prose(path), f"{path.name} never links {following}"
