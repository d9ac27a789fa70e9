"""Lesson 03's claims: torch equivalence, parameter counts, and the trained heads' detector scores.

The detector bars were measured on the shipped rope-h4 (previous 0.974, bracket 0.810,
subject 0.989; previous over every position 0.488) and set inside them; each number below is
the same on the native, generic and AVX2 kernel paths (tools/claim_margins.py).
"""

import pytest
import torch
from torch import nn

from course_lib import data, heads
from course_lib.attention import causal_mask, scaled_dot_product_attention
from course_lib.model import load_card, load_pretrained
from course_lib.multihead import MultiHeadAttention


def step_by_step(x, mha, mask=None):
    """The notebook's forward pass: qkv, split, attend per head, merge, project."""
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


def test_split_then_merge_is_the_identity_and_view_alone_mixes_tokens():
    B, T, D, H = 2, 5, 16, 4
    x = torch.randn(B, T, D)
    split = x.view(B, T, H, D // H).transpose(1, 2)  # (B, H, T, d)
    assert torch.equal(split.transpose(1, 2).reshape(B, T, D), x)
    tokens = torch.arange(T).view(1, T, 1).expand(1, T, D).float()
    wrong = tokens.view(1, H, T, D // H)[0, 1, :, 0].int().tolist()
    assert wrong != list(range(T))  # rows of "head 1" come from the wrong tokens


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


@pytest.fixture(scope="module")
def rope_h4():
    model = load_pretrained("rope-h4")
    valid = data.load_split("valid")
    with torch.no_grad():
        weights = heads.attention_weights(model, valid)
    scores = {name: heads.detector_score(weights, valid, name) for name in heads.DETECTORS}
    return scores, heads.offset_score(weights, offset=1), load_card("rope-h4")


def test_shown_scores_are_the_shipped_checkpoints(rope_h4):
    scores, everywhere, card = rope_h4
    for name, table in scores.items():
        torch.testing.assert_close(table, torch.tensor(card["detectors"][name]), atol=1e-3, rtol=0)
    torch.testing.assert_close(everywhere, torch.tensor(card["previous_everywhere"]), atol=1e-3,
                               rtol=0)  # fmt: skip


def test_heads_specialise_as_the_prose_says(rope_h4, measure):
    scores, everywhere, _ = rope_h4
    best = heads.best_heads(scores)
    # each job has a head that does it most of the time: 0.974, 0.810, 0.989 on every path
    for name, (_, _, score) in best.items():
        assert measure(f"best {name} head score", score) > 0.75
    # ... and they are different heads: bracket in layer 0, song and subject in layer 1
    assert len({(layer, head) for layer, head, _ in best.values()}) == 3
    assert best["bracket"][0] == 0 and best["previous"][0] == 1 and best["subject"][0] == 1
    # a specialist is specific: the bracket head does little of the other two jobs
    layer, head, _ = best["bracket"]
    # 0.079 and 0.260 on every path
    assert measure("bracket head: previous score", scores["previous"][layer, head]) < 0.3
    assert measure("bracket head: subject score", scores["subject"][layer, head]) < 0.5


def test_previous_head_looks_one_back_mostly_inside_songs(rope_h4, measure):
    scores, everywhere, _ = rope_h4
    layer, head, inside = heads.best_heads(scores)["previous"]
    # 0.974 inside songs against 0.488 over every position (ratio 0.501), on every path
    assert measure("previous head: everywhere / inside", everywhere[layer, head] / inside) < 0.6
    assert measure("largest one-back score everywhere", everywhere.max()) < 0.6


def test_song_example_has_a_one_back_line_in_layer_1(measure):
    from course_lib.widgets import heads_examples

    _, ids = heads_examples()[0]
    pairs = data.previous_token_pairs(ids)
    assert len(pairs) >= 3
    model = load_pretrained("rope-h4")
    with torch.no_grad():
        _, weights = model(ids[None], return_weights=True)
    q, k = torch.tensor(pairs).T
    line = weights[1][0, :, q, k].mean(dim=-1).max()
    assert measure("best layer-1 head: weight one back", line) > 0.8  # 0.988 on every path
