"""Lesson 03_scaling's exercises: the softmax's Jacobian, written from the weights (Exercise
1); the variance of a score under nn.Linear's default initialisation, derived (Exercise 2).

- softmax_jacobian(scores) -> (..., T, T): scores (..., T), any number of leading dimensions
  (none included); J[..., i, j] = d softmax(scores)_i / d scores_j, in scores' dtype. The
  reference is autograd's own Jacobian (torch.autograd.grad), row by row; the check refuses
  autograd in every form the learner could call it.
- score_variance(d_model, d_k, bias=True) -> float: Var(q . k) for q = W_Q(x), k = W_K(x'),
  W_Q and W_K two fresh nn.Linear(d_model, d_k, bias=bias), x and x' with independent
  entries of mean 0 and variance 1; over the draws of the inputs and of both layers. The
  reference is the exact formula; tests/test_exercises_lesson03_scaling.py measures it.
"""

import math

import torch
from torch.autograd import forward_ad

from course_lib.exercises.core import Bug, Case, Exercise

# ---------------------------------------------------------------- score_variance


def score_variance_reference(d_model, d_k, bias=True):
    # each weight and bias ~ U(-a, a), a = 1 / sqrt(d_model): variance a^2 / 3
    entry = 1 / 3 + (1 / (3 * d_model) if bias else 0.0)  # Var(q_i) = Var(k_i)
    return d_k * entry**2  # d_k independent products q_i k_i, each of variance entry^2


def _entry(d_model, bias, fan_in=None):
    """Var(q_i) of nn.Linear's draw when its bound is 1/sqrt(fan_in) (d_model unless given)."""
    fan_in = d_model if fan_in is None else fan_in
    return (d_model + (1 if bias else 0)) / (3 * fan_in)


def _variance_cases() -> list[Case]:
    return [
        # first: no bias and d_model != d_k, where every bug below gives its own number
        Case((32, 8), {"bias": False}, label="no bias, d_model 32, d_k 8"),
        Case((8, 8), {"bias": True}, label="a narrow layer, where the bias counts most"),
        Case((64, 64), {"bias": True}, label="the width-64 head of the lesson's table"),
        Case((128, 128), {"bias": True}, label="the width-128 head of the lesson's table"),
        Case((512, 1), {"bias": True}, label="d_k = 1: a single product q_1 k_1"),
        Case((16, 256), {"bias": False}, label="d_k wider than d_model, no bias"),
        Case((48, 24), label="bias left at its default, True"),
    ]


SCORE_VARIANCE = Exercise(
    name="score_variance",
    lesson="03_scaling",
    reference=score_variance_reference,
    cases=_variance_cases,
    idea="the cell 'The variance of a score grows with d_k', which derives Var(q . k) from "
    "the variance of each entry, and the two facts Exercise 2 works on other cases (weights "
    "drawn from N(0, sigma^2), and a number drawn uniformly from (0, 1))",
    bugs=(
        Bug(
            "bound_squared",
            lambda d_model, d_k, bias=True: d_k * (1 + (1 / d_model if bias else 0.0)) ** 2,
            "your answer is about 9 times the course's",
            "you gave each weight (and bias) the variance 1/d_model, the square of the bound a "
            "of the uniform distribution nn.Linear draws from. A number drawn uniformly from "
            "(-a, a) has variance a^2 / 3, not a^2 (and 1/d_model is also the variance of "
            "another initialisation, not of nn.Linear's).",
        ),
        Bug(
            "half_width",
            lambda d_model, d_k, bias=True: (
                d_k * ((d_model + (1 if bias else 0)) / (12 * d_model)) ** 2
            ),
            "your answer is about 1/16 of the course's",
            "a number drawn uniformly from (a, b) has variance (b - a)^2 / 12, where b - a is the "
            "interval's whole width: for nn.Linear's (-1/sqrt(d_model), 1/sqrt(d_model)) that is "
            "2/sqrt(d_model), not 1/sqrt(d_model).",
        ),
        Bug(
            "no_bias",
            lambda d_model, d_k, bias=True: d_k / 9,
            "your answer is the same with bias=True as with bias=False",
            "with bias=True each nn.Linear adds a bias to every entry of q and of k, drawn from "
            "the same uniform distribution as its weights: its variance adds to each entry's.",
        ),
        Bug(
            "one_factor",
            lambda d_model, d_k, bias=True: d_k * _entry(d_model, bias),
            "your answer is about 3 times the course's",
            "each product q_i k_i has the variance Var(q_i) Var(k_i) (the derivation: the "
            "expectation of a product of independent factors splits). You used one of the two "
            "factors, not their product.",
        ),
        Bug(
            "sum_not_product",
            lambda d_model, d_k, bias=True: d_k * 2 * _entry(d_model, bias),
            "your answer is about 6 times the course's",
            "you added Var(q_i) and Var(k_i); the variance of the product q_i k_i of two "
            "independent, zero-mean numbers is the product of their variances.",
        ),
        Bug(
            "d_model_terms",
            lambda d_model, d_k, bias=True: d_model * _entry(d_model, bias) ** 2,
            "your answer grows with d_model, not with d_k",
            "q . k adds up d_k products q_i k_i, one per entry of q; d_model is how many terms "
            "make up each q_i, and it is already inside Var(q_i).",
        ),
        Bug(
            "fan_out",
            lambda d_model, d_k, bias=True: d_k * _entry(d_model, bias, fan_in=d_k) ** 2,
            "your answer is right when d_model equals d_k and wrong otherwise",
            "nn.Linear(in_features, out_features) draws from U(-a, a) with a = "
            "1/sqrt(in_features): for nn.Linear(d_model, d_k) that is d_model, the width of "
            "what goes in, not d_k.",
        ),
        Bug(
            "not_summed",
            lambda d_model, d_k, bias=True: _entry(d_model, bias) ** 2,
            "your answer does not grow with d_k",
            "q . k is a sum of d_k independent products, and the variances of independent "
            "terms add: d_k of them. (The exercise asks for the raw q . k, before any division "
            "by sqrt(d_k).)",
        ),
        Bug(
            "vector_variances",
            lambda d_model, d_k, bias=True: (d_k * _entry(d_model, bias)) ** 2,
            "your answer grows like d_k squared",
            "you multiplied the variances of the whole vectors, d_k Var(q_i) times d_k "
            "Var(k_i). q . k is the sum of the d_k products q_i k_i; their variances add, each "
            "Var(q_i) Var(k_i).",
        ),
        Bug(
            "standard_deviation",
            lambda d_model, d_k, bias=True: math.sqrt(score_variance_reference(d_model, d_k, bias)),
            "your answer is the square root of the course's: a standard deviation",
            "the exercise asks for the variance of q . k, the square of its standard deviation.",
        ),
    ),
    hints=(
        "The answer is exact, a formula in d_model, d_k and bias: a variance measured from "
        "samples comes out only near it. Find Var(W) of one weight of nn.Linear (its "
        "documentation says how it is drawn), then Var(q_i), then Var(q . k).",
    ),
)

# ---------------------------------------------------------------- softmax_jacobian


def softmax_jacobian_reference(scores: torch.Tensor) -> torch.Tensor:
    """Autograd's own Jacobian of the softmax: row i of every (T, T) matrix is the gradient of
    weight i with respect to that row's scores, T backward passes for all rows at once (rows
    do not mix, so the gradient of a sum over rows is each row's own) (lesson 03)."""
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
    lesson="03_scaling",
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

EXERCISES = (SOFTMAX_JACOBIAN, SCORE_VARIANCE)  # in the lesson's order
