"""The checkers' shared core: an exercise is data, and one function checks any of them.

An `Exercise` names the course's `reference`, the `cases` it is tried on, and the `bugs` a
learner is likely to make, each a wrong version of the function with what it looks like
(`symptom`) and what causes it (`cause`). `run(exercise, fn)` tries the learner's fn on every
case and returns a `Verdict`; it never prints (the notebook's checker does, see checks.py).

What a check compares, for every case:
- the learner's function must not change its arguments (it gets copies; the copies are
  compared with the originals afterwards);
- the result must have the reference's type, shape and dtype: a float64 tensor where float32
  is expected fails, it is not cast first;
- the numbers must match to `atol`/`rtol`;
- for an exercise whose result feeds training (`needs_grad`), where the course's result carries
  a gradient the learner's must too: a loss computed under torch.no_grad() has the right
  numbers and cannot train.

A known bug is recognised by the numbers its wrong version returns, or, where the learner's
function raises, by the same error (type and message) its wrong version raises on that case.

A failure comes with hints in steps: `Verdict.steps[0]` is the symptom; each later step is
more specific (the cause, then the section of the lesson that holds the idea). None gives
code.
"""

import copy
import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from course_lib.exercises.errors import common_error
from course_lib.exercises.stub import attempt
from course_lib.exercises.watch import watching

PASSED, NOT_IMPLEMENTED, FAILED = "passed", "not implemented", "failed"
NO_GRADIENT = (  # the symptom and the cause of a result cut off from autograd
    "your numbers are right, but no gradient flows back through them",
    "the result carries no gradient: it was computed under torch.no_grad(), or detached "
    "(.detach(), .item(), a new tensor built from its values). Training calls backward on "
    "it, and the inputs that need a gradient must get one through your function.",
)
DTYPE_HINT = (
    "The numbers are right; the dtype is part of the result too. A result should keep its "
    "input's dtype: a float64 tensor usually comes from mixing in one built in float64 "
    "(torch.tensor of Python floats with dtype=float64, numpy), an int64 one from torch.arange "
    "without a dtype."
)


@dataclass(frozen=True)
class Bug:
    """One likely mistake: a wrong version of the function, how it shows, what causes it."""

    name: str  # a short identifier, unique within its exercise
    wrong: Callable  # takes the reference's arguments, returns what the mistake returns
    symptom: str  # what the learner would see in their own output (the first hint)
    cause: str  # the mistake, named without giving the solution's code (the second hint)


@dataclass(frozen=True)
class Case:
    """One call of the function: positional arguments, keyword arguments, and a label."""

    args: tuple
    kwargs: dict = field(default_factory=dict)
    label: str = ""  # what is special about this case, said in the hints ("a 4-D q")


@dataclass(frozen=True)
class Exercise:
    """An exercise as data: the reference, the cases, the bugs with their hints."""

    name: str  # the function the learner writes, as the lesson names it
    lesson: str  # its notebook's name, "03a_why_scale": a key of course_lib.exercises.LESSONS
    reference: Callable
    cases: Callable[[], list]  # () -> [Case or tuple of positional arguments]
    idea: str  # where the lesson teaches what this needs: the last hint points there
    bugs: tuple[Bug, ...] = ()
    hints: tuple[str, ...] = ()  # general hints when no known bug matches, in order
    atol: float = 1e-5
    rtol: float = 1e-4
    # (got, expected, args, kwargs) -> a got to compare instead, e.g. to accept an equally
    # right variant; None compares got itself
    accept: Callable | None = None
    # the result feeds training: where the course's carries a gradient, the learner's must
    # too (an inference exercise, such as a cached forward pass under no_grad, leaves it off)
    needs_grad: bool = False
    # torch or course functions that do what the learner is asked to write, as (module, name):
    # a check that finds one called while the learner's function runs (however it was
    # reached) fails with `forbidden_hint`
    forbidden: tuple[tuple[object, str], ...] = ()
    # earlier exercises that must not run inside this one, the learner's own versions too (a
    # wrapper around one passes and checks nothing new): recognised by the name the function
    # was written under, since a learner's function is new code each time a lesson reads it;
    # the course's own versions belong in `forbidden`. Fails with `forbidden_hint` too.
    forbidden_earlier: tuple[str, ...] = ()
    # torch functions allowed, except with one keyword argument set (as (module, name,
    # keyword)): scaled_dot_product_attention's enable_gqa=True shares key/value heads out
    # inside torch. Seen through torch's function-override mode, so however the function was
    # reached, unless course_lib's own code called it. Fails with `forbidden_hint` too.
    forbidden_keywords: tuple[tuple[object, str, str], ...] = ()
    forbidden_hint: str = ""
    # what course_lib.mywork hands a later lesson for an exercise not written yet, where the
    # reference is an adapter and not the thing the learner writes (lesson 11a's MyTransformer,
    # a class; lesson 17a's online_attention, whose reference is torch's kernel, not a loop
    # over tiles); None: the reference
    stand_in: Callable | None = None

    def case_list(self) -> list[Case]:
        return [c if isinstance(c, Case) else Case(tuple(c)) for c in self.cases()]


@dataclass(frozen=True)
class Verdict:
    """What one check found: passed or not, the first line to show, and the hints in steps."""

    passed: bool
    message: str  # "name: what happened": the first thing a learner reads
    steps: tuple[str, ...] = ()  # the hints after the message, most general first
    status: str = FAILED  # PASSED, NOT_IMPLEMENTED or FAILED
    bug: str | None = None  # the name of the known bug that matched, if one did

    def _ipython_display_(self) -> None:
        """Show nothing more in a notebook: the lesson's checker has printed its line already."""


# ---------------------------------------------------------------- comparing results


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        dtype = (
            "" if value.dtype == torch.float32 else f" {str(value.dtype).removeprefix('torch.')}"
        )
        return f"shape {tuple(value.shape)}{dtype}"
    if value is None or isinstance(value, bool | int | float | str):
        return repr(value)
    if isinstance(value, tuple | list):
        return f"a {type(value).__name__} of {len(value)}"
    name = type(value).__name__
    return f"{'an' if name[0].lower() in 'aeiou' else 'a'} {name}"


def case_label(reference: Callable, case: Case) -> str:
    """The case in words, naming each argument: 'q shape (2, 3, 5, 8), mask None'."""
    try:
        bound = inspect.signature(reference).bind(*case.args, **case.kwargs)
        parts = [f"{k} {_describe(v)}" for k, v in bound.arguments.items()]
    except TypeError:
        parts = [_describe(v) for v in case.args]
    said = ", ".join(parts)
    return f"{case.label}; {said}" if case.label else said


def _as_tensor(value):
    """value as a tensor cut off from autograd: comparing never warns about, or keeps, a
    learner's graph."""
    return value.detach() if isinstance(value, torch.Tensor) else value


def close(got, expected, atol: float, rtol: float) -> bool:
    """Same type, shape, dtype and numbers (to atol/rtol); tuples item by item."""
    if isinstance(expected, tuple | list):
        return (
            isinstance(got, tuple | list)
            and len(got) == len(expected)
            and all(close(g, e, atol, rtol) for g, e in zip(got, expected, strict=True))
        )
    if isinstance(expected, torch.Tensor):
        if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
            return False
        if got.dtype != expected.dtype:
            return False
        got, expected = _as_tensor(got), _as_tensor(expected)
        if expected.dtype == torch.bool or not expected.is_floating_point():
            return bool(torch.equal(got, expected))
        return bool(torch.allclose(got, expected, atol=atol, rtol=rtol, equal_nan=False))
    if isinstance(expected, float):
        return isinstance(got, int | float) and math.isclose(got, expected, rel_tol=rtol,
                                                             abs_tol=atol)  # fmt: skip
    return got == expected


def values_close(got, expected, atol: float, rtol: float) -> bool:
    """Like close, but a dtype difference alone does not count (used to recognise bugs)."""
    if isinstance(expected, tuple | list):
        return (
            isinstance(got, tuple | list)
            and len(got) == len(expected)
            and all(values_close(g, e, atol, rtol) for g, e in zip(got, expected, strict=True))
        )
    if isinstance(expected, torch.Tensor) and isinstance(got, torch.Tensor):
        if got.shape != expected.shape:
            return False
        if expected.dtype == torch.bool or got.dtype == torch.bool:
            return got.dtype == expected.dtype and bool(torch.equal(got, expected))
        got, expected = _as_tensor(got).double(), _as_tensor(expected).double()
        return bool(torch.allclose(got, expected, atol=atol, rtol=rtol, equal_nan=True))
    return close(got, expected, atol, rtol)


def form_problem(got, expected) -> str | None:
    """What is wrong with got's type, shape or dtype, or None when they match expected's."""
    if isinstance(expected, tuple | list):
        if not isinstance(got, tuple | list) or len(got) != len(expected):
            return f"expected a tuple of {len(expected)} results, got {_describe(got)}"
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            problem = form_problem(g, e)
            if problem:
                return f"item {i} of the result: {problem}"
        return None
    if isinstance(expected, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            return f"expected a torch.Tensor, got {_describe(got)}"
        if got.shape != expected.shape:
            return f"expected shape {tuple(expected.shape)}, got {tuple(got.shape)}"
        if got.dtype != expected.dtype:
            return f"expected dtype {expected.dtype}, got {got.dtype}"
        return None
    if isinstance(expected, float) and not isinstance(got, int | float):
        return f"expected a number, got {_describe(got)}"
    return None


def largest_gap(got, expected) -> str:
    """'largest difference 0.31 at index (0, 2, 1)' for the first item that differs."""
    if isinstance(expected, tuple | list):
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            if not values_close(g, e, 0.0, 0.0):
                return f"item {i}: {largest_gap(g, e)}"
        return "no difference"
    if isinstance(expected, torch.Tensor):
        diff = (_as_tensor(got).double() - _as_tensor(expected).double()).abs()
        if diff.dim() == 0:
            return f"got {float(_as_tensor(got)):.4g}, expected {float(_as_tensor(expected)):.4g}"
        if torch.isnan(diff).any():
            where = tuple(torch.nonzero(torch.isnan(diff))[0].tolist())
            return f"NaN at index {where}"
        flat = int(diff.argmax())
        where = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), diff.shape))
        return f"largest difference {diff.max().item():.3g} at index {where}"
    return f"got {got!r}, expected {expected!r}"


# ---------------------------------------------------------------- running a check


def _copy_args(values):
    """Copies to hand the learner: tensors cloned (requires_grad kept), modules deep-copied."""
    out = []
    for v in values:
        if isinstance(v, torch.Tensor):
            c = v.detach().clone()
            out.append(c.requires_grad_(v.requires_grad) if v.is_leaf else c)
        elif isinstance(v, torch.nn.Module | list | dict):
            out.append(copy.deepcopy(v))
        else:
            out.append(v)
    return out


def _changed(before, after) -> bool:
    if isinstance(before, torch.Tensor):
        return before.shape != after.shape or not torch.equal(before.detach(), after.detach())
    if isinstance(before, torch.nn.Module):
        old, new = before.state_dict(), after.state_dict()
        return any(not torch.equal(old[k], new[k]) for k in old)
    return False


def _names(reference: Callable, case: Case) -> list[str]:
    try:
        return list(inspect.signature(reference).bind(*case.args, **case.kwargs).arguments)
    except TypeError:
        return [f"argument {i}" for i in range(len(case.args))]


def _fail(exercise: Exercise, message: str, steps, bug: str | None = None) -> Verdict:
    see = f"See {exercise.idea}."
    steps = tuple(s for s in steps if s) + (see,)
    return Verdict(False, f"{exercise.name}: {message}", steps, FAILED, bug)


def _forbidden(exercise: Exercise) -> dict:
    """{"module.name": function} of the exercise's forbidden functions."""
    return {
        f"{getattr(module, '__name__', module)}.{attr}": inspect.unwrap(getattr(module, attr))
        for module, attr in exercise.forbidden
    }


def _forbidden_keywords(exercise: Exercise) -> dict:
    """{"module.name with keyword=True": (function, keyword)} of the exercise's forbidden
    keyword uses."""
    return {
        f"{getattr(module, '__name__', module)}.{attr} with {keyword}=True": (
            getattr(module, attr),
            keyword,
        )
        for module, attr, keyword in exercise.forbidden_keywords
    }


COURSE_OWN = (
    "The check compares your function with the course's own: handing it the course's (from "
    "earlier_work, which gives the course's version of an exercise you have not written, or "
    "from a course_lib module) checks nothing. Write the function yourself; the lesson's "
    "worked example shows the idea on another case."
)


def run(exercise: Exercise, fn, *, reference_ok: bool = False) -> Verdict:
    """Check the learner's fn against exercise on every case; return the Verdict. A right
    answer that runs the course's own version (its reference, or a forbidden function) fails,
    the reference itself too unless `reference_ok` (a test proving the reference passes)."""
    name = exercise.name
    if not callable(fn):
        return _fail(exercise, f"expected a function, got {_describe(fn)}", ())
    cases = exercise.case_list()
    forbidden = _forbidden(exercise)
    keywords = _forbidden_keywords(exercise)
    # the course's own version, however the learner reached it (earlier_work hands it back
    # for an exercise not written yet); a wrong answer built on it still gets its own hint
    reference = exercise.reference
    own = {reference.__qualname__: reference} if hasattr(reference, "__code__") else {}
    ran_own = None  # the first case on which a right answer ran the course's own version
    # the reference (where a test proves it passes) and the exercise's own wrong versions,
    # which may be built on the very functions the learner must not call, run unwatched
    trusted = (fn is reference and reference_ok) or any(fn is bug.wrong for bug in exercise.bugs)
    for case in cases:
        label = case_label(exercise.reference, case)
        mine = _copy_args(case.args)
        mine_kw = dict(zip(case.kwargs, _copy_args(case.kwargs.values()), strict=True))
        earlier = () if trusted else exercise.forbidden_earlier
        watched = {} if trusted else {**forbidden, **own}
        with watching(watched, earlier, {} if trusted else keywords) as calls:
            tried = attempt(name, fn, *mine, **mine_kw)
        called = [c for c in calls if c in forbidden or c in earlier or c in keywords]
        ran = [c for c in calls if c in own]
        if called and tried.missing is None:
            return _fail(exercise, f"your function calls {called[0]}, which computes what this "
                         f"exercise asks you to write (case: {label})",
                         (exercise.forbidden_hint,), "forbidden")  # fmt: skip
        if tried.missing not in (None, name):
            return Verdict(
                False,
                f"{name}: it calls {tried.missing}, which is not implemented yet. Write "
                f"{tried.missing} first, run its cell, then run this check again.",
                (),
                NOT_IMPLEMENTED,
            )
        if tried.missing is not None:
            return Verdict(
                False,
                f"{name}: not implemented yet. Replace the `raise NotImplementedError` line "
                "with your code, run that cell, then run this check again.",
                (),
                NOT_IMPLEMENTED,
            )
        if tried.error is not None:
            err = tried.error
            raised = f"your function raised {type(err).__name__}: {err}"
            bug = _raising_bug(exercise, case, err)
            if bug is not None:  # a known mistake that raises exactly this error here
                return _fail(exercise, f"{raised}: {bug.symptom} (case: {label})", (bug.cause,),
                             bug.name)  # fmt: skip
            common = common_error(err)
            if common is not None:  # an error many exercises meet, with its usual cause
                return _fail(exercise, f"{raised} (case: {label})", (common[1], *exercise.hints),
                             common[0])  # fmt: skip
            return _fail(
                exercise,
                f"{raised} (case: {label})",
                ("The exercise's text promises this case works: read its contract again "
                 "for the shapes and types it allows.", *exercise.hints),
            )  # fmt: skip
        got = tried.value
        names = _names(exercise.reference, case)
        originals = [*case.args, *case.kwargs.values()]
        for arg_name, before, after in zip(names, originals, [*mine, *mine_kw.values()],
                                           strict=False):  # fmt: skip
            if _changed(before, after):
                return _fail(
                    exercise,
                    f"your function changed its argument `{arg_name}` in place (case: {label}).",
                    (
                        "The caller still needs its input afterwards: an operation ending in "
                        "an underscore (masked_fill_, add_, ...), `+=` on a tensor, or "
                        "assigning into a slice of an argument changes it for everyone. Work "
                        "on a new tensor instead.",
                    ),
                    "in place",
                )
        expected = exercise.reference(*case.args, **case.kwargs)
        if exercise.accept is not None:
            got = exercise.accept(got, expected, case.args, case.kwargs)
        if close(got, expected, exercise.atol, exercise.rtol):
            if ran and ran_own is None:  # right because it is the course's, unless a later
                ran_own = ran[0], label  # case shows a mistake made around it
            if exercise.needs_grad and _lost_gradient(got, expected):
                return _fail(exercise, f"{NO_GRADIENT[0]} (case: {label})", (NO_GRADIENT[1],),
                             "no gradient")  # fmt: skip
            continue
        tol = exercise.atol, exercise.rtol
        for bug in () if values_close(got, expected, *tol) else exercise.bugs:
            try:
                wrong = bug.wrong(*_copy_args(case.args), **case.kwargs)
            except Exception:  # a bug that cannot happen on this case (say, a shape error)
                continue
            if values_close(got, wrong, *tol) and not values_close(wrong, expected, *tol):
                return _fail(exercise, f"{bug.symptom} (case: {label})", (bug.cause,), bug.name)
        problem = form_problem(got, expected)
        if problem and values_close(got, expected, *tol):  # right numbers, wrong dtype
            return _fail(exercise, f"{problem} (case: {label})", (DTYPE_HINT,))
        if problem:
            return _fail(exercise, f"{problem} (case: {label})", exercise.hints)
        return _fail(
            exercise,
            f"the numbers differ from the course's: {largest_gap(got, expected)}, tolerance "
            f"{exercise.atol:g} (case: {label})",
            exercise.hints,
        )
    if ran_own is not None:
        return _fail(exercise, f"your function runs the course's own {ran_own[0]}, the function "
                     f"this exercise asks you to write (case: {ran_own[1]})", (COURSE_OWN,),
                     "course's own")  # fmt: skip
    return Verdict(True, f"{name}: passed all {len(cases)} cases. Well done!", (), PASSED)


def _raising_bug(exercise: Exercise, case: Case, err: Exception) -> Bug | None:
    """The first bug whose wrong version raises the learner's error on this case: the same
    type and the same message (a shape error names both shapes, so it is specific)."""
    for bug in exercise.bugs:
        try:
            bug.wrong(*_copy_args(case.args), **case.kwargs)
        except Exception as theirs:  # the bug's own error, compared with the learner's
            if type(theirs) is type(err) and str(theirs) == str(err):
                return bug
    return None


def _lost_gradient(got, expected) -> bool:
    """Whether got has the right numbers but no gradient where expected carries one."""
    if isinstance(expected, tuple | list) and isinstance(got, tuple | list):
        return any(_lost_gradient(g, e) for g, e in zip(got, expected, strict=False))
    return (
        isinstance(expected, torch.Tensor)
        and expected.requires_grad
        and isinstance(got, torch.Tensor)
        and not got.requires_grad
    )


def dead_bugs(exercise: Exercise) -> list[str]:
    """Bugs whose wrong version agrees with the reference on every case (their hint can never
    be given), or that another bug listed before them always catches first."""
    dead = []
    for bug in exercise.bugs:
        verdict = run(exercise, bug.wrong)  # with no cases at all, every bug passes: dead
        if verdict.passed or verdict.bug != bug.name:
            dead.append(bug.name)
    return dead
