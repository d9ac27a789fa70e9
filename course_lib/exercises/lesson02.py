"""Lesson 02's exercises: the entropy of attention rows; the width at which the gradient vanishes.

- entropy(weights) -> (...): weights (..., T), each row along the last axis a distribution,
  any number of leading dimensions (none included); the entropy of each row in nats, in
  weights' dtype; a weight of exactly 0 adds 0.
- vanishing_width(widths, threshold=0.01, wrt="q", seed=0) -> int or None: the first width in
  widths at which the unscaled head's typical gradient (typical_gradient_norms, w.r.t. "q" or
  "scores", same seed for both heads) is below threshold times the scaled head's.
"""

import math

import torch

from course_lib.exercises.core import Bug, Case, Exercise
from course_lib.saturation import typical_gradient_norms, vanishing_gradient_width

# ---------------------------------------------------------------- entropy


def entropy_reference(weights: torch.Tensor) -> torch.Tensor:
    return -torch.special.xlogy(weights, weights).sum(dim=-1)  # (...)


def _rows(*shape, generator, sharpness=1.0, dtype=torch.float32) -> torch.Tensor:
    return torch.softmax(torch.randn(*shape, generator=generator) * sharpness, dim=-1).to(dtype)


def _entropy_cases() -> list[Case]:
    g = torch.Generator().manual_seed(0)
    zeros = torch.tensor(
        [
            [[1.0, 0.0, 0.0, 0.0], [0.5, 0.5, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25]],
            [[0.0, 0.0, 0.0, 1.0], [0.1, 0.0, 0.3, 0.6], [0.7, 0.1, 0.1, 0.1]],
        ]
    )  # (2, 3, 4)
    return [
        Case((_rows(3, 4, generator=g, sharpness=2.0),), label="a 2-D weights, rows of 4 keys"),
        Case((_rows(2, 3, 6, generator=g),), label="a 3-D weights: one leading batch dimension"),
        Case((_rows(2, 2, 3, 5, generator=g),), label="a 4-D weights"),
        Case((_rows(7, generator=g),), label="a 1-D weights: a single row"),
        Case((zeros,), label="rows with weights of exactly 0, one-hot rows among them"),
        Case(
            (_rows(3, 5, generator=g, dtype=torch.float64),),
            label="a float64 weights: the result keeps its dtype",
        ),
    ]


def _plogp(w: torch.Tensor) -> torch.Tensor:
    return torch.special.xlogy(w, w)


ENTROPY = Exercise(
    name="entropy",
    lesson="02_scaling",
    reference=entropy_reference,
    cases=_entropy_cases,
    idea="the cell 'Big scores saturate the softmax', which defines the entropy and its two "
    "extremes (log 8 for a flat row of 8, 0 for a one-hot row)",
    bugs=(
        Bug(
            "nan_at_zero",
            lambda w: -(w * w.log()).sum(dim=-1),
            "you get NaN for rows that hold a weight of exactly 0",
            "log 0 is -inf, and 0 times -inf is NaN in floating point. In the entropy a zero "
            "weight contributes nothing (p log p tends to 0 as p tends to 0): make the zero "
            "weights add 0 instead of computing their log.",
        ),
        Bug(
            "bits",
            lambda w: -_plogp(w).sum(dim=-1) / math.log(2),
            "your entropies are about 1.44 times the course's",
            "you measured in bits (logarithm base 2); the course measures entropy in nats, "
            "with the natural logarithm.",
        ),
        Bug(
            "sign",
            lambda w: _plogp(w).sum(dim=-1),
            "your entropies are negative",
            "every log p of a weight p <= 1 is at most 0, so the sum of p log p is at most 0: "
            "the entropy is minus that sum.",
        ),
        Bug(
            "mean",
            lambda w: -_plogp(w).mean(dim=-1),
            "your entropies are the course's divided by the number of keys",
            "you averaged p log p over the keys; the entropy adds them up.",
        ),
        Bug(
            "keepdim",
            lambda w: -_plogp(w).sum(dim=-1, keepdim=True),
            "your result keeps a last axis of size 1",
            "the sum kept the axis it ran over; the result has one number per row and no axis "
            "for the keys, so its shape is the weights' shape without the last axis.",
        ),
        Bug(
            "first_axis",
            lambda w: -_plogp(w).sum(dim=0),
            "your result has the shape of one row of weights, not one number per row",
            "you summed over the first axis; each distribution runs along the last axis.",
        ),
        Bug(
            "axis_1",
            lambda w: -_plogp(w).sum(dim=1 if w.dim() > 1 else -1),
            "with more than one leading dimension your result has the wrong shape",
            "you summed over axis 1, which is the last axis only for 2-D weights. Count the "
            "axis from the end, so that any number of leading dimensions works.",
        ),
    ),
    hints=(
        "The entropy of one row is minus the sum, over its keys, of w times log w (natural "
        "log), with 0 log 0 counted as 0. Compute it for every row at once, along the last axis.",
    ),
)

# ---------------------------------------------------------------- vanishing_width


def vanishing_width_reference(widths, threshold=0.01, wrt="q", seed=0):
    return vanishing_gradient_width(widths, threshold=threshold, wrt=wrt, seed=seed)


def _ratios(widths, wrt="q", seed=0) -> list[tuple[int, float, float]]:
    """(d_k, unscaled, scaled) typical gradient norms for every width, as the course measures."""
    which = ("scores", "q").index(wrt)
    return [
        (
            d_k,
            typical_gradient_norms(d_k, scale=False, seed=seed)[which],
            typical_gradient_norms(d_k, scale=True, seed=seed)[which],
        )
        for d_k in widths
    ]


def _first(pairs):
    return next((d for d, below in pairs if below), None)


def _inverted(widths, threshold=0.01, wrt="q", seed=0):
    return _first((d, s / u < threshold) for d, u, s in _ratios(widths, wrt, seed))


def _wrong_way(widths, threshold=0.01, wrt="q", seed=0):
    return _first((d, u / s > threshold) for d, u, s in _ratios(widths, wrt, seed))


def _position(widths, threshold=0.01, wrt="q", seed=0):
    rows = _ratios(widths, wrt, seed)
    return _first((i, u / s < threshold) for i, (_, u, s) in enumerate(rows))


def _fixed_threshold(widths, threshold=0.01, wrt="q", seed=0):
    return vanishing_width_reference(widths, 0.01, wrt, seed)


def _ignores_wrt(widths, threshold=0.01, wrt="q", seed=0):
    return vanishing_width_reference(widths, threshold, "q", seed)


def _other_gradient(widths, threshold=0.01, wrt="q", seed=0):
    return vanishing_width_reference(widths, threshold, "q" if wrt == "scores" else "scores", seed)


def _ignores_seed(widths, threshold=0.01, wrt="q", seed=0):
    return vanishing_width_reference(widths, threshold, wrt, 0)


def _scaled_on_seed_0(widths, threshold=0.01, wrt="q", seed=0):
    which = ("scores", "q").index(wrt)
    return _first(
        (d, u / typical_gradient_norms(d, scale=True)[which] < threshold)
        for d, u, _ in _ratios(widths, wrt, seed)
    )


def _absolute(widths, threshold=0.01, wrt="q", seed=0):
    return _first((d, u < threshold) for d, u, _ in _ratios(widths, wrt, seed))


def _last(widths, threshold=0.01, wrt="q", seed=0):
    below = [d for d, u, s in _ratios(widths, wrt, seed) if u / s < threshold]
    return below[-1] if below else None


def _vanishing_cases() -> list[Case]:
    return [
        # first, so that each bug's first wrong answer here is a width of its own: an upside-down
        # ratio finds one (the unscaled gradient is larger than the scaled one at 4), and a None
        # is left to mistakes no bug names
        Case(
            ([1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024],),
            {"threshold": 0.6},
            label="widths doubling from 1 to 1024, threshold 60%",
        ),
        Case(([1, 4, 16, 64, 256, 1024],), label="the table's widths, every default"),
        Case((list(range(64, 1025, 64)),), label="widths 64 to 1024 in steps of 64"),
        Case(
            (list(range(16, 257, 16)),),
            {"threshold": 0.05, "wrt": "scores"},
            label="the gradient w.r.t. the scores, threshold 5%",
        ),
        Case(
            (list(range(256, 513, 16)),),
            {"seed": 3},
            label="seed 3: other random problems than seed 0's",
        ),
        # seed 5 is one where measuring the scaled head on seed 0's problems moves the answer
        # (352 instead of 416; both heads on seed 0 give 384)
        Case(
            (list(range(320, 481, 16)),),
            {"seed": 5},
            label="seed 5: other random problems again",
        ),
        Case(
            ([1, 4, 16, 64],),
            label="no width in the list gets below the threshold: the answer is None",
        ),
    ]


VANISHING_WIDTH = Exercise(
    name="vanishing_width",
    lesson="02_scaling",
    reference=vanishing_width_reference,
    cases=_vanishing_cases,
    idea="the table of typical gradient norms in 'A saturated softmax passes almost no "
    "gradient', and the exercise's worked example",
    bugs=(
        Bug(
            "inverted",
            _inverted,
            "you return a width where the unscaled head's gradient is larger than the scaled "
            "head's",
            "your ratio is upside down: it is the unscaled head's gradient divided by the scaled "
            "head's that falls as the head widens.",
        ),
        Bug(
            "wrong_way",
            _wrong_way,
            "you return a width whose gradient has not vanished at all",
            "your comparison runs the wrong way: the width sought is the first whose ratio is "
            "below the threshold, not above it.",
        ),
        Bug(
            "position",
            _position,
            "you return a number that is not in widths",
            "you return the width's position in the list; return the width itself.",
        ),
        Bug(
            "fixed_threshold",
            _fixed_threshold,
            "your answer does not change with the threshold",
            "you compare with 1% whatever threshold the call passes; use the argument.",
        ),
        Bug(
            "ignores_wrt",
            _ignores_wrt,
            "with wrt='scores' you return the width for the gradient w.r.t. q",
            "you always measure the gradient w.r.t. q; wrt names which of the two gradients "
            "typical_gradient_norms returns to use.",
        ),
        Bug(
            "other_gradient",
            _other_gradient,
            "you return the width for the other gradient than wrt names",
            "typical_gradient_norms returns the gradient w.r.t. the scores first and the one "
            "w.r.t. q second (help(typical_gradient_norms) lists them); you took the other one.",
        ),
        Bug(
            "ignores_seed",
            _ignores_seed,
            "with a seed other than 0 you return seed 0's width",
            "pass the seed on to typical_gradient_norms, for both heads: it picks the random "
            "problems that are measured.",
        ),
        Bug(
            "scaled_on_seed_0",
            _scaled_on_seed_0,
            "with a seed other than 0 your width differs from the course's",
            "the seed reaches only one of your two measurements: the scaled head was measured "
            "on other random problems (seed 0's) than the unscaled one. Compare the two heads "
            "on the same problems, the ones `seed` picks.",
        ),
        Bug(
            "absolute",
            _absolute,
            "you stop at a width where the unscaled gradient is small, not small compared "
            "with the scaled head's",
            "the threshold is a fraction of the scaled head's gradient at the same width: "
            "compare the ratio of the two, not the unscaled gradient alone.",
        ),
        Bug(
            "last_not_first",
            _last,
            "you return a later width than the first one below the threshold",
            "your loop goes on after it finds a width below the threshold and keeps the last "
            "one; the answer is the first.",
        ),
    ),
    hints=(
        "For each width, in the order given, measure both heads with typical_gradient_norms "
        "(scale False and True, the same seed), take the item that wrt names from each, and "
        "compare their ratio with the threshold.",
        "typical_gradient_norms returns four things: two numbers (the gradient norms) and two "
        "tensors (the weights and the scores); only the numbers are measured here.",
    ),
)

EXERCISES = (ENTROPY, VANISHING_WIDTH)
