"""Lesson 00's exercise: a softmax over the last axis."""

import torch

from course_lib.exercises.core import Bug, Case, Exercise


def softmax_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


def _cases() -> list[Case]:
    g = torch.Generator().manual_seed(0)
    return [
        Case((torch.randn(5, generator=g),), label="a 1-D x"),
        Case((torch.randn(3, 4, generator=g) * 3,), label="a 2-D x"),
        Case((torch.randn(2, 3, 6, generator=g),), label="a 3-D x"),
        Case(
            (torch.tensor([[1000.0, 999.0, -1000.0], [0.0, 0.0, 0.0]]),),
            label="scores as large as 1000",
        ),
        Case(
            (torch.randn(4, 5, generator=g).double(),),
            label="a float64 x: the result keeps x's dtype",
        ),
    ]


def _unstable(x):
    e = x.exp()
    return e / e.sum(dim=-1, keepdim=True)


SOFTMAX = Exercise(
    name="softmax",
    lesson="00",
    reference=softmax_reference,
    cases=_cases,
    idea="the cell above the exercise that turns the scores [2, 1, 0.1] into weights, and the "
    "note on subtracting the largest score",
    bugs=(
        Bug(
            "first_axis",
            lambda x: torch.softmax(x, dim=0),
            "your columns sum to 1, not your rows",
            "you normalised over the first axis; each distribution runs along the last one.",
        ),
        Bug(
            "no_division",
            torch.exp,
            "your weights are all positive but do not sum to 1",
            "you return exp(x) without dividing by each row's total.",
        ),
        Bug(
            "no_exp",
            lambda x: x / x.sum(dim=-1, keepdim=True),
            "your rows sum to 1 but some weights are negative",
            "you divide x by its sum but never take the exponential.",
        ),
        Bug(
            "overflow",
            _unstable,
            "a row of scores near 1000 comes out as NaN",
            "exp(1000) overflows float32 to inf, and inf / inf is NaN. Softmax does not change "
            "when one number is subtracted from every score of a row: which number keeps every "
            "exp at most 1?",
        ),
    ),
    hints=(
        "Softmax takes exp of each score, then divides by the row's total, along the last axis.",
    ),
)

EXERCISES = (SOFTMAX,)
