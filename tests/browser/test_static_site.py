"""Lessons read without a kernel (nbconvert, GitHub, nbviewer): explorers still show a picture.

Renders every lesson with tools/build_site.py (what `make html` runs) into a temporary folder
and looks for each explorer's stored PNG and each concept check's HTML in the page.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

# builds the site from the stored outputs: the same on every kernel path
pytestmark = [pytest.mark.slow, pytest.mark.path_independent]

ROOT = Path(__file__).resolve().parents[1]
LESSONS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
PROGRESS_BAR = re.compile(r"^\w[\w ]*: +\d+%\|")


def widget_outputs(path: Path) -> list[dict]:
    nb = json.loads(path.read_text())
    return [
        output["data"]
        for cell in nb["cells"]
        for output in cell.get("outputs", [])
        if WIDGET_VIEW in output.get("data", {})
    ]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, str(ROOT / "tools" / "build_site.py"), str(out), *map(str, LESSONS)],
        check=True,
        capture_output=True,
    )
    return out


def test_every_lesson_is_rendered_and_listed(site):
    index = (site / "index.html").read_text()
    for lesson in LESSONS:
        assert (site / f"{lesson.stem}.html").is_file()
        assert f'href="{lesson.stem}.html"' in index


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_every_widget_has_a_picture_or_text_where_widgets_cannot_run(path, site):
    page = (site / f"{path.stem}.html").read_text()
    # a tqdm progress bar is a widget too, but not a picture a reader needs: the lesson prints
    # the numbers it ends with in an ordinary cell
    outputs = [d for d in widget_outputs(path) if not PROGRESS_BAR.search("".join(d["text/plain"]))]
    explorers = [data for data in outputs if "image/png" in data]
    assert all("image/png" in data or "text/html" in data for data in outputs), (
        "a widget output with no image/png or text/html fallback shows as an empty cell"
    )
    for data in explorers:
        png = "".join(data["image/png"]).replace("\n", "")
        assert f'src="data:image/png;base64,{png}"' in page, (
            f"{''.join(data['text/plain'])}: its starting picture is missing from the HTML"
        )
    for data in outputs:
        if "image/png" not in data:
            assert "".join(data["text/html"]) in page
    assert f'<script type="{WIDGET_VIEW}">' not in page, (
        "nbconvert chose a live widget view (the notebook stores widget state?): "
        "it would need JavaScript from the internet and shows nothing without it"
    )


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_links_between_lessons_point_at_rendered_pages(path, site):
    page = (site / f"{path.stem}.html").read_text()
    assert not re.search(r'href="\d\d_[\w-]+\.ipynb', page)


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_pages_load_no_javascript_and_show_formulas_as_mathml(path, site):
    page = (site / f"{path.stem}.html").read_text()
    assert "<script" not in page, "a page must not fetch JavaScript (nbconvert's CDN scripts)"
    nb = json.loads(path.read_text())
    markdown = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    formulas = len(re.findall(r"\$\$.+?\$\$|\$[^$\n]+?\$", markdown, re.S))
    assert page.count("<math ") >= formulas
    text = re.sub(r"<(pre|code)\b.*?</\1>", "", page, flags=re.S)
    assert "$$" not in text and not re.search(r"\\(frac|sqrt|operatorname)\b", text)


def test_math_in_code_is_left_alone():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from build_site import math_to_mathml
    finally:
        sys.path.remove(str(ROOT / "tools"))
    out = math_to_mathml("cost `$5` and $d_k$, then\n$$\\sqrt{d_k}$$\n```\n$HOME\n```")
    assert "`$5`" in out and "```\n$HOME\n```" in out
    assert out.count("<math ") == 2 and 'display="block"' in out and "<msqrt>" in out
