"""Checkers pass the course's version, say "not implemented" for the stub, and name typical bugs."""

import math

import pytest
import torch

from course_lib.checks import check_attention, check_causal_mask, check_softmax


def said(capsys) -> str:
    return capsys.readouterr().out


def stub(*args, **kwargs):
    raise NotImplementedError("Exercise: write your code here")


@pytest.mark.parametrize("checker", [check_softmax, check_attention, check_causal_mask])
def test_stub_is_reported_as_not_implemented(checker, capsys):
    checker(stub)
    out = said(capsys)
    assert out.startswith("TRY AGAIN") and "not implemented yet" in out


def test_softmax_checker(capsys):
    def stable(x):
        e = (x - x.max(-1, keepdim=True).values).exp()
        return e / e.sum(-1, keepdim=True)

    check_softmax(stable)
    assert said(capsys).startswith("PASS")
    wrong = {
        "FIRST axis": lambda x: torch.softmax(x, dim=0),
        "without dividing": torch.exp,
        "NaN or inf": lambda x: x.exp() / x.exp().sum(-1, keepdim=True),
        "forgot the exp": lambda x: x / x.sum(-1, keepdim=True),
    }
    for hint, fn in wrong.items():
        check_softmax(fn)
        out = said(capsys)
        assert out.startswith("TRY AGAIN") and hint in out, (hint, out)


def attention_variant(dim=-1, scale=None, transpose_k=True, fill=float("-inf")):
    def attention(q, k, v, mask=None):
        d_k = q.shape[-1]
        kt = k.transpose(-2, -1) if transpose_k else k
        scores = q @ kt / (math.sqrt(d_k) if scale is None else scale(d_k))
        if mask is not None:
            scores = scores.masked_fill(~mask, fill)
        w = torch.softmax(scores, dim=dim)
        return w @ v, w

    return attention


def test_attention_checker(capsys):
    check_attention(attention_variant())
    assert said(capsys).startswith("PASS")
    wrong = {
        "LAST axis": attention_variant(dim=-2),
        "not scaled": attention_variant(scale=lambda d: 1.0),
        "you divide by d_k": attention_variant(scale=lambda d: d),
        "masked positions must be 0": attention_variant(fill=0.0),
    }
    for hint, fn in wrong.items():
        check_attention(fn)
        out = said(capsys)
        assert out.startswith("TRY AGAIN") and hint in out, (hint, out)
    # K not transposed: shapes only line up when T == d_k, so the error is reported
    check_attention(attention_variant(transpose_k=False))
    out = said(capsys)
    assert out.startswith("TRY AGAIN") and "raised RuntimeError" in out


def test_causal_mask_checker(capsys):
    check_causal_mask(lambda T: torch.ones(T, T, dtype=torch.bool).tril())
    assert said(capsys).startswith("PASS")
    wrong = {
        "transpose": lambda T: torch.ones(T, T, dtype=torch.bool).triu(),
        "swapped": lambda T: ~torch.ones(T, T, dtype=torch.bool).tril(),
        "diagonal is False": lambda T: torch.ones(T, T, dtype=torch.bool).tril(-1),
        "wrong dtype": lambda T: torch.ones(T, T).tril(),
    }
    for hint, fn in wrong.items():
        check_causal_mask(fn)
        out = said(capsys)
        assert out.startswith("TRY AGAIN") and hint in out, (hint, out)


def test_checker_reports_a_crash_and_a_non_function(capsys):
    check_softmax(lambda x: x.nonexistent())
    assert "raised AttributeError" in said(capsys)
    check_softmax("softmax")
    assert "expected a function, got str" in said(capsys)
