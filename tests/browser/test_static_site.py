"""The lessons as static pages (`make html`), read with no kernel: explorers still respond.

The site is built once (tools/build_site.py, what `make html` runs) into artefacts/site/.
Checks on the files need no browser: every lesson rendered and listed, links between lesson
pages, formulas as MathML, no script from anywhere but the one the course inlines, each page
within its size budget. Then Chromium opens each page from disk, with no server: it loads
within the time budget, every control of every explorer changes the picture (operated by
keyboard only), every picture has a text alternative, and the picture for a setting is
the one the live explorer draws for that setting (kept as a palette PNG: every pixel within a
few levels of the live one, so that a page of two hundred pictures fits its budget).
"""

import base64
import io
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tools.static_explorers import PALETTE_TOLERANCE

ROOT = Path(__file__).resolve().parents[2]
LESSONS = sorted((ROOT / "notebooks").glob("[0-9][0-9]*_*.ipynb"))
SITE = ROOT / "artefacts" / "site"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
EXPLORER_REPR = re.compile(r"^(\w+Explorer)\(controls: ")
PAGE_BUDGET_BYTES = 15 * 1024 * 1024
LOAD_BUDGET_S = 2.0


def pixels(png: bytes) -> np.ndarray:
    """A PNG's pixels as RGB integers, whatever its mode (palette or full colour)."""
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), np.int16)


def widget_outputs(path: Path) -> list[dict]:
    nb = json.loads(path.read_text())
    return [
        output["data"]
        for cell in nb["cells"]
        for output in cell.get("outputs", [])
        if WIDGET_VIEW in output.get("data", {})
    ]


def explorers_in(path: Path) -> list[str]:
    names = [EXPLORER_REPR.match("".join(d.get("text/plain", ""))) for d in widget_outputs(path)]
    return [m[1] for m in names if m]


@pytest.fixture(scope="session")
def site():
    shutil.rmtree(SITE, ignore_errors=True)
    subprocess.run(
        [sys.executable, "-m", "tools.build_site", str(SITE), *map(str, LESSONS)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    return SITE


# ---------------------------------------------------------------- the files


def test_every_lesson_is_rendered_and_listed(site):
    index = (site / "index.html").read_text()
    for lesson in LESSONS:
        assert (site / f"{lesson.stem}.html").is_file()
        assert f'href="{lesson.stem}.html"' in index


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_every_explorer_is_playable_and_every_other_widget_shows_its_fallback(path, site):
    page = (site / f"{path.stem}.html").read_text()
    found = re.findall(r'<figure class="course-explorer" data-explorer="(\w+)"', page)
    assert found == explorers_in(path)
    assert page.count("This page shows") == len(found)  # says it is precomputed, beside each
    others = [d for d in widget_outputs(path) if not EXPLORER_REPR.match("".join(d["text/plain"]))]
    for data in others:  # concept checks: their question and folded answer, as HTML
        if "text/html" in data:
            assert "".join(data["text/html"]) in page
    assert f'<script type="{WIDGET_VIEW}">' not in page, (
        "nbconvert chose a live widget view (the notebook stores widget state?): "
        "it would need JavaScript from the internet and shows nothing without it"
    )


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_links_between_lessons_point_at_rendered_pages(path, site):
    page = (site / f"{path.stem}.html").read_text()
    assert not re.search(r'href="\d\d[a-z]?_[\w-]+\.ipynb', page)


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_only_the_inlined_course_script_and_formulas_as_mathml(path, site):
    page = (site / f"{path.stem}.html").read_text()
    scripts = re.findall(r"<script\b([^>]*)>", page)
    assert all("src=" not in attributes for attributes in scripts), "no script from elsewhere"
    code = [a for a in scripts if 'type="application/json"' not in a]
    assert len(code) == (1 if explorers_in(path) else 0)  # explorers.js, once
    nb = json.loads(path.read_text())
    markdown = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    formulas = len(re.findall(r"\$\$.+?\$\$|\$[^$\n]+?\$", markdown, re.S))
    assert page.count("<math ") >= formulas
    text = re.sub(r"<(pre|code|script)\b.*?</\1>", "", page, flags=re.S)
    assert "$$" not in text and not re.search(r"\\(frac|sqrt|operatorname)\b", text)


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_each_page_is_within_its_size_budget(path, site):
    assert (site / f"{path.stem}.html").stat().st_size < PAGE_BUDGET_BYTES


def test_math_in_code_is_left_alone():
    from tools.build_site import math_to_mathml

    out = math_to_mathml("cost `$5` and $d_k$, then\n$$\\sqrt{d_k}$$\n```\n$HOME\n```")
    assert "`$5`" in out and "```\n$HOME\n```" in out
    assert out.count("<math ") == 2 and 'display="block"' in out and "<msqrt>" in out


# ---------------------------------------------------------------- in Chromium, from disk


@pytest.fixture(scope="module")
def page(chromium):
    page = chromium.new_page(viewport={"width": 1280, "height": 1000})
    page.set_default_timeout(15_000)
    yield page
    page.close()


def shown(figure) -> str:
    return figure.locator("img.course-picture").get_attribute("src")


def press_to_change(page, control) -> None:
    """Operate one control with the keyboard only, as a learner without a mouse would."""
    control.focus()
    kind = control.evaluate("el => el.type || el.tagName.toLowerCase()")
    if kind == "checkbox":
        page.keyboard.press("Space")
    elif kind == "range":
        at_end = control.evaluate("el => Number(el.value) === Number(el.max)")
        page.keyboard.press("ArrowLeft" if at_end else "ArrowRight")
    else:  # a <select>: the next option, or the previous one at the end of the list
        at_end = control.evaluate("el => el.selectedIndex === el.options.length - 1")
        page.keyboard.press("ArrowUp" if at_end else "ArrowDown")


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_page_loads_from_disk_and_every_control_changes_the_picture(path, site, page):
    start = time.perf_counter()
    page.goto((site / f"{path.stem}.html").as_uri(), wait_until="load")
    loaded = time.perf_counter() - start
    assert loaded < LOAD_BUDGET_S, f"{path.stem}: {loaded:.2f} s to load"
    figures = page.locator("figure.course-explorer")
    assert figures.count() == len(explorers_in(path))
    for f in range(figures.count()):
        figure = figures.nth(f)
        picture = figure.locator("img.course-picture")
        assert picture.get_attribute("alt").strip(), "every picture needs a text alternative"
        controls = figure.locator("[data-control]")
        data = json.loads(figure.locator("script.course-explorer-data").text_content())
        assert controls.count() == len(data["labels"]) > 0
        for c in range(controls.count()):
            control = controls.nth(c)
            label = control.evaluate(
                "el => (el.labels && el.labels[0] ? el.labels[0].textContent : '').trim()"
            )
            assert label, "every control has a visible label"
            if control.evaluate("el => el.type") == "checkbox":  # only a switch is a checkbox
                index = int(control.get_attribute("data-control"))
                assert sorted(data["labels"][index]) == ["off", "on"], (label, data["labels"])
            before, alt_before = shown(figure), picture.get_attribute("alt")
            press_to_change(page, control)
            after = shown(figure)
            readout = figure.locator(".course-readout").inner_text()
            assert after != before or picture.get_attribute("alt") != alt_before, (
                f"{figure.get_attribute('data-explorer')}: control {label!r} changed nothing"
            )
            assert readout.strip()


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_the_picture_for_a_setting_is_the_live_explorers(path, site, page):
    """Pick a setting in the page, build the explorer in Python, set it there: same PNG."""
    from course_lib import widgets

    page.goto((site / f"{path.stem}.html").as_uri(), wait_until="load")
    figures = page.locator("figure.course-explorer")
    for f in range(figures.count()):
        figure = figures.nth(f)
        data = json.loads(figure.locator("script.course-explorer-data").text_content())
        controls = figure.locator("[data-control]")
        for c in range(controls.count()):  # one step on every control, then compare
            press_to_change(page, controls.nth(c))
        key = ",".join(
            str(controls.nth(c).evaluate(
                "el => el.type === 'checkbox' ? JSON.parse(el.dataset.order)[el.checked ? 1 : 0]"
                " : Number(el.value)"
            ))
            for c in range(controls.count())
        )  # fmt: skip
        explorer = getattr(widgets, figure.get_attribute("data-explorer"))()
        settings = explorer.settings()
        for name, index in zip(settings, map(int, key.split(",")), strict=True):
            explorer.controls[name].value = settings[name][index]
        src = shown(figure)
        assert src == "data:image/png;base64," + data["pictures"][key]["png"]
        # the page keeps a palette copy of the picture (tools/static_explorers.compact_png):
        # the same size, and no pixel further than the palette's tolerance from the live one
        on_page = pixels(base64.b64decode(src.split(",", 1)[1]))
        live = pixels(bytes(explorer.image.value))
        assert on_page.shape == live.shape and np.abs(on_page - live).max() <= PALETTE_TOLERANCE, (
            f"{figure.get_attribute('data-explorer')} at {explorer.values()}: the page's "
            "picture is not what the live explorer draws"
        )
