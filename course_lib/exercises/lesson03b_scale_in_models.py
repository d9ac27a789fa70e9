"""Lesson 03b_scale_in_models's exercise: the variance of a score under nn.Linear's default
initialisation, derived (Exercise 1).

- score_variance(d_model, d_k, bias=True) -> float: Var(q . k) for q = W_Q(x), k = W_K(x'),
  W_Q and W_K two fresh nn.Linear(d_model, d_k, bias=bias), x and x' with independent
  entries of mean 0 and variance 1; over the draws of the inputs and of both layers. The
  reference is the exact formula; tests/test_exercises_lesson03b_scale_in_models.py measures
  it.
"""

import math

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
    lesson="03b_scale_in_models",
    reference=score_variance_reference,
    cases=_variance_cases,
    idea="lesson 03a's cell 'The variance of a score grows with d_k', which derives Var(q . k) "
    "from the variance of each entry, and the two facts Exercise 1 works on other cases "
    "(weights drawn from N(0, sigma^2), and a number drawn uniformly from (0, 1))",
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

EXERCISES = (SCORE_VARIANCE,)
