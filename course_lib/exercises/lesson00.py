"""Lesson 00's exercise: a softmax over the last axis."""

import torch
import torch.nn.functional as F

from course_lib.exercises.core import Bug, Case, Exercise


def softmax_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


def _cases() -> list[Case]:
    g = torch.Generator().manual_seed(0)
    return [
        # square, so a mistake that lines the row totals up with the columns gives numbers, not
        # a shape error, and its own hint
        Case((torch.randn(4, 4, generator=g) * 3,), label="a 2-D x"),
        Case((torch.randn(2, 3, 6, generator=g),), label="a 3-D x"),
        Case((torch.randn(5, generator=g),), label="a 1-D x"),
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


def _middle_axis(x):
    return torch.softmax(x, dim=1 if x.dim() > 1 else 0)


def _totals_without_their_axis(x):
    e = (x - x.max(dim=-1, keepdim=True).values).exp()  # (n, n)
    return e / e.sum(dim=-1)  # (n, n) / (n,): total j divides column j


def _square_only(wrong):
    """wrong on a square 2-D x, where a lost axis lines up with the columns; elsewhere the
    shapes do not line up and the learner's version raises an error instead."""

    def softmax(x):
        if x.dim() != 2 or x.shape[0] != x.shape[1]:
            return torch.softmax(x, dim=-1)
        return wrong(x)

    return softmax


def _maxima_without_their_axis(x):
    e = (x - x.max(dim=-1).values).exp()  # (n, n) - (n,): max j shifts column j
    return e / e.sum(dim=-1, keepdim=True)


def _nothing_kept(x):
    e = (x - x.max(dim=-1).values).exp()
    return e / e.sum(dim=-1)


def _global_max(x):
    e = (x - x.max()).exp()
    return e / e.sum(dim=-1, keepdim=True)


SOFTMAX = Exercise(
    name="softmax",
    lesson="00_start_here",
    reference=softmax_reference,
    cases=_cases,
    idea="the section 'A first taste: softmax turns scores into weights' (the formula and the "
    "five words' weights), and the exercise's note on subtracting each row's maximum and its "
    "(2, 3) table worked by hand",
    bugs=(
        Bug(
            "first_axis",
            lambda x: torch.softmax(x, dim=0),
            "your columns sum to 1, not your rows",
            "you normalised over the first axis; each distribution runs along the last one.",
        ),
        Bug(
            "middle_axis",
            _middle_axis,
            "on a 3-D x your weights sum to 1 along the middle axis, not the last",
            "you named the axis by counting from the front (axis 1). That is the last axis of a "
            "2-D x only: counted from the end, the last axis is the same for every number of "
            "dimensions.",
        ),
        Bug(
            "no_division",
            torch.exp,
            "your weights are all positive but do not sum to 1",
            "you return exp(x) without dividing by each row's total.",
        ),
        Bug(
            "no_division_after_shift",
            lambda x: (x - x.max(dim=-1, keepdim=True).values).exp(),
            "your weights are all positive, the largest in each row is 1, and they do not sum to 1",
            "you subtract each row's maximum and take the exponential, but never divide by "
            "the row's total.",
        ),
        Bug(
            "no_exp",
            lambda x: x / x.sum(dim=-1, keepdim=True),
            "your rows sum to 1 but some weights are negative",
            "you divide x by its sum but never take the exponential.",
        ),
        Bug(
            "totals_lost_their_axis",
            _square_only(_totals_without_their_axis),
            "your rows do not sum to 1: each column is divided by a different row's total",
            "summing over the last axis drops that axis, so the (rows,) totals line up with the "
            "columns when they broadcast. Keep the summed axis with length 1, (rows, 1), so "
            "each row is divided by its own total.",
        ),
        Bug(
            "maxima_lost_their_axis",
            _square_only(_maxima_without_their_axis),
            "your rows sum to 1, but the weights within a row are wrong: each column was "
            "shifted by a different row's maximum",
            "taking the maximum over the last axis drops that axis, so the (rows,) maxima line "
            "up with the columns when they broadcast, and column j is shifted by row j's "
            "maximum. Subtracting one number from a whole row changes nothing; subtracting "
            "different numbers from its entries changes their ratios. Keep the axis with "
            "length 1, (rows, 1), so each row is shifted by its own maximum.",
        ),
        Bug(
            "maxima_and_totals_lost_their_axis",
            _square_only(_nothing_kept),
            "your rows do not sum to 1: each column was shifted by a different row's maximum "
            "and divided by a different row's total",
            "taking the maximum or the sum over the last axis drops that axis, so the (rows,) "
            "results line up with the columns when they broadcast. Keep the axis with length "
            "1, (rows, 1), for both, so each row is shifted by its own maximum and divided by "
            "its own total.",
        ),
        Bug(
            "overflow",
            _unstable,
            "a row of scores near 1000 comes out as NaN",
            "exp(1000) overflows float32 to inf, and inf / inf is NaN. Softmax does not change "
            "when one number is subtracted from every score of a row: which number keeps every "
            "exp at most 1?",
        ),
        Bug(
            "global_max",
            _global_max,
            "a row of small scores comes out as NaN when another row holds scores near 1000",
            "you subtract the largest score of the whole tensor, not of each row. A row whose "
            "scores all sit 1000 below it gets exp(-1000) = 0 everywhere, and 0 / 0 is NaN: "
            "subtract each row's own largest score.",
        ),
    ),
    # torch's softmax is the reference: calling it in any form (the function, the tensor's
    # method, nn.Softmax, which calls F.softmax), or the exponential of its log-softmax,
    # passes every case without the arithmetic
    forbidden=(
        (torch, "softmax"),
        (torch.Tensor, "softmax"),
        (F, "softmax"),
        (torch.special, "softmax"),
        (torch, "_softmax"),
        (torch, "log_softmax"),
        (torch.Tensor, "log_softmax"),
        (F, "log_softmax"),
        (torch.special, "log_softmax"),
    ),
    forbidden_hint="The check compares with torch's softmax, so calling it (torch.softmax, "
    "x.softmax, F.softmax, nn.Softmax, or the exponential of a log_softmax) proves nothing. "
    "Build it from exp, max and sum, as the (2, 3) table is worked by hand.",
    hints=(
        "Softmax takes exp of each score, then divides by the row's total, along the last axis.",
        "Taken along an axis, max returns two things (the values and where they are); and a "
        "row's total or maximum keeps its axis (length 1) only if you ask, which it needs to "
        "broadcast back over the row.",
    ),
)

EXERCISES = (SOFTMAX,)
