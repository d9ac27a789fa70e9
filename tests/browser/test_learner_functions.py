"""An explorer running a learner's wrong function says so, in the page, beside the picture.

A scratch notebook in the test's JupyterLab defines an attention with a classic slip (the
softmax taken over the queries instead of the keys) and hands it to lesson 01's explorer, as
the lesson does with the learner's own function. After Run All the readout must say DIFFERS
and name the setting; after the query slider moves, it must name the new query.
"""

import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from test_lessons_in_jupyterlab import ALL_RAN, EXPLORER, IDLE, start_run_all

KERNEL_IDLE = """() => /\\|\\s*Idle/.test(
    document.querySelector('#jp-main-statusbar')?.innerText || '')"""
LESSON_01 = Path(__file__).resolve().parents[2] / "notebooks" / "01_attention_qkv.ipynb"
WRONG_ATTENTION = [
    "import torch\n",
    "from course_lib.widgets import AttentionExplorer\n",
    "\n",
    "\n",
    "def slipped_attention(q, k, v, mask=None):\n",
    "    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5\n",
    "    if mask is not None:\n",
    "        scores = scores.masked_fill(~mask, float('-inf'))\n",
    "    weights = torch.softmax(scores, dim=-2)  # the slip: over the queries\n",
    "    return weights @ v, weights\n",
    "\n",
    "\n",
    "AttentionExplorer(attention=slipped_attention)\n",
]


def scratch_notebook(path, source) -> None:
    """A one-cell notebook with the lessons' own metadata (kernel, language), so JupyterLab
    opens it as it opens a lesson: no kernel picker, nothing to convert."""
    lesson = json.loads(LESSON_01.read_text(encoding="utf-8"))
    cell = {"cell_type": "code", "execution_count": None, "id": "learner-attention",
            "metadata": {}, "outputs": [], "source": source}  # fmt: skip
    notebook = {**lesson, "cells": [cell]}
    path.write_text(json.dumps(notebook, indent=1), encoding="utf-8")


def readout(explorer) -> str:
    return explorer.locator(".widget-html-content").first.inner_text()


@pytest.fixture
def page(lab, browser_context):
    page = browser_context.new_page()
    yield page
    page.close()
    for session in lab.api("/api/sessions"):
        lab.api(f"/api/sessions/{session['id']}", method="DELETE")


def test_a_wrong_learner_attention_is_flagged_in_the_page(lab, page, artefacts):
    name = "zz_learner_attention.ipynb"
    scratch_notebook(lab.root / name, WRONG_ATTENTION)
    page.goto(lab.url(f"/lab/tree/{name}?reset"))
    page.locator(".lm-TabBar-tab.lm-mod-current", has_text=name).wait_for()
    page.wait_for_selector(IDLE, timeout=90_000)
    page.locator(".jp-Notebook .jp-CodeCell").first.wait_for()
    # the kernel itself idle (the status bar says so), not only the notebook's indicator:
    # a Run All clicked while the kernel still starts opens a dialog that blocks the page
    page.wait_for_function(KERNEL_IDLE, timeout=90_000, polling=100)
    start_run_all(page)
    page.wait_for_function(ALL_RAN, arg=1, timeout=120_000, polling=250)
    explorer = page.locator(EXPLORER)
    explorer.wait_for(timeout=30_000)
    first = readout(explorer)
    assert "DIFFERS" in first, first
    query = re.search(r"query (\d+)", first.split("DIFFERS", 1)[1])
    assert query, f"the warning does not name the query setting: {first!r}"

    handle = explorer.locator(".widget-slider .noUi-handle").first
    handle.focus()
    handle.press("ArrowLeft")
    moved = f"query {int(query.group(1)) - 1}"
    try:
        page.wait_for_function(
            "([out, text]) => out.innerText.includes(text)",
            arg=[explorer.element_handle(), moved],
            timeout=10_000,
        )
    except PlaywrightTimeout as error:
        raise AssertionError(
            f"after moving the query, the readout says {readout(explorer)!r}"
        ) from error
    after = readout(explorer)
    assert "DIFFERS" in after and moved in after.split("DIFFERS", 1)[1], after
    explorer.screenshot(path=artefacts / "learner_attention_differs.png")
