"""Lesson 05_encoder_decoder's claims, each measured: that attention without a mask cannot tell
word order, how the reversal model aligns, and what a causal mask on cross-attention costs it.

Bars were measured on seeds 0-5 on the native path, the generic path and AVX2 (the lesson's
seed-0 numbers were the same to 6 digits on all three: the run is not chaotic); each comment
gives the worst case seen.
"""

import json
import re
from pathlib import Path

import pytest
import torch

from course_lib import reversal
from course_lib.exercises.lesson02b_attention_in_batches import attention_reference as attention

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "05_encoder_decoder.ipynb"
SEEDS = range(5)


@pytest.fixture(scope="module")
def runs():
    """(model, run) for each seed, trained as the lesson trains its seed-0 model."""
    return {seed: reversal.trained_run(seed) for seed in SEEDS}


def test_without_a_mask_each_swapped_word_keeps_its_own_output():
    # "Each word's output moved with the word and did not change": the lesson's six random
    # queries, keys and values, "cat" and "on" swapped; below 1e-6 is what the cell prints
    order = torch.tensor([0, 3, 2, 1, 4, 5])
    for seed in SEEDS:
        g = torch.Generator().manual_seed(seed)
        q, k, v = (torch.randn(6, 8, generator=g) for _ in range(3))
        before, _ = attention(q, k, v)
        after, _ = attention(q[order], k[order], v[order])
        assert (after - before[order]).abs().max() < 1e-6
        assert (after - before).abs().max() > 0.01  # the rows did move: cat and on swapped


@pytest.mark.slow
def test_every_held_out_word_is_right_within_60_steps_and_at_the_end(runs, measure):
    # words right at step 60, worst over seeds 0-5: 0.9998; at step 150: 0.9998
    for _, run in runs.values():
        at = dict(zip(run.steps, run.accuracy, strict=True))
        assert measure("accuracy at step 60", at[60]) >= 0.995
        assert measure("accuracy at the end", at[150]) >= 0.995
        assert at[0] < 0.15  # near a random word's 1/12 before training


@pytest.mark.slow
def test_every_head_ends_on_the_anti_diagonal_and_starts_near_chance(runs, measure):
    # the least of the four heads at the end, over seeds 0-5: 0.841; at step 0 the largest
    # 0.157 (chance 0.125)
    for _, run in runs.values():
        weights = torch.stack(run.anti_diagonal)  # (steps, layers, H)
        assert measure("least head at the end", weights[-1].min()) > 0.8
        assert measure("largest head at step 0", weights[0].max()) < 0.2
        # the accuracy and the alignment climb together: neither is done by step 20
        at_20 = run.steps.index(20)
        assert run.accuracy[at_20] < 0.7 and weights[at_20].max() < 0.7


@pytest.mark.slow
def test_a_causal_mask_on_cross_attention_keeps_exactly_the_positions_that_see_their_word(
    runs, measure
):
    # positions 4-7 right, over seeds 0-5: at least 0.988; positions 0-3 at most 0.11 (a
    # random word: 1/12); the end mark 1.00
    for seed, (model, _) in runs.items():
        source, _, target = reversal.held_out(seed)
        written = reversal.greedy_reverse(model, source, memory_mask=reversal.causal_cross_mask())
        by_position = reversal.accuracy_by_position(written, target)
        assert measure("hidden positions, most right", by_position[:4].max()) < 0.2
        assert measure("seen positions, least right", by_position[4:].min()) > 0.95


def _outputs() -> list[str]:
    nb = json.loads(NOTEBOOK.read_text())
    return [
        "".join(o.get("text", ""))
        for c in nb["cells"]
        if c["cell_type"] == "code"
        for o in c.get("outputs", [])
    ]


def test_the_prose_quotes_what_the_stored_outputs_show():
    text = "\n".join(_outputs())
    rows = {
        int(m[1]): m[2] for m in re.finditer(r"^\s*(\d+)\s+[\d.]+\s+([\d,]+)\s+[\d.]+%", text, re.M)
    }
    assert rows[60] == rows[150] == "4,000", rows  # "by step 60 all 4,000 words are right"
    assert all(rows[s] != "4,000" for s in (0, 10, 20, 30, 40)), rows
    least = float(re.search(r"least of the four: ([\d.]+)", text)[1])
    assert least > 5 * 0.125  # "the least of them many times the uniform 0.125"
    share = re.search(r"share right\s+((?:[\d.]+\s*){9})", text)[1].split()
    assert [float(s) >= 0.99 for s in share[:8]] == [False] * 4 + [True] * 4
    assert all(float(s) < 0.2 for s in share[:4]) and float(share[8]) >= 0.99
    assert "largest change in any word's output: below 1e-6" in text
    assert "the twelve words: " + " ".join(reversal.WORDS) in text


def test_without_a_mask_swapping_two_words_swaps_their_outputs():
    # "attention without a mask treats its input as an unordered set (swap two source words
    # and their outputs swap with them)": the encoder layer before positions are added
    from course_lib.seq2seq import EncoderLayer

    layer = EncoderLayer(32, 2)
    x = torch.randn(2, 8, 32, generator=torch.Generator().manual_seed(4))
    order = torch.tensor([0, 5, 2, 3, 4, 1, 6, 7])  # words 1 and 5 swapped
    with torch.no_grad():
        torch.testing.assert_close(layer(x[:, order]), layer(x)[:, order])
