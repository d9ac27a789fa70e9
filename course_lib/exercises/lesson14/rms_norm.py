"""Lesson 14's rms_norm exercise: normalise by the root mean square, keep the mean."""

import torch
import torch.nn.functional as F

from course_lib.exercises.core import Bug, Case, Exercise


def rms_norm_reference(x, weight, eps=1e-5):
    """torch's own RMSNorm (lesson 14; tests/test_exercises_lesson14.py checks it equals
    nn.RMSNorm)."""
    return F.rms_norm(x, x.shape[-1:], weight, eps)


def _rms_norm_cases() -> list[Case]:
    g = torch.Generator().manual_seed(14)

    def randn(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)

    def weight(D, dtype=torch.float32):
        return (0.5 + torch.rand(D, generator=g, dtype=torch.float64)).to(dtype)

    return [
        # first, where most mistakes show: an offset mean (centring changes the numbers) and
        # a weight far from ones
        Case((randn(2, 5, 16) + 3, weight(16)),
             label="a 3-D x (B, T, D) whose vectors' mean is near 3"),
        Case(
            (randn(2, 3, 8) * 1e-3, weight(8)),
            label="a small x (entries near 0.001): eps = 1e-5 is ten times its mean square",
        ),
        Case((randn(4, 8), weight(8)), {"eps": 0.1}, label="eps = 0.1 given by keyword"),
        Case((randn(6, 32) - 1, weight(32)), label="a 2-D x (T, D)"),
        Case((randn(12), weight(12)), label="a 1-D x: one token's vector"),
        Case(
            (randn(2, 4, 8, dtype=torch.float64) + 1, weight(8, torch.float64)),
            label="float64 x and weight: the result stays float64",
        ),
    ]  # fmt: skip


def _mean_square(x, dim=-1):
    return x.pow(2).mean(dim, keepdim=True)


RMS_NORM = Exercise(
    name="rms_norm",
    lesson="14_todays_block",
    reference=rms_norm_reference,
    cases=_rms_norm_cases,
    idea="the section 'RMSNorm: the scale without the centre' and exercise 1's text",
    bugs=(
        Bug(
            "mean_subtracted",
            lambda x, w, eps=1e-5: F.layer_norm(x, x.shape[-1:], w, None, eps),
            "your numbers are those of layer norm without its bias",
            "you subtract each vector's mean before dividing. That is layer norm; RMSNorm "
            "leaves the mean where it is and divides x itself by its root mean square.",
        ),
        Bug(
            "variance",
            lambda x, w, eps=1e-5: w * x / torch.sqrt(x.var(-1, keepdim=True, correction=0) + eps),
            "your numbers differ where a vector's mean is far from 0",
            "you divide by the standard deviation (the root of the variance, which measures "
            "the spread around the mean). RMSNorm divides by the root of the mean of the "
            "squares themselves, with no mean taken out.",
        ),
        Bug(
            "sqrt_of_sum",
            lambda x, w, eps=1e-5: w * x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + eps),
            "your outputs are too small by the square root of D",
            "you take the root of the sum of squares (the vector's length). RMSNorm takes the "
            "root of their mean, the sum divided by D, so each output entry is about 1 in "
            "size whatever D is.",
        ),
        Bug(
            "no_root",
            lambda x, w, eps=1e-5: w * x / (_mean_square(x) + eps),
            "your scale is off by a power: the outputs are not of size about 1",
            "you divide by the mean square itself; the root is missing. RMSNorm divides by "
            "sqrt(mean(x ** 2) + eps).",
        ),
        Bug(
            "first_axis",
            lambda x, w, eps=1e-5: w * x * torch.rsqrt(_mean_square(x, 0) + eps),
            "your mean is taken over the wrong axis",
            "you average the squares over the first axis (across the batch, or across "
            "positions); RMSNorm averages over the last axis, the D features of one token's "
            "vector, so each token is normalised on its own.",
        ),
        Bug(
            "every_axis",
            lambda x, w, eps=1e-5: w * x * torch.rsqrt(x.pow(2).mean() + eps),
            "your outputs are all divided by one number",
            "you take one mean over every entry of x. RMSNorm takes one per vector: over the "
            "last axis, keeping it (keepdim=True) so the (..., 1) root divides that "
            "vector's D entries.",
        ),
        Bug(
            "weight_added",
            lambda x, w, eps=1e-5: x * torch.rsqrt(_mean_square(x) + eps) + w,
            "your outputs are shifted by the weight",
            "you add the weight. RMSNorm multiplies by it, feature by feature: it is a gain "
            "(the one learned parameter RMSNorm has, where layer norm has a gain and a bias).",
        ),
        Bug(
            "no_weight",
            lambda x, w, eps=1e-5: x * torch.rsqrt(_mean_square(x) + eps),
            "your numbers are right for a weight of ones only",
            "the learned weight is never used: multiply the normalised vector by it, "
            "feature by feature.",
        ),
        Bug(
            "eps_outside",
            lambda x, w, eps=1e-5: w * x / (_mean_square(x).sqrt() + eps),
            "your numbers differ only for small vectors, where eps matters",
            "eps is added after the square root. torch's RMSNorm (and Llama's) adds it to the "
            "mean square, under the root: sqrt(mean(x ** 2) + eps). For vectors near 0.001 "
            "the two differ threefold.",
        ),
        Bug(
            "eps_ignored",
            lambda x, w, eps=1e-5: w * x * torch.rsqrt(_mean_square(x) + 1e-5),
            "your numbers are right for the default eps but not for eps = 0.1",
            "your function uses a fixed 1e-5 (or another number) instead of its eps argument.",
        ),
    ),
    # F.rms_norm is the reference: calling it (or nn.RMSNorm, which calls it) passes every
    # case without writing the formula
    forbidden=((F, "rms_norm"), (torch, "rms_norm")),
    forbidden_hint="The check compares with torch's rms_norm, so calling it (or nn.RMSNorm) "
    "proves nothing. Write the formula with tensor operations: the mean of the squares over "
    "the last axis, eps added under the root, then the weight.",
    hints=(
        "RMSNorm divides each vector, along its last axis, by the square root of the mean of "
        "its squares plus eps, then multiplies by weight, feature by feature.",
        "Keep the last axis (keepdim=True) so the (..., 1) root divides each vector's D "
        "entries; nothing is subtracted, and eps goes under the root.",
    ),
)
