"""Hygiene of every lesson notebook: what strict nbval and a learner both rely on."""

import json
import re
from pathlib import Path

import pytest

# notebook files only: the same on every kernel path (`make test` runs it on one)
pytestmark = pytest.mark.path_independent

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
WIDGET = "application/vnd.jupyter.widget-view+json"
IGNORE_TAGS = {"nbval-ignore-output", "nbval-skip"}
IGNORE_MARKERS = ("# NBVAL_IGNORE_OUTPUT", "# NBVAL_SKIP")
LOCAL_PATH = re.compile(r"(/(?:root|home|Users|tmp|work)/|site-packages|\.pyenv|[A-Z]:\\\\)")
ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")
# an explorer's still carries its picture as base64, which can spell 0x and six hex digits by
# chance (05_encoder_decoder's did): the picture is left out, as tests/sanitize.cfg leaves it
# out of strict nbval's comparison
PICTURE = re.compile(r"data:image/png;base64,[A-Za-z0-9+/=]+")


def load(path):
    return json.loads(path.read_text())


def code_cells(nb):
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


def text_of(output) -> str:
    parts = [output.get("text", "")]
    for value in output.get("data", {}).values():
        if isinstance(value, str | list):
            parts.append(value if isinstance(value, str) else "".join(value))
    return "".join(p if isinstance(p, str) else "".join(p) for p in parts)


def ignored(cell) -> bool:
    tags = set(cell.get("metadata", {}).get("tags", []))
    source = "".join(cell["source"])
    return bool(tags & IGNORE_TAGS) or any(m in source for m in IGNORE_MARKERS)


def test_there_are_lessons():
    assert [p.name for p in NOTEBOOKS][:1] == ["00_start_here.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_executed_top_to_bottom_with_outputs(path):
    nb = load(path)
    counts = [c["execution_count"] for c in code_cells(nb) if "".join(c["source"]).strip()]
    assert counts == list(range(1, len(counts) + 1)), "run `make notebooks` to re-execute in order"
    assert any(c["outputs"] for c in code_cells(nb)), (
        "no stored outputs: strict nbval would check nothing"
    )
    assert nb["metadata"]["kernelspec"]["name"] == "python3"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_outputs_are_clean(path):
    for index, cell in enumerate(code_cells(load(path))):
        for output in cell["outputs"]:
            assert output["output_type"] != "error", f"code cell {index} stores an error"
            text = text_of(
                {k: v for k, v in output.items() if k != "data"}
                | {
                    "data": {
                        k: v for k, v in output.get("data", {}).items() if k.startswith("text/")
                    }
                }
            )
            text = PICTURE.sub("data:image/png;base64,PNG", text)
            assert not LOCAL_PATH.search(text), f"code cell {index} shows a local path"
            assert not ADDRESS.search(text), f"code cell {index} shows a memory address"
            assert "Traceback" not in text, f"code cell {index} shows a traceback"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_widget_cells_compare_cleanly_or_are_tagged(path):
    """A widget cell's text/plain must be stable; extra outputs (an Output widget's) need a tag."""
    for index, cell in enumerate(code_cells(load(path))):
        views = [o for o in cell["outputs"] if WIDGET in o.get("data", {})]
        if not views or ignored(cell):
            continue
        assert len(cell["outputs"]) == 1, (
            f"code cell {index} shows a widget plus other outputs: tag it nbval-ignore-output"
        )
        plain = "".join(views[0]["data"].get("text/plain", ""))
        assert plain and "model_id" not in plain and not ADDRESS.search(plain)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_lesson_shape(path):
    nb = load(path)
    first = "".join(code_cells(nb)[0]["source"])
    assert "course_lib.set_seed(" in first, "the first code cell should seed everything"
    for cell in nb["cells"]:
        assert "sys.path" not in "".join(cell["source"]), "install course_lib; never edit sys.path"
        assert "MPLBACKEND" not in "".join(cell["source"])
    last = nb["cells"][-1]
    assert last["cell_type"] == "markdown" and re.search(r"\]\([^)]+\)", "".join(last["source"])), (
        "end with a recap and a link onward"
    )
