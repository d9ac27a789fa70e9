"""course_lib.reversal: the reversal task's data, decoding, measures and the pieces it trains."""

import pytest
import torch

from course_lib import reversal
from course_lib.exercises.stub import stub_source
from course_lib.seq2seq import course_pieces, run_pieces

pytestmark = pytest.mark.path_independent


def test_a_batch_is_the_sentence_its_reversal_and_the_marks():
    source, decoder_in, target = reversal.reversal_batch(5, torch.Generator().manual_seed(0))
    assert source.shape == (5, 8) and decoder_in.shape == target.shape == (5, 9)
    assert source.max() < len(reversal.WORDS)  # words only: the marks never appear in a source
    assert torch.equal(target[:, :8], source.flip(1))
    assert torch.all(target[:, 8] == reversal.END_ID)
    assert torch.all(decoder_in[:, 0] == reversal.START_ID)
    assert torch.equal(decoder_in[:, 1:], target[:, :8])  # one position behind what it writes
    assert reversal.words(decoder_in[0])[0] == "<s>" and reversal.words(target[0])[-1] == "</s>"


def test_the_training_batches_never_hold_a_held_out_sentence():
    held = reversal.held_out(0)[0]
    exclude = set(map(tuple, held[:3].tolist()))
    g = torch.Generator().manual_seed(0)
    rows = set(map(tuple, reversal.reversal_batch(5000, g, exclude)[0].tolist()))
    assert not rows & exclude
    for seed in range(3):
        assert reversal.held_out_seen_in_training(seed) == 0


def test_the_anti_diagonal_weight_is_one_on_a_perfect_map_and_an_eighth_on_a_uniform_one():
    perfect = torch.zeros(2, 9, 8)  # (H, T + 1, T)
    perfect[:, torch.arange(8), 7 - torch.arange(8)] = 1
    perfect[:, 8] = 1 / 8
    uniform = torch.full((3, 2, 9, 8), 1 / 8)  # (n, H, T + 1, T)
    torch.testing.assert_close(reversal.anti_diagonal_weight(perfect), torch.ones(2).double())
    torch.testing.assert_close(
        reversal.anti_diagonal_weight(uniform), torch.full((2,), 0.125).double()
    )


def test_the_causal_cross_mask_lets_position_i_see_source_words_up_to_i():
    mask = reversal.causal_cross_mask()
    assert mask.shape == (9, 8)
    assert mask[3].tolist() == [True] * 4 + [False] * 4 and mask[8].all()


def test_greedy_decoding_writes_what_the_model_prefers_step_by_step():
    model = reversal.new_model(0)
    source = reversal.held_out(0)[0][:4]
    written = reversal.greedy_reverse(model, source)
    assert written.shape == (4, 9)
    start = torch.full((4, 1), reversal.START_ID)
    with torch.no_grad():  # teacher-forced on its own output, it picks the same tokens
        logits = run_pieces(model, source, torch.cat([start, written[:, :-1]], 1), course_pieces())
    assert torch.equal(logits.argmax(-1), written)


def test_new_model_leaves_the_global_seed_alone():
    torch.manual_seed(5)
    before = torch.random.get_rng_state()
    a, b = reversal.new_model(3), reversal.new_model(3)
    assert torch.equal(torch.random.get_rng_state(), before)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))


def _stub(name):
    source = f"def {name}(*args, **kwargs):\n{stub_source(name, '    ')}"
    namespace = {}
    exec(source, namespace)
    return namespace[name]


def test_your_pieces_keep_what_is_right_and_say_why_the_rest_is_the_courses(capsys):
    model = reversal.new_model(0)
    course = course_pieces()

    def wrong_layer(y, memory, self_attn, cross_attn, memory_mask=None):
        return y + self_attn(y) + cross_attn(y, memory, memory_mask)  # no causal mask

    pieces = reversal.your_pieces(
        model,
        multihead=course.multihead,
        cross_attention=_stub("cross_attention"),
        decoder_layer=wrong_layer,
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["multihead", "yours"]
    assert lines[1].startswith("cross_attention") and "yours is not written yet" in lines[1]
    assert (
        lines[2].startswith("decoder_layer") and "logits" in lines[2] and "check above" in lines[2]
    )
    assert pieces.multihead is course.multihead
    assert pieces.cross_attention is course.cross_attention
    assert pieces.decoder_layer is course.decoder_layer


def test_a_piece_that_raises_is_replaced_and_the_error_is_named(capsys):
    def broken(*args, **kwargs):
        raise RuntimeError("shapes do not line up")

    course = course_pieces()
    pieces = reversal.your_pieces(
        reversal.new_model(0),
        multihead=course.multihead,
        cross_attention=broken,
        decoder_layer=course.decoder_layer,
    )
    assert pieces.cross_attention is course.cross_attention
    assert "RuntimeError: shapes do not line up" in capsys.readouterr().out


def test_train_reversal_refuses_bad_settings():
    model = reversal.new_model(0)
    with pytest.raises(TypeError, match="steps"):
        reversal.train_reversal(model, steps=1.5)
    with pytest.raises(ValueError, match="lr: expected a positive float"):
        reversal.train_reversal(model, lr=0.0)
    with pytest.raises(ValueError, match="record_steps: expected steps in 0..150"):
        reversal.train_reversal(model, record_steps=(0, 200))
