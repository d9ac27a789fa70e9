"""Every lesson fits one sitting: at most 2,500 words of prose, counted as runs of letters in
its markdown cells (so "don't" and "pre-norm" count two each, the stricter count)."""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LESSONS = sorted((ROOT / "notebooks").glob("[0-9][0-9]*_*.ipynb"))
MOST_WORDS = 2500


def prose_words(path: Path) -> int:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    markdown = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return len(re.findall(r"[A-Za-z]+", markdown))


def test_the_count_is_of_runs_of_letters(tmp_path):
    page = {"cells": [{"cell_type": "markdown", "source": ["Don't pre-norm $x_2$; 3 `ids`"]},
                      {"cell_type": "code", "source": ["not counted at all"]}]}  # fmt: skip
    (tmp_path / "n.ipynb").write_text(json.dumps(page))
    assert prose_words(tmp_path / "n.ipynb") == 6  # Don t pre norm x ids


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_each_lesson_is_within_its_word_budget(path):
    assert prose_words(path) <= MOST_WORDS
