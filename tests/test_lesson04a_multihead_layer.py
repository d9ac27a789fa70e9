"""Lesson 04a's claims: the layout examples, torch equivalence, parameter counts, and the
check yourself's answer on the scale of each head.

The worked example prints six numbers to three decimals: each is at least 1e-5 from a rounding
boundary, and the kernel paths differ by about 1e-7.
"""

from pathlib import Path

import nbformat
import pytest
import torch
from torch import nn

from course_lib.attention import causal_mask, scaled_dot_product_attention
from course_lib.multihead import MultiHeadAttention
from helpers import notebook_functions

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def step_by_step(x, mha, mask=None):
    """The forward pass written out: qkv, split, attend per head, merge, out."""
    B, T, D = x.shape
    H = mha.num_heads
    q, k, v = mha.qkv(x).split(D, dim=-1)  # each (B, T, D)
    q, k, v = (t.view(B, T, H, D // H).transpose(1, 2) for t in (q, k, v))  # (B, H, T, d)
    y, w = scaled_dot_product_attention(q, k, v, mask)  # (B, H, T, d), (B, H, T, T)
    return mha.out(y.transpose(1, 2).reshape(B, T, D)), w  # (B, T, D)


@pytest.mark.parametrize("D,H", [(16, 1), (16, 4), (64, 8), (24, 6)])
@pytest.mark.parametrize("causal", [False, True])
def test_step_by_step_matches_torch_multihead_attention(D, H, causal):
    mha = MultiHeadAttention(D, H)
    ref = mha.to_torch()
    x = torch.randn(2, 7, D)
    mask = causal_mask(7) if causal else None
    ref_out, ref_w = ref(x, x, x, attn_mask=None if mask is None else ~mask,
                         average_attn_weights=False)  # fmt: skip
    out, w = step_by_step(x, mha, mask)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(w, ref_w)
    torch.testing.assert_close(mha(x, mask), ref_out)


def test_numbered_example_gives_each_head_a_block_of_neighbours():
    # the lesson prints the layout from its rule (token t, feature f holds 10 t + f; D = 6,
    # H = 2) as plain lists; the course's layer cuts the same way
    numbered = (10 * torch.arange(3)[:, None] + torch.arange(6))[None]  # (1, 3, 6)
    layer = MultiHeadAttention(6, 2)
    with torch.no_grad():  # projections that hand x on unchanged: q = k = v = x
        layer.qkv.weight.copy_(torch.eye(6).repeat(3, 1))  # (3D, D)
        layer.qkv.bias.zero_()
    cut, _, _ = layer.qkv_heads(numbered.float())  # q of shape (1, 2, 3, 3)
    assert cut[0, 0].tolist() == [[0, 1, 2], [10, 11, 12], [20, 21, 22]]
    assert cut[0, 1].tolist() == [[3, 4, 5], [13, 14, 15], [23, 24, 25]]


def test_viewing_straight_into_the_head_shape_cuts_the_sequence():
    # the prediction: head 1's row for token 0 starts with 13 (the contract wants 3); head 0
    # got token 0 and the first half of token 1
    numbered = (10 * torch.arange(3)[:, None] + torch.arange(6))[None]
    straight = numbered.view(1, 2, 3, 3)
    assert straight[0, 1, 0, 0].item() == 13
    assert straight[0, 0].tolist() == [[0, 1, 2], [3, 4, 5], [10, 11, 12]]
    assert straight[0, 1].tolist() == [[13, 14, 15], [20, 21, 22], [23, 24, 25]]


def test_transpose_example():
    # "the swapped tensor's own order is 0, 3, 1, 4, 2, 5; in memory its numbers still lie 0
    # to 5": transpose moved nothing, and reading the swapped tensor follows its own order
    grid = torch.arange(6).view(2, 3)
    swapped = grid.transpose(0, 1)
    assert swapped.tolist() == [[0, 3], [1, 4], [2, 5]] and not swapped.is_contiguous()
    assert swapped.reshape(6).tolist() == [0, 3, 1, 4, 2, 5]
    assert swapped.untyped_storage().data_ptr() == grid.untyped_storage().data_ptr()
    assert grid.flatten().tolist() == list(range(6))
    # "view ... works only where that order is the order in memory": the printed failure
    with pytest.raises(RuntimeError, match=r"^view size is not compatible with input tensor's "
                       r"size and stride \("):  # fmt: skip
        swapped.view(6)


def one_head_by_hand():
    """The worked example as the lesson runs it, from set_seed(0): torch's one-head layer
    without biases, and the lesson 02a projections and 02b attention, then its out_proj."""
    import course_lib

    found = notebook_functions("qkv_projection", "attention")
    course_lib.set_seed(0)
    D, T = 6, 4
    x = torch.randn(1, T, D)
    layer = nn.MultiheadAttention(D, 1, bias=False, batch_first=True)
    with torch.no_grad():
        theirs, _ = layer(x, x, x)
        q, k, v = found["qkv_projection"](x, layer.in_proj_weight, D)
        y, _ = found["attention"](q, k, v)
        return theirs[0, -1], layer.out_proj(y)[0, -1]


def test_the_worked_example_prints_the_same_six_numbers_twice(measure):
    theirs, by_hand = one_head_by_hand()
    assert [f"{n:+.3f}" for n in theirs.tolist()] == [
        "-0.090", "+0.242", "-0.177", "+0.085", "+0.213", "-0.001"
    ]  # fmt: skip
    assert [f"{n:+.3f}" for n in by_hand.tolist()] == [f"{n:+.3f}" for n in theirs.tolist()]
    assert measure("one head by hand vs torch", (by_hand - theirs).abs().max()) < 1e-6
    # every printed number is at least 1e-5 from a rounding boundary
    for value in (*theirs.tolist(), *by_hand.tolist()):
        assert abs(abs(value * 1000 - round(value * 1000)) - 0.5) > 1e-2


def test_the_solution_matches_torch_with_four_heads_and_a_causal_mask(measure):
    multihead = notebook_functions("split_heads", "merge_heads", "multihead")["multihead"]
    torch.manual_seed(0)
    D, T, H = 16, 6, 4
    x = torch.randn(2, T, D)
    layer = nn.MultiheadAttention(D, H, batch_first=True)
    qkv = nn.Linear(D, 3 * D)
    with torch.no_grad():
        qkv.weight.copy_(layer.in_proj_weight)
        qkv.bias.copy_(layer.in_proj_bias)
        theirs, _ = layer(x, x, x, attn_mask=~causal_mask(T))
        yours = multihead(x, qkv, layer.out_proj, H, mask=causal_mask(T))
    assert measure("four heads, causal: solution vs torch", (yours - theirs).abs().max()) < 1e-6


def test_no_cell_shows_the_courses_layer_or_cuts_a_projection_before_the_check():
    """The course's MultiHeadAttention and its head-cutting are never shown; above the
    multihead check, no cell but the exercises cuts a projection into q, k and v or slices a
    head out of one."""
    cells = nbformat.read(NOTEBOOKS / "04a_multihead_layer.ipynb", as_version=4).cells
    check = next(i for i, c in enumerate(cells) if c.source.startswith("check_multihead("))
    shown = [c.source for c in cells if c.cell_type == "code" and "nbgrader" not in c.metadata]
    above = [c.source for c in cells[:check]
             if c.cell_type == "code" and "nbgrader" not in c.metadata]  # fmt: skip
    for name in ("MultiHeadAttention", "stacked_heads", "scaled_dot_product_attention"):
        assert not any(name in source for source in shown), name
    tensors_only = [s.replace("str(err).split(", "") for s in above]  # an error message's split
    for cut in (".split(", ".chunk(", "slice(", "[..., :"):
        assert not any(cut in source for source in tensors_only), cut


def test_parameter_count_is_the_same_for_every_divisor():
    D = 64
    counts = {
        H: sum(p.numel() for p in MultiHeadAttention(D, H).parameters())
        for H in range(1, D + 1)
        if D % H == 0
    }
    assert len(counts) == 7 and set(counts.values()) == {4 * D * D + 4 * D}
    # and torch's own layer agrees
    assert sum(p.numel() for p in nn.MultiheadAttention(D, 8).parameters()) == 4 * D * D + 4 * D


def test_dividing_by_sqrt_d_model_flattens_every_head_more_the_more_heads():
    """The check yourself: dividing a head's scores by sqrt(D) instead of sqrt(d) shrinks them
    by sqrt(H), a flatter softmax in every head, flatter with more heads."""
    torch.manual_seed(0)
    D, T = 64, 8

    def entropy(H, width):
        q, k = torch.randn(2, 64, H, T, D // H).unbind(0)  # unit-variance entries: (64, H, T, d)
        weights = torch.softmax(q @ k.transpose(-2, -1) / width**0.5, dim=-1)  # (64, H, T, T)
        return -(weights * weights.log()).sum(-1).mean().item()

    for H in (4, 16):
        assert entropy(H, D) > entropy(H, D // H)  # flatter than its own width gives
    gain = {H: entropy(H, D) - entropy(H, D // H) for H in (4, 16)}
    assert gain[16] > gain[4]  # and flatter still with more heads
