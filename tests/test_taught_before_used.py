"""Taught before used: a lesson uses only what it or an earlier lesson taught.

Two checks on every lesson of the published order:
- the code: every `course_lib` function or class a lesson's code cells use (read from their
  syntax tree: names imported from course_lib, and attributes of course_lib modules) names in
  its docstring the lesson that introduces it, "(lesson 06)", and that lesson is this one or
  an earlier one;
- the prose: each term of TERMS first appears in its markdown in the lesson that teaches it,
  never in an earlier one, except in a sentence (or table row) that links to a later lesson:
  a pointer forward ("[lesson 08](08_transformer_block.ipynb) shows why") names what is coming.

The lessons before the move to the published order (01_attention_qkv ... 06_capstone, in git
history before December 2026) failed both: lesson 02_scaling used the trained checkpoints'
loader, 03_multihead the detectors, and their prose named RoPE, layer norm and AdamW before
the lessons that teach them; test_both_checks_catch_what_a_lesson_uses_too_early keeps a
lesson of that kind failing here.
"""

import ast
import importlib
import inspect
import re
from pathlib import Path

import nbformat
import pytest

pytestmark = pytest.mark.path_independent

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
LESSONS = sorted(NOTEBOOKS.glob("[0-9][0-9]*_*.ipynb"))

# term -> the lesson that teaches it; a pattern where the plain word would catch other words
TERMS = {
    "embedding": "01",
    "logits": "01",
    "floor": "01",
    "validation loss": "01",
    "causal mask": "02a",
    "padding": "02b",
    "multi-head": "04a",
    "cross-attention": "05",
    "encoder": "05",
    "decoder": "05",
    "sinusoidal": "06",
    "RoPE": "06",
    "learned positions": "07b",
    "residual": "08",
    "layer norm": "08",
    "feed-forward": "08",
    "GELU": "09",
    "temperature": "10",
    "top-k": "10",
    "AdamW": "11b",
    "warm-up": "11b",
    "training loop": "11b",
    "checkpoint": "11b",
    "induction head": "12",
    "knock-out": "12",
    "knock out": "12",
    "KV cache": "13a",
    "grouped-query": "13c",
    "multi-query": "13c",
    "sliding window": "15a",
    "rolling cache": "15a",
    "attention sink": "15a",
    "online softmax": "17a",
    "log-sum-exp": "17b",
    "fine-tun": "16a",
    "position interpolation": "16a",
    "NTK-aware": "16a",
    "YaRN": "16b",
}
_LESSON = re.compile(r"\blessons? (\d\d[a-z]?)\b", re.IGNORECASE)


def number(path: Path) -> str:
    """A lesson's label, "04" or (a lesson split in two) "02a": labels compare in course order."""
    return path.name.split("_")[0]


def code_tree(notebook) -> ast.Module:
    """Every code cell of a notebook as one module (IPython's % and ! lines left out)."""
    body = []
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        lines = [ln for ln in cell.source.splitlines() if not ln.lstrip().startswith(("%", "!"))]
        try:
            body += ast.parse("\n".join(lines)).body
        except SyntaxError:  # a cell that is meant to fail to parse: none today
            continue
    return ast.Module(body=body, type_ignores=[])


def course_names(tree: ast.Module) -> dict[str, object]:
    """'module.name' -> object for every course_lib function or class the code uses."""
    modules: dict[str, object] = {}  # local name -> a course_lib module
    used: dict[str, object] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("course_lib"):
            module = importlib.import_module(node.module)
            for alias in node.names:
                value = getattr(module, alias.name, None)
                if value is None:
                    value = importlib.import_module(f"{node.module}.{alias.name}")
                if inspect.ismodule(value):
                    modules[alias.asname or alias.name] = value
                else:
                    used[f"{node.module}.{alias.name}"] = value
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("course_lib"):
                    modules[alias.asname or alias.name] = importlib.import_module(alias.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            module = modules.get(node.value.id)
            value = getattr(module, node.attr, None) if module is not None else None
            if value is not None and not inspect.ismodule(value):
                used[f"{module.__name__}.{node.attr}"] = value
    return {k: v for k, v in used.items() if inspect.isfunction(v) or inspect.isclass(v)}


def introduced_in(value) -> str | None:
    """The lesson a function's or class's docstring names first, else its module's; None if
    neither names one."""
    module = inspect.getmodule(value)
    for doc in (inspect.getdoc(value), inspect.getdoc(module) if module else None):
        found = _LESSON.search(doc or "")
        if found:
            return found.group(1).lower()
    return None


def used_too_early(path: Path) -> list[str]:
    here = number(path)
    names = course_names(code_tree(nbformat.read(path, as_version=4)))
    late = []
    for name, value in sorted(names.items()):
        lesson = introduced_in(value)
        if lesson is not None and lesson > here:
            late.append(f"{name} (lesson {lesson})")
    return late


_LINK = re.compile(r"\]\((\d\d[a-z]?)_[\w-]+\.ipynb")
_ITEM = re.compile(r"\n(?=\s*(?:[|*-]|\d+\.)\s)")  # a new table row or list item
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z*`$(\[])")


def sentences(markdown: str) -> list[str]:
    """A cell's prose as sentences and table rows, each on one line."""
    found = []
    for paragraph in re.split(r"\n\s*\n", markdown):
        for item in _ITEM.split(paragraph):
            found += _SENTENCE.split(" ".join(item.split()))
    return found


def prose(notebook, here: str) -> str:
    """The lesson's markdown, less every sentence that links to a later lesson."""
    kept = []
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            for sentence in sentences(cell.source):
                if not any(n > here for n in _LINK.findall(sentence)):
                    kept.append(sentence)
    return "\n".join(kept)


def terms_too_early(path: Path) -> list[str]:
    here = number(path)
    text = prose(nbformat.read(path, as_version=4), here)
    early = []
    for term, lesson in TERMS.items():
        if here >= lesson:
            continue
        flags = 0 if term.isupper() or term == "RoPE" else re.IGNORECASE
        if re.search(rf"(?<![\w-]){re.escape(term)}(?![\w-])", text, flags):
            early.append(f"{term!r} (lesson {lesson})")
    return early


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_a_lesson_uses_no_course_function_a_later_lesson_introduces(path):
    late = used_too_early(path)
    assert not late, f"{path.name} uses what a later lesson introduces: {', '.join(late)}"


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_a_lesson_names_no_term_a_later_lesson_teaches(path):
    early = terms_too_early(path)
    assert not early, f"{path.name} names terms a later lesson teaches: {', '.join(early)}"


def test_both_checks_catch_what_a_lesson_uses_too_early(tmp_path):
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    lesson = tmp_path / "03_early.ipynb"
    nbformat.write(new_notebook(cells=[
        new_markdown_cell("Each block adds a residual and a layer norm. [Lesson 09](09_x.ipynb) "
                          "shows the GELU.\n\n| [10](10_y.ipynb) | top-k |"),
        new_code_cell("from course_lib import sampling\nfrom course_lib.show import bounded\n"
                      "sampling.rule_check"),
    ]), lesson)  # fmt: skip
    assert introduced_in(importlib.import_module("course_lib.sampling").rule_check) == "10"
    assert used_too_early(lesson) == ["course_lib.sampling.rule_check (lesson 10)"]
    # GELU and top-k sit in sentences that link to the lessons that teach them
    assert terms_too_early(lesson) == ["'residual' (lesson 08)", "'layer norm' (lesson 08)"]
