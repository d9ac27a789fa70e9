"""Lesson 04's checkers: pass right answers, name the likely bug, notice a stub."""

import math
from pathlib import Path

import nbformat
import pytest
import torch

from course_lib import checks
from course_lib.workspace import stub_solutions
from helpers import verdict

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "04_positional_encoding.ipynb"


# ---------------------------------------------------------------- written as a learner would


def sinusoidal(seq_len, d_model, *, swap=False, exponent="2i", halves=False, multiply=False):
    pe = torch.zeros(seq_len, d_model)
    for p in range(seq_len):
        for i in range(d_model // 2):
            power = {"2i": 2 * i, "i": i}[exponent] / d_model
            angle = p * 10000**power if multiply else p / 10000**power
            first, second = (
                (math.cos(angle), math.sin(angle)) if swap else (math.sin(angle), math.cos(angle))
            )
            if halves:
                pe[p, i], pe[p, d_model // 2 + i] = first, second
            else:
                pe[p, 2 * i], pe[p, 2 * i + 1] = first, second
    return pe


def sinusoidal_by_column(seq_len, d_model):  # each column its own exponent j / D
    pe = torch.zeros(seq_len, d_model)
    for p in range(seq_len):
        for j in range(d_model):
            angle = p / 10000 ** (j / d_model)
            pe[p, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return pe


def rotate(pair, angle, *, clockwise=False, overwrite=False, swap=False):
    angle = torch.as_tensor(angle, dtype=pair.dtype)
    if clockwise:
        angle = -angle
    c, s = (angle.sin(), angle.cos()) if swap else (angle.cos(), angle.sin())
    out = pair.clone()
    out[..., 0] = pair[..., 0] * c - pair[..., 1] * s
    source = out if overwrite else pair
    out[..., 1] = source[..., 0] * s + pair[..., 1] * c
    return out


def rope_score(q, k, m, n, *, layout="pairs", exponent="2i", clockwise=False, rotate_k=True):
    d = q.shape[0]
    total = 0.0
    for i in range(d // 2):
        a, b = (2 * i, 2 * i + 1) if layout == "pairs" else (i, i + d // 2)
        theta = 10000 ** (-{"2i": 2 * i, "i": i}[exponent] / d)
        qr = rotate(q[[a, b]], m * theta, clockwise=clockwise)
        kr = rotate(k[[a, b]], (n if rotate_k else 0) * theta, clockwise=clockwise)
        total = total + (qr * kr).sum()
    return total


def rope_score_complex(q, k, m, n):  # independent: pairs as complex numbers
    d = q.shape[0]
    theta = 10000 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    zq = torch.view_as_complex(q.double().reshape(-1, 2).contiguous()) * torch.exp(1j * m * theta)
    zk = torch.view_as_complex(k.double().reshape(-1, 2).contiguous()) * torch.exp(1j * n * theta)
    return (zq * zk.conj()).real.sum().float()  # Re(q conj(k)) is the dot product of the pairs


# ---------------------------------------------------------------- right answers pass


@pytest.mark.parametrize(
    "check,fn",
    [
        (checks.check_sinusoidal_encoding, sinusoidal),
        (checks.check_sinusoidal_encoding, checks.sinusoidal_encoding),
        (checks.check_rotate_pair, rotate),
        (
            checks.check_rotate_pair,
            lambda p, a: torch.view_as_real(
                torch.view_as_complex(p.contiguous()) * torch.exp(1j * torch.as_tensor(a))
            ),
        ),
        (checks.check_rope_score, rope_score),
        (checks.check_rope_score, rope_score_complex),
        (checks.check_rope_score, lambda q, k, m, n: float(rope_score_complex(q, k, m, n))),
    ],
)
def test_right_answers_pass(check, fn, capsys):
    out = verdict(check, fn, capsys)
    assert out.startswith("PASS"), out


def test_rope_score_reference_matches_complex_numbers():
    for q, k, m, n in checks.rope_score_cases():
        torch.testing.assert_close(
            checks.rope_score_reference(q, k, m, n), rope_score_complex(q, k, m, n)
        )


# ---------------------------------------------------------------- typical bugs get their hint


@pytest.mark.parametrize(
    "wrong,hint",
    [
        (lambda T, D: sinusoidal(T, D, swap=True), "sin and cos are swapped"),
        (lambda T, D: sinusoidal(T, D, exponent="i"), "you used i/D"),
        (sinusoidal_by_column, "share ONE angle"),
        (lambda T, D: sinusoidal(T, D, halves=True), "interleaves them"),
        (lambda T, D: sinusoidal(T, D, multiply=True), "you multiplied"),
    ],
)
def test_sinusoidal_bugs_get_their_hint(wrong, hint, capsys):
    out = verdict(checks.check_sinusoidal_encoding, wrong, capsys)
    assert out.startswith("TRY AGAIN") and hint in out, out


@pytest.mark.parametrize(
    "wrong,hint",
    [
        (lambda p, a: rotate(p, a, clockwise=True), "you rotate clockwise"),
        (lambda p, a: rotate(p, a, overwrite=True), "you overwrote x"),
        (lambda p, a: rotate(p, a, swap=True), "sin and cos are swapped"),
        (lambda p, a: rotate(p, a).flip(-1), "wrong order"),
        (
            lambda p, a: torch.stack(
                (
                    p[..., 0] * torch.as_tensor(a).cos() + p[..., 1] * torch.as_tensor(a).sin(),
                    p[..., 0] * torch.as_tensor(a).sin() + p[..., 1] * torch.as_tensor(a).cos(),
                ),
                -1,
            ),
            "a minus sign is missing",
        ),
    ],
)
def test_rotate_pair_bugs_get_their_hint(wrong, hint, capsys):
    out = verdict(checks.check_rotate_pair, wrong, capsys)
    assert out.startswith("TRY AGAIN") and hint in out, out


@pytest.mark.parametrize(
    "wrong,hint",
    [
        (lambda q, k, m, n: rope_score(q, k, m, n, clockwise=True), "with m and n swapped"),
        (lambda q, k, m, n: rope_score(q, k, n, m), "with m and n swapped"),
        (lambda q, k, m, n: rope_score(q, k, m, n, layout="halves"), "'rotate half'"),
        (lambda q, k, m, n: rope_score(q, k, m, n, exponent="i"), "you used base**(-i/d)"),
        (lambda q, k, m, n: rope_score(q, k, m, n, rotate_k=False), "rotate k too"),
        (lambda q, k, m, n: (q * k).sum(), "nothing was rotated"),
    ],
)
def test_rope_score_bugs_get_their_hint(wrong, hint, capsys):
    out = verdict(checks.check_rope_score, wrong, capsys)
    assert out.startswith("TRY AGAIN") and hint in out, out


def test_wrong_shape_and_exceptions_are_reported(capsys):
    out = verdict(checks.check_sinusoidal_encoding, lambda T, D: torch.zeros(D, T), capsys)
    assert "expected shape" in out
    out = verdict(checks.check_rotate_pair, lambda p, a: p.foo(), capsys)
    assert "raised AttributeError" in out


def test_notebook_stubs_say_not_implemented_yet(capsys):
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    sources = [
        c.source for c in notebook.cells if c.cell_type == "code" and "# BEGIN SOLUTION" in c.source
    ]
    assert len(sources) == 3
    namespace = {"torch": torch}
    for source in sources:
        exec(stub_solutions(source), namespace)
    for check, name in (
        (checks.check_sinusoidal_encoding, "sinusoidal_encoding"),
        (checks.check_rotate_pair, "rotate_pair"),
        (checks.check_rope_score, "rope_score"),
    ):
        out = verdict(check, namespace[name], capsys)
        assert "not implemented yet" in out, out
