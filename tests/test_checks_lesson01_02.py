"""Lesson 01-02 checkers: pass the reference, fail typical bugs with the right hint, spot stubs."""

import math

import pytest
import torch

from course_lib.checks import (
    check_attention,
    check_causal_mask,
    check_entropy,
    check_score_variance,
)
from helpers import assert_hints, stub, verdict


@pytest.mark.parametrize(
    "checker", [check_attention, check_causal_mask, check_score_variance, check_entropy]
)
def test_stub_is_not_implemented_yet(checker, capsys):
    out = verdict(checker, stub, capsys)
    assert out.startswith("TRY AGAIN") and "not implemented yet" in out


# ---------------------------------------------------------------- lesson 01, as learners write it


def learner_attention(softmax_dim=-1, divide=math.sqrt, scale_after=False, masked_value=-math.inf):
    def attention(q, k, v, mask=None):
        scores = q @ k.transpose(-2, -1)  # (..., T_q, T_k)
        if not scale_after:
            scores = scores / divide(q.shape[-1])
        if mask is not None:
            scores = scores.masked_fill(mask == 0, masked_value)
        weights = scores.softmax(dim=softmax_dim)
        if scale_after:
            weights = weights / divide(q.shape[-1])
        return weights @ v, weights

    return attention


def test_attention_checker_on_learner_code(capsys):
    assert verdict(check_attention, learner_attention(), capsys).startswith("PASS")
    assert_hints(
        check_attention,
        {
            "LAST axis": learner_attention(softmax_dim=1),
            "not scaled": learner_attention(divide=lambda d: 1),
            "you divide by d_k": learner_attention(divide=lambda d: d),
            "after the softmax": learner_attention(scale_after=True),
            "masked positions must be 0": learner_attention(masked_value=0.0),
        },
        capsys,
    )

    def keys_not_transposed(q, k, v, mask=None):  # shapes only line up when T == d_k
        weights = (q @ k / q.shape[-1] ** 0.5).softmax(dim=-1)
        return weights @ v, weights

    out = verdict(check_attention, keys_not_transposed, capsys)
    assert out.startswith("TRY AGAIN") and "raised RuntimeError" in out


def test_causal_mask_checker_on_learner_code(capsys):
    def loops(T):
        return torch.tensor([[s <= t for s in range(T)] for t in range(T)])

    assert verdict(check_causal_mask, loops, capsys).startswith("PASS")
    assert_hints(
        check_causal_mask,
        {
            "transpose": lambda T: torch.tensor([[s >= t for s in range(T)] for t in range(T)]),
            "swapped": lambda T: torch.tensor([[s > t for s in range(T)] for t in range(T)]),
            "diagonal is False": lambda T: torch.tensor(
                [[s < t for s in range(T)] for t in range(T)]
            ),
            "wrong dtype": lambda T: torch.tril(torch.ones(T, T, dtype=torch.int64)),
        },
        capsys,
    )


# ---------------------------------------------------------------- lesson 02


def learner_variance(reduce="var", pair="rows", divide=math.sqrt, where="scores"):
    def score_variance(q, k, scale):
        d_k = q.shape[-1]
        scores = (q * k).sum(dim=1) if pair == "rows" else (q * k) if pair == "none" else q @ k.T
        if scale and where == "scores":
            scores = scores / divide(d_k)
        if reduce == "var":
            out = scores.var()
        elif reduce == "biased":
            out = ((scores - scores.mean()) ** 2).mean()
        elif reduce == "square":
            out = (scores**2).mean()
        else:
            out = scores.std()
        if scale and where == "variance":
            out = out / divide(d_k)
        return out

    return score_variance


def test_score_variance_checker(capsys):
    assert verdict(check_score_variance, learner_variance(), capsys).startswith("PASS")
    assert verdict(check_score_variance, learner_variance(reduce="biased"), capsys).startswith(
        "PASS"
    )  # dividing by n is right too
    assert verdict(
        check_score_variance, lambda q, k, scale: learner_variance()(q, k, scale).item(), capsys
    ).startswith("PASS")  # a float
    assert_hints(
        check_score_variance,
        {
            "standard deviation": learner_variance(reduce="std"),
            "every query against every key": learner_variance(pair="all"),
            "sum them over the d_k axis": learner_variance(pair="none"),
            "not by d_k": learner_variance(divide=lambda d: d),
            "divided the variance by sqrt(d_k)": learner_variance(where="variance"),
            "yours ignores it": learner_variance(where="nowhere"),
            "nearly right": learner_variance(reduce="square"),
        },
        capsys,
    )


def test_entropy_checker(capsys):
    def entropy(p):
        logs = torch.where(p > 0, p.log(), torch.zeros_like(p))
        return -(p * logs).sum(dim=-1)

    assert verdict(check_entropy, entropy, capsys).startswith("PASS")
    assert verdict(
        check_entropy, lambda p: torch.distributions.Categorical(probs=p).entropy(), capsys
    ).startswith("PASS")
    assert_hints(
        check_entropy,
        {
            "in bits": lambda p: -(p * torch.where(p > 0, p.log2(), 0.0)).sum(-1),
            "sign is flipped": lambda p: (p * torch.where(p > 0, p.log(), 0.0)).sum(-1),
            "first axis": lambda p: -(p * torch.where(p > 0, p.log(), 0.0)).sum(0),
            "averaged": lambda p: -(p * torch.where(p > 0, p.log(), 0.0)).mean(-1),
            "NaN": lambda p: -(p * p.log()).sum(-1),
        },
        capsys,
    )
