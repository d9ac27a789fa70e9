"""Lesson 05's checkers: pass the reference, name the likely bug, notice a stub."""

from pathlib import Path

import nbformat
import pytest
import torch
from torch import nn

from course_lib import checks
from course_lib.workspace import stub_solutions
from helpers import verdict

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "05_transformer_block.ipynb"


def layer_norm_solution(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
    var = x.var(dim=-1, unbiased=False, keepdim=True)  # (..., 1)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def prenorm_solution(x, attn, ff, norm1, norm2):
    h = x + attn(norm1(x))
    return h + ff(norm2(h))


@pytest.mark.parametrize(
    "check,fn",
    [
        (checks.check_prenorm_block, prenorm_solution),
        (checks.check_prenorm_block, checks.prenorm_block_reference),
        (checks.check_layer_norm, layer_norm_solution),
        (
            checks.check_layer_norm,
            lambda x, w, b, eps=1e-5: nn.functional.layer_norm(x, x.shape[-1:], w, b, eps),
        ),
    ],
)
def test_right_answers_pass(check, fn, capsys):
    assert verdict(check, fn, capsys).startswith("PASS")


def test_layer_norm_reference_is_torch_layer_norm():
    for x, weight, bias, eps in checks.layer_norm_cases():
        norm = nn.LayerNorm(x.shape[-1], eps=eps)
        norm.weight.data, norm.bias.data = weight, bias
        torch.testing.assert_close(checks.layer_norm_reference(x, weight, bias, eps), norm(x))


@pytest.mark.parametrize(
    "kind,hint",
    [
        ("postnorm", "post-norm order"),
        ("no_residual", "residual additions are missing"),
        ("residual_from_normed", "NORMALISED input"),
        ("same_norm", "use norm2 there"),
        ("ff_sees_x", "not the block's input x"),
        ("one_residual", "its own residual addition"),
    ],
)
def test_prenorm_bugs_get_their_hint(kind, hint, capsys):
    out = verdict(checks.check_prenorm_block, checks._prenorm_wrong(kind), capsys)
    assert out.startswith("TRY AGAIN") and hint in out


@pytest.mark.parametrize(
    "wrong,hint",
    [
        (
            lambda x, w, b, eps=1e-5: (
                (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + eps) * w + b
            ),
            "unbiased=False",
        ),
        (
            lambda x, w, b, eps=1e-5: (
                (x - x.mean(-1, keepdim=True)) / (x.std(-1, unbiased=False, keepdim=True) + eps) * w
                + b
            ),
            "INSIDE the square root",
        ),
        (
            lambda x, w, b, eps=1e-5: nn.functional.layer_norm(x, x.shape[-1:], eps=eps),
            "gain and bias",
        ),
        (
            lambda x, w, b, eps=1e-5: (nn.functional.layer_norm(x, x.shape[-1:], eps=eps) + b) * w,
            "scale first",
        ),
        (
            lambda x, w, b, eps=1e-5: (
                x / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps) * w + b
            ),
            "subtract each token's mean",
        ),
    ],
)
def test_layer_norm_bugs_written_as_a_learner_would_get_their_hint(wrong, hint, capsys):
    out = verdict(checks.check_layer_norm, wrong, capsys)
    assert out.startswith("TRY AGAIN") and hint in out, out


def test_batch_norm_style_statistics_are_named(capsys):
    def per_feature(x, w, b, eps=1e-5):
        flat = x.reshape(-1, x.shape[-1])  # (N, D)
        return (x - flat.mean(0)) / torch.sqrt(flat.var(0, unbiased=False) + eps) * w + b

    out = verdict(checks.check_layer_norm, per_feature, capsys)
    assert "that is batch norm" in out


def test_wrong_shape_and_exceptions_are_reported(capsys):
    out = verdict(checks.check_layer_norm, lambda x, w, b, eps=1e-5: x.mean(-1), capsys)
    assert "expected shape" in out
    out = verdict(checks.check_prenorm_block, lambda x, *parts: x.foo(), capsys)
    assert "raised AttributeError" in out


def test_notebook_stubs_say_not_implemented_yet(capsys):
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    sources = [
        c.source for c in notebook.cells if c.cell_type == "code" and "# BEGIN SOLUTION" in c.source
    ]
    assert len(sources) == 2
    namespace = {"torch": torch}
    for source in sources:
        exec(stub_solutions(source), namespace)
    for check, name in (
        (checks.check_prenorm_block, "prenorm_block"),
        (checks.check_layer_norm, "layer_norm"),
    ):
        out = verdict(check, namespace[name], capsys)
        assert "not implemented yet" in out, out
