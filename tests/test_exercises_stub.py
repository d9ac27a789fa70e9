"""course_lib.exercises.stub: the stub's text, recognising a stub, yours or the course's, once."""

import ast
import runpy
import sys
from pathlib import Path

import nbformat
import pytest

from course_lib.exercises import stub
from course_lib.workspace import stub_solutions

ROOT = Path(__file__).resolve().parent.parent
HOME = "course_lib/exercises/stub.py"
# folders of the course's own code (tests/ holds learner-style stubs on purpose)
FOLDERS = ("course_lib", "course_server", "tools", "deploy", "benchmarks", "notebooks")


def test_the_stub_names_its_exercise_and_the_error_says_which():
    assert stub.stub_message("attention") == "Exercise attention: write your code here"
    assert stub.stub_source("attention", "    ").splitlines() == [
        "    # YOUR CODE HERE",
        '    raise NotImplementedError("Exercise attention: write your code here")',
    ]
    assert stub.named_in(stub.not_written("split_heads")) == "split_heads"
    # nbgrader's stub cannot name the exercise: it names none, never a wrong one
    assert stub.named_in(stub.not_written()) is None
    assert stub.named_in(NotImplementedError()) is None
    with pytest.raises(ValueError, match="name"):
        stub.stub_message("two words")


@pytest.mark.parametrize("name", ["attention", None])
def test_a_written_stub_is_recognised_from_its_tree_and_when_it_runs(name):
    source = f"def attention(q, k, v):\n{stub.stub_source(name, '    ')}\n"
    assert stub.is_stub(ast.parse(source).body[0])
    assert not stub.is_stub(ast.parse("def attention(q, k, v):\n    return q\n").body[0])
    namespace = {}
    exec(source, namespace)
    tried = stub.attempt("attention", namespace["attention"], 1, 2, 3)
    assert not tried.ran and tried.missing == "attention"
    assert tried.reason == "yours is not written yet"


def test_yours_or_the_course_s_with_the_reason_in_words():
    def course(x):
        return x + 1

    def calls_a_stub(x):
        raise stub.not_written("split_heads")

    def broken(x):
        return x / "a"

    assert stub.yours_or_course("f", lambda x: x * 10, course, 2) == (20, "yours")
    assert stub.yours_or_course("f", calls_a_stub, course, 2) == (
        3,
        "the course's (yours calls split_heads, which is not written yet)",
    )
    value, why = stub.yours_or_course("f", broken, course, 2)
    assert value == 3 and why.startswith("the course's (yours raised TypeError: ")


def test_the_workspace_and_nbgrader_write_the_module_s_stub(tmp_path, monkeypatch):
    cell = "def attention(q, k, v):\n    # BEGIN SOLUTION\n    return q\n    # END SOLUTION"
    assert stub_solutions(cell) == "def attention(q, k, v):\n" + stub.stub_source(
        "attention", "    "
    )
    monkeypatch.syspath_prepend(str(ROOT / "deploy"))
    sys.modules.pop("nbgrader_course", None)
    import nbgrader_course

    nbgrader_course.prepare(tmp_path, [])

    class Config(dict):
        def __getattr__(self, name):
            return self.setdefault(name, Config())

        def __setattr__(self, name, value):
            self[name] = value

    config = runpy.run_path(str(tmp_path / "nbgrader_config.py"), {"get_config": Config})["c"]
    assert config.ClearSolutions.code_stub == {"python": stub.stub_source()}


def _code_sources():
    """(where, source) of every .py file and every notebook code cell of the course's code."""
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*")):
            where = str(path.relative_to(ROOT))
            if path.suffix == ".py":
                yield where, path.read_text(encoding="utf-8")
            elif path.suffix == ".ipynb" and ".ipynb_checkpoints" not in where:
                notebook = nbformat.read(path, as_version=4)
                for i, cell in enumerate(notebook.cells):
                    if cell.cell_type == "code":
                        lines = cell.source.splitlines()
                        code = [line for line in lines if not line.lstrip().startswith(("%", "!"))]
                        yield f"{where}, cell {i}", "\n".join(code)


def _handles_not_implemented(source: str) -> bool:
    """NotImplementedError named anywhere but as what a raise raises (a stub, an abstract
    method): an except clause, an isinstance test, a comparison with its name."""
    tree = ast.parse(source)
    raised = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            raised.add(id(exc))
    return any(
        (isinstance(n, ast.Name) and n.id == "NotImplementedError" and id(n) not in raised)
        or (isinstance(n, ast.Constant) and n.value == "NotImplementedError")
        for n in ast.walk(tree)
    )


def test_the_stub_and_its_recognition_live_in_one_module():
    """No second stub text and no second NotImplementedError handler in the course's code."""
    texts = [w for w, source in _code_sources() if "write your code here" in source]
    assert texts == [HOME]
    handlers = [w for w, source in _code_sources() if _handles_not_implemented(source)]
    assert handlers == [HOME]
