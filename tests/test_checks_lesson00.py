"""Lesson 00's checker (softmax), and what every checker does with a crash or a non-function."""

import torch

from course_lib.checks import check_softmax
from helpers import assert_hints, stub, verdict


def test_softmax_checker(capsys):
    def stable(x):
        e = (x - x.max(-1, keepdim=True).values).exp()
        return e / e.sum(-1, keepdim=True)

    assert verdict(check_softmax, stable, capsys).startswith("PASS")
    assert_hints(
        check_softmax,
        {
            "FIRST axis": lambda x: torch.softmax(x, dim=0),
            "without dividing": torch.exp,
            "NaN or inf": lambda x: x.exp() / x.exp().sum(-1, keepdim=True),
            "forgot the exp": lambda x: x / x.sum(-1, keepdim=True),
        },
        capsys,
    )


def test_stub_is_reported_as_not_implemented(capsys):
    out = verdict(check_softmax, stub, capsys)
    assert out.startswith("TRY AGAIN") and "not implemented yet" in out


def test_checker_reports_a_crash_and_a_non_function(capsys):
    assert "raised AttributeError" in verdict(check_softmax, lambda x: x.nonexistent(), capsys)
    assert "expected a function, got str" in verdict(check_softmax, "softmax", capsys)
