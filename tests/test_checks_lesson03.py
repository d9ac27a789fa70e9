"""Lesson 03's checkers: pass right answers, name the likely bug, notice a stub."""

import pytest
import torch
from torch import nn

from course_lib import checks
from helpers import stub, verdict


def split_solution(x, num_heads):
    B, T, D = x.shape
    return x.view(B, T, num_heads, D // num_heads).transpose(1, 2)  # (B, H, T, d)


def merge_solution(y):
    B, H, T, d = y.shape
    return y.transpose(1, 2).contiguous().view(B, T, H * d)  # (B, T, D)


def multihead_solution(x, mha):
    B, T, D = x.shape
    H = mha.num_heads
    q, k, v = mha.qkv(x).chunk(3, dim=-1)  # each (B, T, D)
    q, k, v = (split_solution(t, H) for t in (q, k, v))  # each (B, H, T, d)
    y = nn.functional.scaled_dot_product_attention(q, k, v)  # (B, H, T, d)
    return mha.out(merge_solution(y))  # (B, T, D)


@pytest.mark.parametrize(
    "check,fn",
    [
        (checks.check_split_heads, split_solution),
        (checks.check_split_heads, lambda x, h: x.unflatten(-1, (h, -1)).permute(0, 2, 1, 3)),
        (checks.check_merge_heads, merge_solution),
        (checks.check_merge_heads, lambda y: y.permute(0, 2, 1, 3).flatten(2)),
        (checks.check_multihead, multihead_solution),
    ],
)
def test_right_answers_pass(check, fn, capsys):
    assert verdict(check, fn, capsys).startswith("PASS")


def test_multihead_reference_is_torch_multihead_attention():
    for x, mha in checks.multihead_cases():
        D = x.shape[-1]
        ref = nn.MultiheadAttention(D, mha.num_heads, batch_first=True)
        with torch.no_grad():
            ref.in_proj_weight.copy_(mha.qkv.weight)
            ref.in_proj_bias.copy_(mha.qkv.bias)
            ref.out_proj.weight.copy_(mha.out.weight)
            ref.out_proj.bias.copy_(mha.out.bias)
            torch.testing.assert_close(checks.multihead_reference(x, mha), ref(x, x, x)[0])


@pytest.mark.parametrize(
    "kind,hint",
    [
        ("view_only", "viewed (B, T, D) straight as (B, H, T, d)"),
        ("no_transpose", "missing swap"),
        ("interleaved", "CONTIGUOUS block of d features"),
    ],
)
def test_split_bugs_get_their_hint(kind, hint, capsys):
    out = verdict(checks.check_split_heads, checks._split_wrong(kind), capsys)
    assert out.startswith("TRY AGAIN") and hint in out


@pytest.mark.parametrize(
    "kind,hint",
    [
        ("no_transpose", "without transposing back"),
        ("transpose_only", "now join the last two"),
        ("interleaved", "interleaved feature by feature"),
        ("sum", "CONCATENATES"),
    ],
)
def test_merge_bugs_get_their_hint(kind, hint, capsys):
    out = verdict(checks.check_merge_heads, checks._merge_wrong(kind), capsys)
    assert out.startswith("TRY AGAIN") and hint in out


@pytest.mark.parametrize(
    "kind,hint",
    [
        ("no_out", "output projection is missing"),
        ("view_only", "viewed straight as (B, H, T, d)"),
        ("merge_no_transpose", "without transposing (B, H, T, d) back"),
        ("qkv_interleaved", "laid out [q | k | v]"),
        ("scale_D", "sqrt(d), its OWN width"),
    ],
)
def test_multihead_bugs_get_their_hint(kind, hint, capsys):
    out = verdict(checks.check_multihead, checks._multihead_wrong(kind), capsys)
    assert out.startswith("TRY AGAIN") and hint in out


def test_hand_written_bugs_are_caught_too(capsys):
    # written independently of the checker's own wrong versions
    def no_out(x, mha):
        B, T, D = x.shape
        q, k, v = mha.qkv(x).chunk(3, dim=-1)
        q, k, v = (split_solution(t, mha.num_heads) for t in (q, k, v))
        return merge_solution(nn.functional.scaled_dot_product_attention(q, k, v))

    assert "output projection is missing" in verdict(checks.check_multihead, no_out, capsys)
    out = verdict(checks.check_merge_heads, lambda y: y.reshape(y.shape[0], y.shape[2], -1), capsys)
    assert "without transposing back" in out


@pytest.mark.parametrize(
    "check", [checks.check_split_heads, checks.check_merge_heads, checks.check_multihead]
)
def test_stub_is_not_implemented_yet(check, capsys):
    assert "not implemented yet" in verdict(check, stub, capsys)
