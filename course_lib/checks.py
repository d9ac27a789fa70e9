"""Exercise checkers: run the learner's function against the course's on random cases.

Each `check_*` prints one line: a pass, "not implemented yet", or a hint that names the
most likely bug. Hints come from running known wrong versions (softmax over the wrong
axis, a missing scale, ...) and seeing which one the learner's output matches.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from course_lib.attention import causal_mask, scaled_dot_product_attention

ATOL = 1e-5


@dataclass(frozen=True)
class Verdict:
    passed: bool
    message: str


def _close(got, expected) -> bool:
    if isinstance(expected, tuple):
        return (
            isinstance(got, tuple | list)
            and len(got) == len(expected)
            and all(_close(g, e) for g, e in zip(got, expected, strict=True))
        )
    if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
        return False
    if expected.dtype == torch.bool:
        return got.dtype == torch.bool and torch.equal(got, expected)
    return bool(torch.allclose(got.to(expected.dtype), expected, atol=ATOL, rtol=1e-4))


def _shape_problem(got, expected) -> str | None:
    """Say what is wrong with the type or shape of got, or None if both match."""
    if isinstance(expected, tuple):
        if not isinstance(got, tuple | list) or len(got) != len(expected):
            return f"expected a tuple of {len(expected)} tensors, got {type(got).__name__}"
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            problem = _shape_problem(g, e)
            if problem:
                return f"item {i} of the result: {problem}"
        return None
    if not isinstance(got, torch.Tensor):
        return f"expected a torch.Tensor, got {type(got).__name__}"
    if got.shape != expected.shape:
        return f"expected shape {tuple(expected.shape)}, got {tuple(got.shape)}"
    if expected.dtype == torch.bool and got.dtype != torch.bool:
        return f"expected dtype torch.bool, got {got.dtype}"
    return None


def _clone(args: tuple) -> tuple:
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def verdict(
    name: str,
    fn: Callable,
    cases: list[tuple],
    reference: Callable,
    bugs: list[tuple[Callable, str]] = (),
    hints: list[tuple[Callable, str]] = (),
) -> Verdict:
    """Run fn on each case; compare with reference; name a matching bug if there is one.

    bugs: (wrong_version, hint) pairs; a hint is given when fn's result matches the wrong
    version. hints: (predicate(got, case), hint) pairs tried when no bug matches.
    """
    if not callable(fn):
        return Verdict(False, f"{name}: expected a function, got {type(fn).__name__}")
    for case in cases:
        try:
            got = fn(*_clone(case))
        except NotImplementedError:
            return Verdict(
                False,
                f"{name}: not implemented yet. Replace the `raise NotImplementedError` "
                "line with your code, run that cell, then run this check again.",
            )
        except Exception as err:  # the learner's code may fail in any way; report it
            return Verdict(False, f"{name}: your function raised {type(err).__name__}: {err}")
        expected = reference(*case)
        if _close(got, expected):
            continue
        for wrong, hint in bugs:
            if _close(got, wrong(*case)):
                return Verdict(False, f"{name}: {hint}")
        problem = _shape_problem(got, expected)
        if problem:
            return Verdict(False, f"{name}: {problem}")
        for predicate, hint in hints:
            if predicate(got, case):
                return Verdict(False, f"{name}: {hint}")
        return Verdict(False, f"{name}: the numbers differ from the course's version. {_gap(got, expected)}")
    return Verdict(True, f"{name}: passed all {len(cases)} cases. Well done!")


def _gap(got, expected) -> str:
    if isinstance(expected, tuple):
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            if not _close(g, e):
                return f"Item {i} of the result is off; {_gap(g, e)}"
        return ""
    diff = (got.to(expected.dtype) - expected).abs()
    return f"Largest difference {diff.max().item():.3g} (tolerance {ATOL:g})."


def _report(result: Verdict) -> None:
    print(("PASS  " if result.passed else "TRY AGAIN  ") + result.message)


def _randn(*shape, generator):
    return torch.randn(*shape, generator=generator)


# ---------------------------------------------------------------- lesson 00


def softmax_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


def softmax_cases(seed: int = 0) -> list[tuple]:
    g = torch.Generator().manual_seed(seed)
    cases = [(_randn(5, generator=g),), (_randn(3, 4, generator=g) * 3,), (_randn(2, 3, 6, generator=g),)]
    cases.append((torch.tensor([[1000.0, 999.0, -1000.0], [0.0, 0.0, 0.0]]),))
    return cases


def check_softmax(fn: Callable) -> None:
    """Check a softmax over the last axis (lesson 00's exercise)."""
    bugs = [
        (lambda x: torch.softmax(x, dim=0), "the numbers match softmax over the FIRST axis; "
         "normalise over the last one (dim=-1), so each row sums to 1."),
        (lambda x: torch.exp(x), "you return exp(x) without dividing by the row's sum."),
        (lambda x: x / x.sum(dim=-1, keepdim=True), "you divide x by its sum but forgot the exp."),
    ]
    hints = [
        (lambda got, case: bool(torch.isnan(got).any() or torch.isinf(got).any()),
         "your result has NaN or inf on large scores: subtract each row's max before exp."),
        (lambda got, case: not torch.allclose(got.sum(-1), torch.ones(got.shape[:-1]), atol=1e-4),
         "rows don't sum to 1: check which axis you sum over (keepdim=True helps broadcasting)."),
    ]
    _report(verdict("softmax", fn, softmax_cases(), softmax_reference, bugs, hints))


# ---------------------------------------------------------------- lesson 01


def attention_reference(q, k, v, mask=None):
    return scaled_dot_product_attention(q, k, v, mask)


def _attention_wrong(softmax_dim=-1, factor=None, after_softmax=False):
    def wrong(q, k, v, mask=None):
        d_k = q.shape[-1]
        f = 1 / math.sqrt(d_k) if factor is None else factor(d_k)
        scores = q @ k.transpose(-2, -1)  # (..., T_q, T_k)
        if not after_softmax:
            scores = scores * f
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        w = torch.softmax(scores, dim=softmax_dim)
        if after_softmax:
            w = w * f
        return w @ v, w

    return wrong


def attention_cases(seed: int = 0) -> list[tuple]:
    g = torch.Generator().manual_seed(seed)
    cases = []
    for T, d_k, d_v in [(4, 8, 8), (5, 16, 6), (6, 32, 4)]:
        q, k, v = (_randn(2, T, d, generator=g) for d in (d_k, d_k, d_v))
        cases.append((q, k, v, None))
    q, k, v = (_randn(2, 5, 8, generator=g) for _ in range(3))
    cases.append((q, k, v, causal_mask(5)))
    return cases


def check_attention(fn: Callable) -> None:
    """Check fn(q, k, v, mask=None) -> (output, weights) (lesson 01's first exercise)."""
    bugs = [
        (_attention_wrong(softmax_dim=-2), "columns sum to 1, not rows: take the softmax over "
         "the keys, the LAST axis (dim=-1)."),
        (_attention_wrong(factor=lambda d: 1.0), "the scores are not scaled: divide q @ k^T by "
         "sqrt(d_k) before the softmax."),
        (_attention_wrong(factor=lambda d: 1.0 / d), "you divide by d_k; the scale is sqrt(d_k)."),
        (_attention_wrong(after_softmax=True), "the scale is applied after the softmax; it belongs "
         "to the scores, before it."),
    ]
    hints = [
        (lambda got, case: case[3] is not None and bool(
            (got[1].masked_fill(case[3], 0).abs() > 1e-6).any()),
         "with a mask, weights on masked positions must be 0: fill masked scores with -inf "
         "before the softmax (mask is True where attending is allowed)."),
    ]
    _report(verdict("attention", fn, attention_cases(), attention_reference, bugs, hints))


def check_causal_mask(fn: Callable) -> None:
    """Check fn(T) -> (T, T) bool mask, True where query t may attend to key s (lesson 01)."""
    cases = [(5,), (2,), (9,), (1,)]  # T=1 last: there several bugs look alike
    bugs = [
        (lambda T: causal_mask(T).T.contiguous(), "your mask is the transpose: row t (the query) "
         "may see columns 0..t, so True belongs on and BELOW the diagonal (tril)."),
        (lambda T: ~causal_mask(T), "True and False are swapped: True means 'may attend'."),
        (lambda T: torch.ones(T, T, dtype=torch.bool).tril(-1), "the diagonal is False: a "
         "token may attend to itself (use tril(), not tril(-1))."),
        (lambda T: causal_mask(T).float(), "right pattern, wrong dtype: return a bool tensor."),
    ]
    _report(verdict("causal_mask", fn, cases, causal_mask, bugs))
