"""Yours or the course's: the one place that writes a stub, recognises one, and falls back.

An exercise the learner has not written yet holds a stub in place of the solution:

    # YOUR CODE HERE
    raise NotImplementedError("Exercise attention: write your code here")

`stub_source(name)` writes those lines (the workspace copy, nbgrader's learner version, which
cannot name the exercise and so writes "Exercise: write your code here"). A stub is
recognised in two ways: `is_stub(node)` from a function's syntax tree, without running it
(course_lib.mywork reads earlier lessons that way), and `attempt(name, fn, ...)` from a
NotImplementedError raised while the function runs (the checkers, the explorers, the
lessons' cells). `yours_or_course` runs the learner's function when it is written and runs,
else the course's, and says which, and why, in words.
"""

import ast
from collections.abc import Callable
from dataclasses import dataclass

_LEAD, _TAIL = "Exercise", ": write your code here"


def stub_message(name: str | None = None) -> str:
    """The stub's message: "Exercise NAME: write your code here" ("Exercise: ..." when the
    writer cannot name the exercise, as nbgrader's cannot) (lesson 00)."""
    if name is not None and (not isinstance(name, str) or not name.isidentifier()):
        raise ValueError(f"name: expected an exercise's name (an identifier) or None, got {name!r}")
    return f"{_LEAD} {name}{_TAIL}" if name else f"{_LEAD}{_TAIL}"


def stub_source(name: str | None = None, indent: str = "") -> str:
    """The two lines a stub replaces a solution with, indented by indent (lesson 00)."""
    return f'{indent}# YOUR CODE HERE\n{indent}raise NotImplementedError("{stub_message(name)}")'


def not_written(name: str | None = None) -> NotImplementedError:
    """The error a stub raises for exercise name, for code that must raise it on the learner's
    behalf (lesson 11a's checker, when the learner's class raises one)."""
    return NotImplementedError(stub_message(name))


def named_in(err: BaseException) -> str | None:
    """The exercise a stub's error names ("Exercise split_heads: write ..." -> "split_heads"),
    or None when it names none (nbgrader's stub, a bare NotImplementedError) (lesson 00)."""
    text = str(err)
    lead = f"{_LEAD} "
    if text.startswith(lead) and ":" in text:
        return text.removeprefix(lead).split(":", 1)[0].strip() or None
    return None


def is_stub(node: ast.AST) -> bool:
    """Whether a def (or class) still raises NotImplementedError somewhere in its body: the
    learner has not replaced its stub yet (lesson 04a)."""
    for child in ast.walk(node):
        if isinstance(child, ast.Raise) and child.exc is not None:
            exc = child.exc.func if isinstance(child.exc, ast.Call) else child.exc
            if isinstance(exc, ast.Name) and exc.id == "NotImplementedError":
                return True
    return False


@dataclass(frozen=True)
class Attempt:
    """What running the learner's exercise `name` once gave: its value, or why there is none
    (lesson 04a)."""

    name: str  # the exercise tried
    value: object = None  # what it returned, when it ran
    missing: str | None = None  # the exercise not written yet: name itself, or one it calls
    error: Exception | None = None  # what it raised otherwise

    @property
    def ran(self) -> bool:
        return self.missing is None and self.error is None

    @property
    def reason(self) -> str:
        """In words, on one line: "yours", or why not ("yours is not written yet", ...)."""
        if self.ran:
            return "yours"
        if self.missing not in (None, self.name):
            return f"yours calls {self.missing}, which is not written yet"
        if self.missing is not None:
            return "yours is not written yet"
        said = " ".join(f"{type(self.error).__name__}: {self.error}".split())  # one line
        return f"yours raised {said if len(said) <= 120 else said[:117] + '...'}"


def attempt(name: str, fn: Callable, *args, **kwargs) -> Attempt:
    """Run the learner's fn(*args, **kwargs) for exercise name; an error becomes part of the
    Attempt, a stub's NotImplementedError says which exercise is missing (lesson 04a)."""
    try:
        return Attempt(name, value=fn(*args, **kwargs))
    except NotImplementedError as err:
        return Attempt(name, missing=named_in(err) or name)
    except Exception as err:  # the learner's code may fail in any way: the Attempt says how
        return Attempt(name, error=err)


def yours_or_course(name: str, yours: Callable, course: Callable, *args, **kwargs):
    """(value, reason): yours(*args, **kwargs) when it is written and runs, else course's
    value; reason is "yours" or "the course's (yours is not written yet)" and the like
    (lesson 06)."""
    tried = attempt(name, yours, *args, **kwargs)
    if tried.ran:
        return tried.value, "yours"
    return course(*args, **kwargs), f"the course's ({tried.reason})"
