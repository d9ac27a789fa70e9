"""course_lib.position_demos: lesson 06's sinusoids at any position, the 2-D rotation and the
scores under RoPE and sinusoids added; lesson 07a's trained model run through another
function and its RoPE layout switch, lesson 07b's score drift, learned rows and the variant
table's claims.

The lessons' claims made with the demos are in tests/test_lesson06_sinusoidal_and_rope.py,
tests/test_lesson07a_rope_in_a_model.py and tests/test_lesson07b_positions_past_training.py.
"""

import torch

from course_lib import position_demos, positional


def test_sinusoidal_at_extends_the_table():
    positions = torch.arange(-5, 40)
    table = position_demos.sinusoidal_at(positions, 16)
    torch.testing.assert_close(table[5:], positional.sinusoidal_encoding(40, 16))
    p, i = -3.0, 2
    angle = torch.tensor(p / 10000 ** (2 * i / 16))
    torch.testing.assert_close(table[2, 2 * i], angle.sin())
    torch.testing.assert_close(table[2, 2 * i + 1], angle.cos())


def test_rotate_pair_is_a_counter_clockwise_rotation():
    turned = position_demos.rotate_pair(torch.tensor([1.0, 0.0]), torch.pi / 2)
    torch.testing.assert_close(turned, torch.tensor([0.0, 1.0]))
    pairs = torch.randn(10, 2)
    angles = torch.rand(10) * 6
    turned = position_demos.rotate_pair(pairs, angles)
    expected = torch.view_as_real(torch.view_as_complex(pairs) * torch.exp(1j * angles))
    torch.testing.assert_close(turned, expected)


def test_set_rope_layout_changes_the_rope_and_nothing_else():
    from course_lib import variants

    model = variants.load_trained("base", 0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    assert position_demos.set_rope_layout(model, "half") is model
    layers = position_demos.attention_layers(model)
    assert len(layers) == model.config.num_layers
    assert all(layer.rope.layout == "half" and layer.rope.d_head == 16 for layer in layers)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_rope_drift_is_the_score_change_of_the_worst_pair():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(3, 8, generator=g), torch.randn(3, 8, generator=g)
    shifts = torch.tensor([5, 40])
    drift = position_demos.rope_drift(q, k, 7, 3, shifts, torch.float64)
    by_hand = torch.stack([
        (position_demos.rope_scores(q[i], k[i], 7 + shifts, 3 + shifts)
         - position_demos.rope_scores(q[i], k[i], 7, 3)).abs()
        for i in range(3)
    ]).amax(0)  # fmt: skip
    torch.testing.assert_close(drift, by_hand.double(), atol=1e-6, rtol=0)
    assert drift.shape == (2,) and (drift < 1e-10).all()


def test_learned_rows_moved_rebuilds_the_random_start():
    moved = position_demos.learned_rows_moved("learned-positions", 0)
    assert moved.shape == (128,)
    # a model reads positions 0-30 of a 32-token line: rows 31-127 never get a gradient and
    # move a few percent (the optimiser's weight decay, lesson 11b)
    assert moved[31:].max() < 0.1 < moved[:31].min()


def test_rope_scores_in_either_layout_match_the_rotated_vectors():
    g = torch.Generator().manual_seed(2)
    q, k = torch.randn(8, generator=g), torch.randn(8, generator=g)
    for layout, rotate in (("interleaved", positional.apply_rope),
                           ("half", positional.apply_rope_half)):  # fmt: skip
        got = position_demos.rope_scores(q, k, torch.tensor([9, 2]), 4, layout=layout)
        q_m = rotate(q.double().expand(2, -1), torch.tensor([9, 2]))
        k_n = rotate(k.double().expand(2, -1), torch.tensor([4, 4]))
        torch.testing.assert_close(got, (q_m * k_n).sum(-1).float())
    import pytest

    with pytest.raises(ValueError, match="layout"):
        position_demos.rope_scores(q, k, 1, 0, layout="halves")


def test_additive_scores_take_projections_with_a_row_per_output():
    g = torch.Generator().manual_seed(4)
    x_q, x_k = torch.randn(6, generator=g), torch.randn(6, generator=g)
    w_q, w_k = torch.randn(4, 6, generator=g), torch.randn(4, 6, generator=g)  # (d, D)
    got = position_demos.additive_scores(x_q, x_k, w_q, w_k, 5, 2)
    pe = positional.sinusoidal_encoding(6, 6)
    expected = (w_q @ (x_q + pe[5])) @ (w_k @ (x_k + pe[2]))
    torch.testing.assert_close(got, expected[None])


def test_seed_excess_and_position_claims_read_the_variant_table():
    import json

    from course_lib import variants

    table = json.loads(variants.RESULTS.read_text(encoding="utf-8"))
    runs = [r["long"]["song"] for r in table["runs"] if r["variant"] == "sinusoidal"]
    assert position_demos.seed_excess("sinusoidal", "long", "song") == runs
    assert len(position_demos.seed_excess("1-layer-no-positions")) == len(variants.SEEDS)
    import pytest

    with pytest.raises(ValueError, match="variant"):
        position_demos.seed_excess("no-such-variant")
    lines = position_demos.position_claims("song")
    assert lines[0].startswith("one layer, inside:") and lines[0].endswith(": holds")
    # a negative gap reads as the first variant behind the second, by the gap's size
    (behind,) = [ln for ln in lines if " behind " in ln and "RoPE" in ln and "none" in ln]
    assert "by 0.104" in behind and behind.endswith("does not hold")
