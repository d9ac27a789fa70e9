"""Lesson 03's claims: the layout examples, torch equivalence, parameter counts, and the trained
heads' detector scores.

The detector bars were measured on the shipped rope-h4 (previous 0.974, bracket 0.810,
subject 0.989; previous over every position 0.488) and set inside them; each number below is
the same on the native, generic and AVX2 kernel paths (tools/claim_margins.py).
"""

from pathlib import Path

import pytest
import torch
from torch import nn

from course_lib import ablation, data, heads
from course_lib.attention import causal_mask, scaled_dot_product_attention
from course_lib.exercises import by_name, lesson_label
from course_lib.model import load_card, load_pretrained
from course_lib.multihead import MultiHeadAttention
from course_lib.mywork import collect
from course_lib.train import evaluate

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


def test_readings_worked_example():
    # view along the stored order, then swap: rows by time of day; viewing straight into the
    # target shape mixes times of one day into a row; the way back needs reshape
    readings = torch.arange(12)
    by_time = readings.view(3, 4).transpose(0, 1)
    assert by_time.tolist() == [[0, 4, 8], [1, 5, 9], [2, 6, 10], [3, 7, 11]]
    assert readings.view(4, 3)[0].tolist() == [0, 1, 2]  # times 0, 1, 2 of day 0
    assert not by_time.is_contiguous()
    with pytest.raises(RuntimeError):
        by_time.view(12)  # view cannot join the axes of a transposed tensor
    assert torch.equal(by_time.transpose(0, 1).reshape(12), readings)


@pytest.fixture(scope="module")
def lesson_functions():
    """The lesson's exercise solutions, with the attention lesson's own attention in them."""
    work = collect(["attention", "multihead"], NOTEBOOKS)
    homes = {lesson_label(by_name(name).lesson) for name in ("attention", "multihead")}
    assert set(work.origin.values()) == {f"lesson {home}: yours" for home in homes}
    return work.functions


def test_one_head_by_hand_and_four_heads_of_the_solution_match_torch(lesson_functions, measure):
    # the worked example (one head, no mask) and the check after the exercise (four heads,
    # a causal mask): both print "below 1e-6"; measured about 1e-7 on every path
    attention, multihead = lesson_functions["attention"], lesson_functions["multihead"]
    D, T = 16, 5
    x = torch.randn(2, T, D)
    one_head = nn.MultiheadAttention(D, 1, batch_first=True)
    with torch.no_grad():
        q, k, v = torch.nn.functional.linear(x, one_head.in_proj_weight,
                                             one_head.in_proj_bias).split(D, dim=-1)  # fmt: skip
        by_hand = one_head.out_proj(attention(q, k, v)[0])
        theirs, _ = one_head(x, x, x)
    assert measure("one head by hand vs torch", (by_hand - theirs).abs().max()) < 1e-6
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


def test_the_places_models_have_the_same_parameters_for_every_head_count():
    # the lesson's sweep: the attention layer's count does not depend on H, and neither does
    # the whole one-block model's
    sizes = {H: sum(p.numel() for p in load_pretrained(f"places-h{H}").parameters())
             for H in (1, 2, 4, 8)}  # fmt: skip
    assert len(set(sizes.values())) == 1
    configs = [load_card(f"places-h{H}")["config"] for H in (1, 2, 4, 8)]
    assert {c["num_layers"] for c in configs} == {1} and {c["d_model"] for c in configs} == {64}


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
    # each job has a head that puts most of its attention on the right key, on average:
    # 0.974, 0.810, 0.989 on every path
    for name, (_, _, score) in best.items():
        assert measure(f"best {name} head score", score) > 0.75
    # ... the best heads sit where the prose says: bracket in layer 0, song and subject in
    # layer 1 (the best of each job is a different head, though one head does two jobs)
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
    line = weights[1][0, :, q, k].mean(dim=-1)  # (H,): each layer-1 head's mean weight one back
    # the prose: heads 3 and 1 draw the line, head 2 more faintly, head 0 not at all. Measured
    # 0.988, 0.872, 0.752, 0.051 (heads 3, 1, 2, 0) on every path: bars 0.8 (margin 0.07),
    # head 2 below both (gap 0.12), head 0 under 0.2
    assert measure("layer 1, head 3: weight one back", line[3]) > 0.8
    assert measure("layer 1, head 1: weight one back", line[1]) > 0.8
    assert line[2] < min(line[1], line[3])
    assert measure("layer 1, head 0: weight one back", line[0]) < 0.2


def test_bracket_example_heads_look_back_at_the_subject(measure):
    from course_lib.widgets import heads_examples

    _, ids = heads_examples()[1]  # Fishes with the girl sleep ( the dogs ) .
    [(query, subject)] = data.subject_pairs(ids)
    assert data.to_tokens(ids)[query] == "girl" and data.to_tokens(ids)[subject] == "Fishes"
    model = load_pretrained("rope-h4")
    with torch.no_grad():
        _, weights = model(ids[None], return_weights=True)
    looks = [weights[layer][0, :, query, subject] for layer in range(2)]  # (H,) per layer
    # the prose: heads 0, 1 and 2 of layer 1 and layer 0, head 0. Measured 0.999, 1.000, 0.994
    # and 0.936 on every path; the other heads 0.344 at most: bars 0.9 and 0.5
    for layer, head in [(1, 0), (1, 1), (1, 2), (0, 0)]:
        name = f"layer {layer}, head {head}: weight on the subject"
        assert measure(name, looks[layer][head]) > 0.9
    others = [looks[layer][head] for layer, head in [(0, 1), (0, 2), (0, 3), (1, 3)]]
    assert measure("other heads: weight on the subject", max(others)) < 0.5


def test_no_query_needs_two_skills_and_one_head_holds_two_jobs(rope_h4):
    # lesson 03's likely reason why one head gets away with it on the toy language: the
    # positions that need each skill never overlap, so one head can switch jobs by position
    valid = data.load_split("valid")
    queries = {
        name: {(row, q) for row, seq in enumerate(valid) for q, _ in pairs(seq)}
        for name, pairs in heads.DETECTORS.items()
    }
    assert all(len(found) > 100 for found in queries.values())
    assert not queries["previous"] & queries["subject"]
    assert not queries["previous"] & queries["bracket"]
    assert not queries["subject"] & queries["bracket"]
    scores, _, _ = rope_h4
    # measured 0.953 (previous) and 0.989 (subject) for layer 1, head 1; bar 0.9
    assert scores["previous"][1, 1] > 0.9 and scores["subject"][1, 1] > 0.9


def test_rope_h1_does_as_well_as_several_heads_on_the_toy_language():
    # evaluated now: 1.289 (H=1), 1.290, 1.295, 1.297, as on the cards; the lesson says one
    # head does as well, so the bar is "within 0.01 of the best", margin 0.01
    valid = data.load_split("valid")
    losses = {h: evaluate(load_pretrained(f"rope-h{h}"), valid) for h in (1, 2, 4, 8)}
    for h, loss in losses.items():
        assert loss == pytest.approx(load_card(f"rope-h{h}")["val_loss"], abs=1e-3)
    assert losses[1] <= min(losses.values()) + 0.01


def test_knocking_out_the_bracket_head_hurts_brackets_most(measure):
    # lesson 03's knock-out table for rope-h4. Measured on the native (AVX-512), generic and
    # AVX2 paths alike: bracket loss +5.51 without layer 0, head 0 (the bracket detector's
    # best head), +1.00 for the next worst head (gap 4.52): bar 2.0, margin 2.5. Agreement:
    # +0.94 without layer 0, head 3 and +0.44 without layer 1, head 1 (bars 0.6 and 0.25)
    model, valid = load_pretrained("rope-h4"), data.load_split("valid")
    base = ablation.skill_losses(model, valid)
    rise = {
        (layer, head): {
            k: v - base[k]
            for k, v in ablation.skill_losses(model, valid, knocked_out=[(layer, head)]).items()
        }
        for layer in range(2)
        for head in range(4)
    }
    best_bracket = heads.best_heads(heads.detector_scores(model, valid))["bracket"][:2]
    assert best_bracket == (0, 0)
    others = max(r["brackets"] for key, r in rise.items() if key != best_bracket)
    assert measure("bracket rise gap", rise[best_bracket]["brackets"] - others) > 2.0
    assert measure("agreement rise L0H3", rise[0, 3]["agreement"]) > 0.6
    assert measure("agreement rise L1H1", rise[1, 1]["agreement"]) > 0.25


def test_knock_out_colours_tell_the_bracket_head_from_the_next_worst():
    # the figure's colours must not saturate below the largest rise (+5.51 once looked like
    # +1.00): the colour range reaches it, and 5.51 and 1.00 get colours far apart
    from course_lib import viz

    labels = [None, (0, 0), (0, 3), (1, 1)]
    table = torch.tensor([[1.30, 1.44, 0.65], [1.65, 1.45, 6.16], [1.49, 2.38, 1.65],
                          [1.35, 1.88, 0.67]])  # fmt: skip
    fig = viz.ablation_heatmap(labels, table, ablation.SKILLS)
    [image] = fig.axes[0].get_images()
    assert image.norm.vmax >= 5.51 - 1e-4 and image.norm.vmin == -image.norm.vmax
    big, next_worst, zero = image.norm([5.51, 1.00, 0.0])
    assert big - next_worst > 0.15 and next_worst - zero > 0.15
    shown = {text.get_text() for text in fig.axes[0].texts}
    assert {"+5.51", "+1.00", "+0.94", "+0.44"} <= shown
