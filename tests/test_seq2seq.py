"""course_lib.seq2seq: cross-attention and the encoder-decoder, against torch's own layers."""

import pytest
import torch
from torch import nn

from course_lib.attention import causal_mask
from course_lib.seq2seq import (
    CrossAttention,
    DecoderLayer,
    EncoderDecoder,
    Pieces,
    Seq2SeqConfig,
    course_pieces,
    cross_attention_reference,
    decoder_layer_reference,
    run_pieces,
)

pytestmark = pytest.mark.path_independent


def _inputs(B=2, T_q=9, T_k=8, D=16, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(B, T_q, D, generator=g, dtype=dtype),
        torch.randn(B, T_k, D, generator=g, dtype=dtype),
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cross_attention_matches_torchs_layer_with_distinct_query_and_memory(dtype):
    layer = CrossAttention(16, 4).to(dtype)
    x, memory = _inputs(dtype=dtype)
    keep = torch.arange(8) < torch.tensor([[8], [5]])  # (B, T_k): the second has 5 real keys
    with torch.no_grad():
        theirs, their_weights = layer.to_torch()(
            x, memory, memory, key_padding_mask=~keep, average_attn_weights=False
        )
        ours, weights = layer(x, memory, keep[:, None, None, :], return_weights=True)
    assert ours.dtype == dtype and ours.shape == (2, 9, 16) and weights.shape == (2, 4, 9, 8)
    torch.testing.assert_close(ours, theirs)
    torch.testing.assert_close(weights, their_weights)
    assert torch.all(weights[1, ..., 5:] == 0)  # padding gets no weight


def test_cross_attention_equals_scaled_dot_product_attention_per_head():
    layer = CrossAttention(16, 2)
    x, memory = _inputs(T_q=3, T_k=7)
    with torch.no_grad():
        q, k, v = layer.heads(x, memory)  # (B, H, T, d)
        fused = torch.nn.functional.scaled_dot_product_attention(q, k, v)  # (B, H, T_q, d)
        expected = layer.out(fused.transpose(1, 2).reshape(2, 3, 16))
        torch.testing.assert_close(layer(x, memory), expected)


def test_the_reference_is_torchs_function_and_takes_a_mask_per_query():
    layer = CrossAttention(16, 4)
    x, memory = _inputs(T_q=6, T_k=4)
    mask = torch.ones(6, 4, dtype=torch.bool).tril()  # (T_q, T_k)
    with torch.no_grad():
        ours = cross_attention_reference(x, memory, layer.q, layer.kv, layer.out, 4, mask)
        theirs, _ = layer.to_torch()(x, memory, memory, attn_mask=~mask)
    torch.testing.assert_close(ours, theirs)


def test_bad_inputs_name_the_parameter():
    layer = CrossAttention(16, 4)
    x, memory = _inputs()
    with pytest.raises(ValueError, match="memory: expected shape"):
        layer(x, memory[..., :8])
    with pytest.raises(ValueError, match=r"mask: expected a shape broadcastable .* got \(9, 9\)"):
        layer(x, memory, causal_mask(9))  # a (T_q, T_q) mask where (T_q, T_k) is needed
    with pytest.raises(ValueError, match="memory: expected the batch size"):
        layer(x, memory[:1])
    with pytest.raises(TypeError, match="memory: expected x's dtype"):
        layer(x, memory.double())
    with pytest.raises(ValueError, match="num_heads"):
        CrossAttention(16, 3)
    with pytest.raises(TypeError, match="config: expected a Seq2SeqConfig"):
        EncoderDecoder({"vocab_size": 14})
    with pytest.raises(ValueError, match="num_heads"):
        Seq2SeqConfig(vocab_size=14, num_heads=5)
    with pytest.raises(TypeError, match="vocab_size"):
        Seq2SeqConfig(vocab_size=14.0)
    model = EncoderDecoder(Seq2SeqConfig(vocab_size=14))
    with pytest.raises(ValueError, match="source: expected ids in 0..13"):
        model(torch.full((1, 8), 14), torch.zeros(1, 9, dtype=torch.long))
    with pytest.raises(ValueError, match="decoder_in: expected 1 to 9 positions"):
        model(torch.zeros(1, 8, dtype=torch.long), torch.zeros(1, 10, dtype=torch.long))
    with pytest.raises(TypeError, match="source: expected token ids"):
        model(torch.zeros(1, 8), torch.zeros(1, 9, dtype=torch.long))
    with pytest.raises(TypeError, match="cross_attention: expected a function"):
        Pieces(course_pieces().multihead, None, course_pieces().decoder_layer)
    with pytest.raises(TypeError, match="pieces: expected a Pieces"):
        run_pieces(
            model, torch.zeros(1, 8, dtype=torch.long), torch.zeros(1, 9, dtype=torch.long), None
        )


def test_the_decoder_layer_is_torchs_without_norms_and_feed_forward():
    ours = DecoderLayer(16, 4)
    theirs = nn.TransformerDecoderLayer(
        16, 4, dim_feedforward=8, dropout=0.0, batch_first=True, norm_first=True
    )
    theirs.norm1 = theirs.norm2 = theirs.norm3 = nn.Identity()
    with torch.no_grad():
        theirs.linear2.weight.zero_()
        theirs.linear2.bias.zero_()
        theirs.self_attn.load_state_dict(ours.self_attn.to_torch().state_dict())
        theirs.multihead_attn.load_state_dict(ours.cross.to_torch().state_dict())
    y, memory = _inputs()
    keep = torch.arange(8) < torch.tensor([[8], [6]])
    with torch.no_grad():
        expected = theirs.eval()(
            y, memory, tgt_mask=~causal_mask(9), tgt_is_causal=True, memory_key_padding_mask=~keep
        )
        got = ours(y, memory, keep[:, None, None, :])
    torch.testing.assert_close(got, expected)


def test_the_model_computed_through_the_courses_pieces_is_the_model():
    torch.manual_seed(0)
    model = EncoderDecoder(Seq2SeqConfig(vocab_size=14))
    g = torch.Generator().manual_seed(1)
    source = torch.randint(14, (3, 8), generator=g)
    decoder_in = torch.randint(14, (3, 9), generator=g)
    with torch.no_grad():
        logits, maps = model(source, decoder_in, return_weights=True)
        recorded = []
        through = run_pieces(model, source, decoder_in, course_pieces(), record=recorded)
    assert logits.shape == (3, 9, 14) and [m.shape for m in maps] == [(3, 2, 9, 8)] * 2
    torch.testing.assert_close(through, logits, atol=1e-5, rtol=1e-4)
    for ours, theirs in zip(recorded, maps, strict=True):
        torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=1e-5)


def test_the_decoder_is_causal_and_the_encoder_is_not():
    torch.manual_seed(0)
    model = EncoderDecoder(Seq2SeqConfig(vocab_size=14))
    g = torch.Generator().manual_seed(2)
    source, decoder_in = (
        torch.randint(14, (1, 8), generator=g),
        torch.randint(14, (1, 9), generator=g),
    )
    later_output, later_source = decoder_in.clone(), source.clone()
    later_output[0, 6] = (later_output[0, 6] + 1) % 14
    later_source[0, 7] = (later_source[0, 7] + 1) % 14
    with torch.no_grad():
        base = model(source, decoder_in)
        moved_output = (model(source, later_output) - base).abs().amax(-1)[0]  # (T_out,)
        moved_source = (model(later_source, decoder_in) - base).abs().amax(-1)[0]
        memory_moved = (model.encode(later_source) - model.encode(source)).abs().amax(-1)[0]
    assert torch.all(moved_output[:6] == 0) and torch.all(moved_output[6:] > 0)
    assert torch.all(moved_source > 0)  # every output position reads the whole source
    assert torch.all(memory_moved > 0)  # and every encoder position read the last word


def test_the_decoder_layer_reference_agrees_with_the_module():
    layer = DecoderLayer(16, 2)
    y, memory = _inputs()

    def self_attn(h, mask=None):
        return layer.self_attn(h, mask)

    def cross_attn(h, keys_from, mask=None):
        return layer.cross(h, keys_from, mask)

    with torch.no_grad():
        torch.testing.assert_close(
            decoder_layer_reference(y, memory, self_attn, cross_attn), layer(y, memory)
        )
