"""Lesson 03a_why_scale's exercise: the softmax's Jacobian, written from the weights (Exercise
1).

- softmax_jacobian(scores) -> (..., T, T): scores (..., T), any number of leading dimensions
  (none included); J[..., i, j] = d softmax(scores)_i / d scores_j, in scores' dtype. The
  reference is autograd's own Jacobian (torch.autograd.grad), row by row; the check refuses
  autograd in every form the learner could call it.
"""

import math

import torch
from torch.autograd import forward_ad

from course_lib.exercises.core import Bug, Case, Exercise

# ---------------------------------------------------------------- softmax_jacobian


def softmax_jacobian_reference(scores: torch.Tensor) -> torch.Tensor:
    """Autograd's own Jacobian of the softmax: row i of every (T, T) matrix is the gradient of
    weight i with respect to that row's scores, T backward passes for all rows at once (rows
    do not mix, so the gradient of a sum over rows is each row's own) (lesson 03a)."""
    with torch.enable_grad():
        s = scores.detach().requires_grad_()
        w = torch.softmax(s, dim=-1)  # (..., T)
        rows = [torch.autograd.grad(w[..., i].sum(), s, retain_graph=True)[0]
                for i in range(s.shape[-1])]  # fmt: skip
    return torch.stack(rows, dim=-2)  # (..., T, T): [..., i, j] = d w_i / d s_j


def _weights(scores):
    return torch.softmax(scores, dim=-1)  # (..., T)


def _outer(w):
    return w[..., :, None] * w[..., None, :]  # (..., T, T)


def _by_hand(scores, *, stable=True, keepdim=True):
    """Softmax written out along the last axis, as a learner may write it."""
    shifted = scores - scores.amax(dim=-1, keepdim=True) if stable else scores
    e = shifted.exp()
    return e / e.sum(dim=-1, keepdim=keepdim)


def _formula(w):
    return torch.diag_embed(w) - _outer(w)


def _scores(g, *shape, spread=2.0, dtype=torch.float32):
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * spread).to(dtype)


def _jacobian_cases() -> list[Case]:
    g = torch.Generator().manual_seed(0)
    masked = _scores(g, 2, 5)
    masked[0, 3:] = -math.inf  # a causal mask's row: keys 3 and 4 are in the future
    masked[1, 0] = -math.inf
    return [
        # first: a square batch, where a sum over the wrong axis, a softmax over the wrong axis
        # and torch.diag of a 2-D tensor give wrong numbers rather than an error
        Case((_scores(g, 4, 4),), label="a square (4, 4) batch: four rows of four scores"),
        Case((_scores(g, 6),), label="a single row of 6 scores, no batch dimension"),
        Case((_scores(g, 2, 3, 5),), label="a 3-D batch (2, 3, 5)"),
        Case((_scores(g, 3, 5, spread=300.0),), label="rows whose scores are hundreds apart"),
        Case((masked,), label="rows with masked keys (score -inf), as a mask leaves them"),
        Case(
            (_scores(g, 3, 4, dtype=torch.float64),),
            label="a float64 batch: the result keeps its dtype",
        ),
    ]


SOFTMAX_JACOBIAN = Exercise(
    name="softmax_jacobian",
    lesson="03a_why_scale",
    reference=softmax_jacobian_reference,
    cases=_jacobian_cases,
    idea="the cell 'A saturated softmax passes almost no gradient', its worked example with two "
    "keys, and Exercise 1's note on torch.diag_embed",
    bugs=(
        Bug(
            "outer_only",
            lambda s: -_outer(_weights(s)),
            "your diagonal entries are negative",
            "on the diagonal, raising a score raises its own weight: d w_i / d s_i is "
            "positive. You kept only the part every entry shares, -w_i w_j, and left out the "
            "extra term that only the diagonal (i = j) gets.",
        ),
        Bug(
            "diagonal_only",
            lambda s: torch.diag_embed(_weights(s)),
            "your off-diagonal entries are all 0",
            "raising score j lowers every other weight, because the weights must still sum to "
            "1: d w_i / d s_j is not 0 for i != j. Differentiate the softmax's denominator too.",
        ),
        Bug(
            "sign",
            lambda s: -_formula(_weights(s)),
            "your Jacobian is minus the course's",
            "a sign is flipped: raising score i must raise weight i (a positive diagonal) and "
            "lower the others (negative off-diagonal entries).",
        ),
        Bug(
            "diagonal_formula_everywhere",
            lambda s: _weights(s)[..., :, None] * (1 - _weights(s)[..., None, :]),
            "your off-diagonal entries are positive",
            "you used the diagonal's formula w_i (1 - w_j) for every entry. Off the diagonal, "
            "score j appears only in the denominator of w_i: d w_i / d s_j = -w_i w_j.",
        ),
        Bug(
            "scores_for_weights",
            lambda s: _formula(s),
            "your Jacobian is built from the scores, not from the weights",
            "the formula is in the softmax's output, the weights w = softmax(scores), not in "
            "the scores themselves: compute the weights first.",
        ),
        Bug(
            "sum_without_keepdim",
            lambda s: _formula(_by_hand(s, keepdim=False)),
            "right for a single row, but in a batch your weights do not sum to 1 along each row",
            "your softmax sums exp along the last axis and the sum loses that axis, so dividing "
            "lines each sum up with the wrong axis: for a (4, 4) batch row i is divided by row "
            "j's sum. Keep the summed axis (keepdim=True) so that each row is divided by its own.",
        ),
        Bug(
            "softmax_over_first_axis",
            lambda s: _formula(torch.softmax(s, dim=0)),
            "right for a single row, but in a batch your softmax runs over the wrong axis",
            "each row of scores along the last axis is one distribution: take the softmax "
            "over dim=-1, for any number of leading dimensions.",
        ),
        Bug(
            "diag_of_a_batch",
            lambda s: torch.diag(_weights(s)) - _outer(_weights(s)),
            "your diagonal is wrong for a batch of rows",
            "torch.diag turns a 1-D tensor into a diagonal matrix, but of a 2-D tensor it "
            "returns the diagonal, and a 3-D one it refuses. torch.diag_embed makes a diagonal "
            "matrix of every row along the last axis.",
        ),
        Bug(
            "overflow",
            lambda s: _formula(_by_hand(s, stable=False)),
            "you get NaN for rows whose scores are hundreds apart",
            "exp of a large score overflows to inf, and inf / inf is NaN. Subtract each row's "
            "largest score before exp (the softmax does not change), or use torch.softmax, "
            "which does.",
        ),
    ),
    hints=(
        "Differentiate w_i = exp(s_i) / sum_k exp(s_k) by s_j with the quotient rule, once for "
        "j = i and once for j != i, and write both cases in terms of the weights alone. Then "
        "build the (T, T) matrix for every row at once, along the last axis.",
    ),
    # autograd in every form a learner could call it; torch.autograd.backward is what
    # Tensor.backward calls, and every reverse-mode route ends in grad or backward
    forbidden=(
        (torch.autograd.functional, "jacobian"),
        (torch.func, "jacrev"),
        (torch.func, "jacfwd"),
        (torch.func, "vjp"),
        (torch.func, "jvp"),
        (torch.autograd, "grad"),
        (torch.autograd, "backward"),
        (forward_ad, "make_dual"),
    ),
    forbidden_hint="This exercise asks you to derive the Jacobian and build it from the "
    "weights; autograd (torch.autograd.grad, .backward(), torch.func, forward mode) computes "
    "it for you, and is what the checker compares with.",
)

EXERCISES = (SOFTMAX_JACOBIAN,)
