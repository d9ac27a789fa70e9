"""Your functions from earlier lessons, read from your own notebooks (lesson 01b on).

The course builds one transformer across the lessons: lesson 02b's attention goes into
lesson 04a's multi-head attention, which gets lesson 06's rotary embedding, which goes into
lesson 08's block, which lesson 11a stacks into a model. `earlier_work("attention", ...)`
gives a later lesson the functions you wrote, so the model at the end is made of your code.

It reads the lesson notebooks next to the one running (your workspace copies when you work
in `workspace/`, the course's solved lessons in `notebooks/`), takes each exercise cell
(the cells nbgrader marks as solutions) and runs only its imports and its `def`/`class`
statements, in lesson order: lesson 04a's multihead finds lesson 02b's attention there. Each
notebook's cells see what came before them and the notebook's own `mine = earlier_work(...)`,
bound to those functions as they stand at that point (lesson 11a's MyTransformer calls
`mine.multihead`, and lesson 11b gets that class working). Nothing else in those
notebooks runs.

It runs no checks: a function of yours whose `def` runs without error is handed over as you
wrote it, whether or not it passed its check (`course_lib.bigram.yours_if_it_passes`, which
lessons 01 to 03b use on their own exercises, is the rule that checks). An exercise you have
not written yet (its cell still raises NotImplementedError) is replaced by the course's own
version (for MyTransformer, a class, its stand-in: the course's model built from the same
arguments), and `earlier_work` says so: skipping an exercise never blocks a later lesson.
"""

import ast
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import nbformat

from course_lib.exercises import (
    LESSONS,
    all_exercises,
    former_files,
    lesson_file,
    lesson_label,
)
from course_lib.exercises.stub import is_stub


@dataclass
class Work:
    """The functions found, by name, and for each where it came from (lesson 01b)."""

    functions: dict = field(default_factory=dict)
    origin: dict = field(default_factory=dict)  # name -> "yours" or why it is the course's

    def namespace(self) -> SimpleNamespace:
        return SimpleNamespace(**self.functions)

    def report(self) -> str:
        width = max(map(len, self.origin), default=0)
        return "\n".join(f"{name:<{width}}  {why}" for name, why in self.origin.items())


def _exercise_cells(path: Path) -> tuple[list[str], list[str], list[tuple[str, list[str]]]]:
    """(import sources of the whole notebook, sources of its exercise cells, and each
    `name = earlier_work("a", "b", ...)` of its other cells as (name, ["a", "b", ...]))."""
    notebook = nbformat.read(path, as_version=4)
    imports, exercises, handed = [], [], []
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        source = "\n".join(
            line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!"))
        )
        if cell.metadata.get("nbgrader", {}).get("solution"):
            exercises.append(source)
            continue
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        imports += [ast.unparse(n) for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
        handed += [found for n in tree.body if (found := _handed(n)) is not None]
    return imports, exercises, handed


def _handed(node) -> tuple[str, list[str]] | None:
    """(name, the exercises asked for) when node is `name = earlier_work("a", ...)`."""
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
        return None
    call, target = node.value, node.targets[0]
    if not (isinstance(target, ast.Name) and isinstance(call, ast.Call)):
        return None
    if not (isinstance(call.func, ast.Name) and call.func.id == "earlier_work"):
        return None
    names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return target.id, names


def _course_version(exercise):
    """What stands in for an exercise not written: its stand-in (a class), else its reference."""
    return exercise.stand_in if exercise.stand_in is not None else exercise.reference


def _resolved(name: str, namespace: dict, origin: dict, exercise):
    """Exercise `name` as the lessons read so far define it: yours, else the course's."""
    if origin.get(name, "").startswith("yours") and name in namespace:
        return namespace[name]
    return _course_version(exercise)


def earlier_work(*names: str, folder=None, quiet: bool = False) -> SimpleNamespace:
    """Your versions of the exercises `names` (say "attention", "split_heads"), as attributes
    (lesson 01b).

    Looks in `folder` (default: the folder this notebook runs in). Prints one line per name:
    yours, or the course's and why. Returns a namespace: `mine = earlier_work("attention")`,
    then `mine.attention(q, k, v)`.
    """
    work = collect(names, Path.cwd() if folder is None else Path(folder))
    if not quiet:
        print(work.report())
    return work.namespace()


def collect(names, folder: Path) -> Work:
    """The exercises `names` as the lessons in folder define them, yours where written and
    running, else the course's, each with where it came from (lesson 01b)."""
    exercises = {e.name: e for e in all_exercises()}
    unknown = [n for n in names if n not in exercises]
    if unknown:
        raise ValueError(f"names: expected exercise names ({', '.join(exercises)}), got {unknown}")
    wanted = {exercises[n].lesson for n in names}
    order = list(LESSONS)
    last = max((order.index(key) for key in wanted), default=0)
    namespace: dict = {"__name__": "earlier_work"}
    origin: dict = {}
    # every exercise up to the last lesson asked for, in course order: later ones call earlier
    # ones. A lesson that replaced earlier ones reads their files first (a workspace keeps them,
    # with the learner's work), then its own, whose stubs leave a function found there alone.
    # A former file that two lessons replaced (a lesson split in two) is read once, for the
    # first: read again for the second, it would undo what the learner wrote in the first.
    done: set = set()
    for lesson in order[: last + 1]:
        current = lesson_file(folder, lesson)
        former = [p for p in former_files(folder, lesson) if p not in done]
        done.update(former)
        for path in [*former, *([current] if current else [])]:
            imports, cells, handed = _exercise_cells(path)
            # this notebook's globals: everything before it, and its own `mine`, which its
            # functions read when they run (a later notebook's `mine` must not replace it)
            scope = dict(namespace)
            for source in imports:
                try:
                    exec(compile(source, str(path), "exec"), scope)
                except Exception:  # an import the learner's machine lacks: cells may not need it
                    continue
            for target, wanted in handed:
                scope[target] = SimpleNamespace(**{
                    n: _resolved(n, namespace, origin, exercises[n]) for n in wanted
                    if n in exercises
                })  # fmt: skip
            where = "" if path == current else f" in {path.name}"
            for source in cells:
                _run_definitions(source, path, scope, origin, where)
            namespace.update({k: v for k, v in scope.items() if k not in dict(handed)})
    work = Work()
    for name in names:
        reason = origin.get(name, "the course's (no definition of yours found in this folder)")
        work.functions[name] = _resolved(name, namespace, origin, exercises[name])
        work.origin[name] = f"lesson {lesson_label(exercises[name].lesson)}: {reason}"
    return work


def _run_definitions(source: str, path: Path, namespace: dict, origin: dict, where="") -> None:
    """Run the imports and defs of one exercise cell; note each def as yours or a stub. A stub
    leaves alone a function of yours found earlier (in the lesson's former file)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as err:
        for name in _defined_names_loosely(source):
            if not origin.get(name, "").startswith("yours"):
                origin[name] = f"the course's (your cell has a syntax error, line {err.lineno})"
        return
    exercises = {e.name: e for e in all_exercises()}
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            module = ast.Module(body=[node], type_ignores=[])
            exec(compile(module, str(path), "exec"), namespace)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            if is_stub(node) and node.name in exercises:
                if origin.get(node.name, "").startswith("yours"):
                    continue
                namespace[node.name] = _course_version(exercises[node.name])
                origin[node.name] = "the course's (yours is not written yet)"
                continue
            module = ast.Module(body=[node], type_ignores=[])
            try:
                exec(compile(module, str(path), "exec"), namespace)
            except Exception as err:  # a decorator or default argument that fails
                origin[node.name] = f"the course's (yours failed to define: {err})"
                continue
            origin[node.name] = f"yours{where}"


def _defined_names_loosely(source: str) -> list[str]:
    return [
        line.split("def ", 1)[1].split("(", 1)[0].strip()
        for line in source.splitlines()
        if line.lstrip().startswith("def ")
    ]
