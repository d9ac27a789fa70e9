"""Lesson 17b's claims, each measured with the lessons' own solutions (read from the notebooks as
a later lesson reads them): what lesson 02b's attention allocates, that the tiled forward
never allocates a (T, T) block, what autograd keeps through the loop and through the
recomputing Function, and the lesson's numbers as its text quotes them.

Bytes are the same on every kernel path (checked on the native, generic and AVX2 ones); only
the gradient comparison rounds, and its worst case is in its comment.
"""

import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from course_lib.attention import causal_mask
from course_lib.memory import allocations, saved_for_backward
from course_lib.tiled_attention import flash_attention, tiled_forward
from helpers import lesson_markdown, notebook_functions, printed_by_cell

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOK = NOTEBOOKS / "17b_tiled_memory_and_backward.ipynb"
B, H, d, TILE = 1, 4, 32, 64
LENGTHS = (128, 256, 512, 1024)


@pytest.fixture(scope="module")
def mine():
    return notebook_functions("attention", "online_attention", "tiled_backward")


def qkv(T, grad=False):
    g = torch.Generator().manual_seed(T)
    return [torch.randn(B, H, T, d, generator=g).requires_grad_(grad) for _ in range(3)]


# ---------------------------------------------------------------- what attention holds


@pytest.mark.slow  # the profiler's first start takes about 1.5 s
def test_lesson_02b_attention_allocates_two_matrices_that_grow_as_T_squared(mine):
    peaks = []
    for T in (256, 512):
        with torch.no_grad():
            used = allocations(mine["attention"], *qkv(T), causal_mask(T))
        matrix = B * H * T * T * 4
        assert used.largest_bytes == matrix
        assert 2 * matrix <= used.peak_bytes < 2.3 * matrix  # scores and weights, at once
        peaks.append(used.peak_bytes)
    assert 3.8 < peaks[1] / peaks[0] < 4.1  # the output and the mask add a little, below 4


# ---------------------------------------------------------------- the memory claim


@pytest.mark.slow  # the profiler
@pytest.mark.parametrize("T", [256, 1024])
def test_the_tiled_forward_never_allocates_a_T_by_T_block(mine, T):
    with torch.no_grad():
        used = allocations(mine["online_attention"], *qkv(T), causal_mask(T), tile_size=TILE)
    assert used.largest_bytes == B * H * T * TILE * 4  # one tile's scores
    assert used.largest_bytes * (T // TILE) == B * H * T * T * 4


@pytest.mark.slow  # the profiler
def test_the_tiled_peak_doubles_with_T_and_is_below_the_whole_from_256_on(mine):
    peaks, whole = [], []
    for T in LENGTHS:
        with torch.no_grad():
            args = (*qkv(T), causal_mask(T))
            peaks.append(allocations(mine["online_attention"], *args, tile_size=TILE).peak_bytes)
            whole.append(allocations(mine["attention"], *args).peak_bytes)
    for a, b in zip(peaks[1:], peaks[2:], strict=False):
        assert 1.9 < b / a < 2.1
    assert peaks[0] >= 0.95 * whole[0]  # two tiles at T = 128: no saving yet, as the text says
    assert all(p < w / 1.5 for p, w in zip(peaks[1:], whole[1:], strict=True))


# ---------------------------------------------------------------- what autograd keeps


def test_autograd_through_the_loop_keeps_more_than_lesson_02_and_grows_as_T_squared(mine):
    loop, plain, flash, fused = [], [], [], []
    for T in LENGTHS[:3]:
        q, k, v = qkv(T, grad=True)
        loop.append(saved_for_backward(mine["online_attention"], q, k, v, tile_size=TILE).bytes)
        plain.append(saved_for_backward(mine["attention"], q, k, v).bytes)
        flash.append(saved_for_backward(flash_attention, q, k, v, tile_size=TILE).bytes)
        fused.append(saved_for_backward(F.scaled_dot_product_attention, q, k, v).bytes)
        five = B * H * (4 * T * d + T) * 4  # q, k, v, the output, lse
        assert flash[-1] == fused[-1] == five
    assert all(a > b for a, b in zip(loop, plain, strict=True))
    assert 3.5 < loop[2] / loop[1] < 4.1 and 3.3 < plain[2] / plain[1] < 4.1


def test_torchs_kernel_saves_the_same_five_tensors():
    q, k, v = qkv(128, grad=True)
    saved = saved_for_backward(F.scaled_dot_product_attention, q, k, v)
    assert sorted(saved.shapes) == sorted([(B, H, 128, d)] * 4 + [(B, H, 128)])


# ---------------------------------------------------------------- the recomputing backward


def test_the_learners_backward_in_a_function_gives_torchs_gradients_and_saves_no_tile(
    mine, measure
):
    tiled_backward = mine["tiled_backward"]

    class MyTiledAttention(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, tile_size):
            out, lse = tiled_forward(q, k, v, tile_size=tile_size)
            ctx.save_for_backward(q, k, v, out, lse)
            ctx.tile_size = tile_size
            return out

        @staticmethod
        def backward(ctx, grad_out):
            q, k, v, out, lse = ctx.saved_tensors
            return (*tiled_backward(q, k, v, out, lse, grad_out, tile_size=ctx.tile_size), None)

    q, k, v = qkv(512, grad=True)
    grad_out = torch.randn(q.shape, generator=torch.Generator().manual_seed(1))
    ours = torch.autograd.grad(MyTiledAttention.apply(q, k, v, TILE), (q, k, v), grad_out)
    theirs = torch.autograd.grad(F.scaled_dot_product_attention(q, k, v), (q, k, v), grad_out)
    gap = max((a - b).abs().max().item() for a, b in zip(ours, theirs, strict=True))
    # measured about 1e-6 on the native path; the lesson prints "below 1e-4"
    assert measure("largest gradient difference from torch's kernel", gap) < 1e-5
    saved = saved_for_backward(MyTiledAttention.apply, q, k, v, TILE).bytes
    assert saved == saved_for_backward(flash_attention, q, k, v, tile_size=TILE).bytes


# ---------------------------------------------------------------- the lesson's own numbers


def test_the_stored_tables_say_what_the_text_says():
    out = printed_by_cell(NOTEBOOK)
    first = next(o for o in out if "one (B, H, T, 64) tile   yours: largest" in o)
    rows = {int(r.split()[0]): [float(x) for x in re.findall(r"([\d.]+) MiB", r)]
            for r in first.splitlines()[1:5]}  # fmt: skip
    assert sorted(rows) == list(LENGTHS)
    for T, (matrix, tile, largest, _, whole) in rows.items():
        assert largest == tile == round(matrix * TILE / T, 2), T  # one tile's scores
        assert 2 * matrix <= whole < 2.3 * matrix, T  # lesson 02b: scores and weights at once
    assert rows[128][3] >= rows[128][4]  # "weigh as much as the matrices it avoids"
    assert all(rows[T][3] < rows[T][4] for T in LENGTHS[1:])  # "from T = 256 on it needs less"
    judged = next(o for o in out if o.startswith("Measured largest block at T = 1024: 1.00 MiB"))
    assert "below 1e-5" in judged
    saved = next(o for o in out if o.startswith("saved for the backward, MiB:")).splitlines()
    rows = [line.rsplit(maxsplit=len(LENGTHS)) for line in saved[2:]]
    table = {name.strip(): [float(x) for x in sizes] for name, *sizes in rows}
    assert all(a > b for a, b in zip(table["your online_attention"], table["lesson 02b attention"],
                                     strict=True))  # fmt: skip
    assert table["flash_attention"] == table["torch's kernel"]
    text = lesson_markdown(NOTEBOOK)
    for quoted in ("43.08", "17.50"):
        assert quoted in " ".join(saved)
    assert "Lesson 17a" in text and "(the last column)" in text


def test_the_lesson_ends_by_saying_it_is_the_last_and_the_mask_is_not_counted():
    text = lesson_markdown(NOTEBOOK)
    assert "This is the course's last lesson." in text
    assert "[lesson list](../README.md#the-lessons)" in text
    assert "## The lessons" in (NOTEBOOKS.parent / "README.md").read_text(encoding="utf-8")
    assert "1.00 MiB at $T = 1024$" in text and "the table does not count it" in text
    assert 1024 * 1024 == 2**20  # the bool mask: one byte an entry, 1.00 MiB
    assert "make bench" not in text
