"""Helpers the test files share (pytest puts tests/ on sys.path: `from helpers import ...`)."""

import functools
import importlib.util
import subprocess
from pathlib import Path

import nbformat
import torch

ROOT = Path(__file__).resolve().parents[1]


def stub(*args, **kwargs):
    """What a workspace copy holds before the learner writes the exercise."""
    raise NotImplementedError("Exercise: write your code here")


def verdict(check, fn, capsys) -> str:
    """What a checker prints about fn, as the learner reads it."""
    check(fn)
    return capsys.readouterr().out.strip()


def lesson_cells(notebook) -> list:
    """The cells of lesson `notebook` (a path), read afresh each time: a test may change them."""
    return nbformat.read(notebook, as_version=4).cells


def lesson_markdown(notebook) -> str:
    """The prose of lesson `notebook`: its markdown cells, each run of white space folded to one
    space, so that a test finds a sentence wherever the cell breaks its lines."""
    text = "\n".join(c.source for c in lesson_cells(notebook) if c.cell_type == "markdown")
    return " ".join(text.split())


def lesson_code(notebook) -> str:
    """The sources of lesson `notebook`'s code cells, one after another."""
    return "\n".join(c.source for c in lesson_cells(notebook) if c.cell_type == "code")


def lesson_outputs(notebook) -> str:
    """The text that lesson `notebook`'s code cells printed, as stored with them, one output
    after another."""
    cells = lesson_cells(notebook)
    return "\n".join(o.get("text", "") for c in cells if c.cell_type == "code" for o in c.outputs)


def printed_by_cell(notebook) -> list[str]:
    """What each code cell of lesson `notebook` printed, as stored: one string per cell, for a
    test that reads one cell's table."""
    cells = lesson_cells(notebook)
    return ["".join(o.get("text", "") for o in c.outputs) for c in cells if c.cell_type == "code"]


def stored_stdout(cells, marker: str) -> str:
    """What the first code cell among `cells` whose source holds `marker` printed to stdout, as
    stored with it."""
    cell = next(c for c in cells if c.cell_type == "code" and marker in c.source)
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


def solution_cells(notebook, namespace: dict, source=lambda s: s) -> dict:
    """`namespace` after running each exercise cell of lesson `notebook` (a path), through
    `source` (course_lib.workspace.stub_solutions: the learner's stubs)."""
    for cell in lesson_cells(notebook):
        if cell.metadata.get("nbgrader", {}).get("solution"):
            exec(source(cell.source), namespace)
    return namespace


def assert_stubs_not_implemented(notebook, checks, namespace: dict, capsys) -> None:
    """Each check_<name> of `checks` says "not implemented yet" of the workspace's stub of
    <name>, from lesson `notebook`'s exercise cells as the learner's copy holds them."""
    from course_lib.workspace import stub_solutions

    stubs = solution_cells(notebook, namespace, stub_solutions)
    for check in checks:
        name = check.__name__.removeprefix("check_")
        assert "not implemented yet" in verdict(check, stubs[name], capsys), name


def assert_hints(check, wrong: dict, capsys) -> None:
    """Each wrong function in {hint: fn} fails the check with a message containing its hint."""
    for hint, fn in wrong.items():
        out = verdict(check, fn, capsys)
        assert out.startswith("TRY AGAIN") and hint in out, (hint, out)


def set_controls(explorer, **values) -> dict:
    """Move the explorer's controls named in `values` to those values, as a learner would;
    returns the explorer's state() after."""
    for name, value in values.items():
        explorer.controls[name].value = value
    return explorer.state()


def picture(explorer) -> bytes:
    """The PNG an explorer shows right now."""
    return bytes(explorer.image.value)


def notebook_functions(*names: str) -> dict:
    """The exercise functions `names` as the course's own lessons define them, read and run as
    a later lesson gets them (course_lib.mywork.collect); each must be the lesson's own. Read
    once per process for each set of names: the functions are the lessons' solutions, which
    no test changes."""
    return dict(_notebook_functions(names))


@functools.cache
def _notebook_functions(names: tuple[str, ...]) -> tuple:
    from pathlib import Path

    from course_lib.mywork import collect

    work = collect(names, Path(__file__).resolve().parent.parent / "notebooks")
    assert all(origin.endswith(": yours") for origin in work.origin.values()), work.origin
    return tuple(work.functions.items())


def assert_fused_path_matches_scratch(layer, x, mask) -> None:
    """An attention layer's fused path (its plain forward) and its from-scratch path (asked for
    the weights) give the same output and the same gradient of `x` (x requires its gradient)."""
    from torch.testing import assert_close

    fused = layer(x, mask)
    scratch, _ = layer(x, mask, return_weights=True)
    assert_close(fused, scratch)
    (g_fused,) = torch.autograd.grad(fused.square().sum(), x)
    (g_scratch,) = torch.autograd.grad(scratch.square().sum(), x)
    assert_close(g_fused, g_scratch)


def stack_inputs(seed, B=2, T=8, D=16, dtype=torch.float32):
    """Input x and probe (B, T, D) for lesson 08's stacks, from seed 100 + seed."""
    g = torch.Generator().manual_seed(100 + seed)
    return torch.randn(B, T, D, generator=g, dtype=dtype), torch.randn(
        B, T, D, generator=g, dtype=dtype
    )


def tree_files(*pathspecs: str) -> list[str]:
    """The course's files as git sees them (a clone's, plus new ones not ignored), relative to
    the repository's top; only those matching pathspecs (e.g. "*.py") when given."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", *pathspecs],
        cwd=ROOT, check=True, capture_output=True,
    ).stdout.decode()  # fmt: skip
    return [name for name in listed.split("\0") if name and (ROOT / name).is_file()]


def build_script():
    """The repository's setup.py as a module (what it carries into a wheel), not run."""
    spec = importlib.util.spec_from_file_location("course_build", ROOT / "setup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def failed_with_hint(exercise, fn, bug=None, words=(), judge=None):
    """`judge(fn)` fails, `judge` being the lesson's own check of `exercise` where it has one
    (lesson 13b's run_forward, say), else run(exercise, fn): see verdict_failed_with_hint.
    Returns the Verdict."""
    from course_lib.exercises.core import run

    result = run(exercise, fn) if judge is None else judge(fn)
    return verdict_failed_with_hint(result, exercise, bug, words)


def verdict_failed_with_hint(result, exercise, bug=None, words=()):
    """`result`, a Verdict on `exercise`, is a failure; with `bug`, it is that bug, whose cause
    is the first hint (an in-place change and a result without its gradient have their own
    messages); each of `words` is in the message; the last hint points at the lesson."""
    assert not result.passed, result.message
    if bug is not None:
        assert result.bug == bug, result.message
        causes = [b.cause for b in exercise.bugs if b.name == bug]
        if bug in ("in place", "no gradient"):  # the core's own failures, no Bug entry
            assert causes == [], causes
        else:
            assert causes and result.steps[0] == causes[0], result.steps
    for word in words:
        assert word in result.message, result.message
    assert result.steps[-1] == f"See {exercise.idea}."
    return result


def failed_without_gradient(exercise, fn):
    """run(exercise, fn) fails because its result carries no gradient, and says so."""
    from course_lib.exercises.core import NO_GRADIENT

    result = failed_with_hint(exercise, fn, "no gradient")
    assert result.steps[0] == NO_GRADIENT[1] and "no gradient flows" in result.message
    return result


def refused_as_forbidden(exercise, fn, called, right=False):
    """A learner's function that calls `called`, a course function the exercise forbids: told
    so, with the exercise's forbidden hint, whatever its numbers. With `right`, fn is a right
    answer: it passes every case once nothing is forbidden, so the list is all that stops it."""
    from dataclasses import replace

    from course_lib.exercises.core import run

    if right:
        assert run(replace(exercise, forbidden=()), fn).passed
    result = failed_with_hint(exercise, fn, words=[f"your function calls {called}"])
    assert result.bug == "forbidden" and result.steps[0] == exercise.forbidden_hint
    return result
