"""Lesson 05_encoder_decoder's exercises: learner-style mistakes get the hint that names them.

Every wrong function here is written the way a learner would write it, on top of their
earlier lessons' attention, split_heads and merge_heads (the course's stand in for them), not
taken from the bug lists in course_lib/exercises/lesson05_encoder_decoder/.
"""

import dataclasses
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_lib.attention import causal_mask
from course_lib.checks import check_cross_attention, check_decoder_layer
from course_lib.exercises.core import DTYPE_HINT, run
from course_lib.exercises.lesson02b_attention_in_batches import attention_reference as attention
from course_lib.exercises.lesson04a_multihead_layer import merge_heads_reference as merge_heads
from course_lib.exercises.lesson04a_multihead_layer import split_heads_reference as split_heads
from course_lib.exercises.lesson05_encoder_decoder import (
    CROSS_ATTENTION,
    DECODER_LAYER,
)
from course_lib.multihead import stacked_heads
from course_lib.seq2seq import (
    CrossAttention,
    DecoderLayer,
    course_pieces,
    cross_attention_reference,
    decoder_layer_reference,
)
from helpers import failed_with_hint as _check

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "05_encoder_decoder.ipynb"


# ---------------------------------------------------------------- both exercises


def test_the_references_are_torchs_and_agree_with_the_courses_modules():
    g = torch.Generator().manual_seed(3)
    layer = CrossAttention(16, 4)
    x, memory = torch.randn(2, 9, 16, generator=g), torch.randn(2, 8, 16, generator=g)
    mask = (torch.arange(8) < torch.tensor([[8], [6]]))[:, None, None, :]
    with torch.no_grad():
        theirs, _ = layer.to_torch()(x, memory, memory, key_padding_mask=~mask[:, 0, 0])
        ours = cross_attention_reference(x, memory, layer.q, layer.kv, layer.out, 4, mask)
        module = layer(x, memory, mask)
    torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(module, theirs, atol=1e-6, rtol=1e-5)
    for case in DECODER_LAYER.case_list():  # torch's decoder layer = the course's wiring
        torch.testing.assert_close(
            decoder_layer_reference(*case.args, **case.kwargs),
            DECODER_LAYER.reference(*case.args, **case.kwargs),
        )


# ---------------------------------------------------------------- cross_attention


def _projections(x, memory, q_proj, kv_proj, num_heads):
    D = x.shape[-1]
    q = split_heads(q_proj(x), num_heads)
    k, v = (split_heads(t, num_heads) for t in kv_proj(memory).split(D, dim=-1))
    return q, k, v


def test_cross_attention_built_from_earlier_pieces_passes():
    def cross_attention(x, memory, q_proj, kv_proj, out, num_heads, mask=None):
        q, k, v = _projections(x, memory, q_proj, kv_proj, num_heads)
        y, _ = attention(q, k, v, mask)
        return out(merge_heads(y))

    assert run(CROSS_ATTENTION, cross_attention).passed


def test_cross_attention_written_in_one_einsum_passes():
    def cross_attention(x, memory, q_proj, kv_proj, out, num_heads, mask=None):
        B, T_q, D = x.shape
        d = D // num_heads
        q = q_proj(x).view(B, T_q, num_heads, d)
        k, v = kv_proj(memory).view(B, -1, 2, num_heads, d).unbind(2)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        y = torch.einsum("bhqk,bkhd->bqhd", scores.softmax(-1), v).reshape(B, T_q, D)
        return out(y)

    assert run(CROSS_ATTENTION, cross_attention).passed


def test_cross_attention_with_keys_and_values_from_the_decoder_is_named():
    def cross_attention(x, memory, q_proj, kv_proj, out, num_heads, mask=None):
        q, k, v = _projections(x, x, q_proj, kv_proj, num_heads)  # "the layer's own input"
        y, _ = attention(q, k, v, mask)
        return out(merge_heads(y))

    result = _check(CROSS_ATTENTION, cross_attention, "keys_from_decoder")
    assert "memory" in result.steps[0]


def test_cross_attention_with_a_causal_mask_of_its_own_is_named():
    def cross_attention(x, memory, q_proj, kv_proj, out, num_heads, mask=None):
        q, k, v = _projections(x, memory, q_proj, kv_proj, num_heads)
        T_q, T_k = q.shape[-2], k.shape[-2]
        no_peeking = torch.tril(torch.ones(T_q, T_k)).bool()  # "a decoder never looks ahead"
        mask = no_peeking if mask is None else mask & no_peeking
        y, _ = attention(q, k, v, mask)
        return out(merge_heads(y))

    result = _check(CROSS_ATTENTION, cross_attention, "causal_mask")
    assert "known in full" in result.steps[0] or "all known" in result.steps[0]


def test_cross_attention_with_the_softmax_over_the_queries_is_named():
    def cross_attention(x, memory, q_proj, kv_proj, out, num_heads, mask=None):
        q, k, v = _projections(x, memory, q_proj, kv_proj, num_heads)
        scores = q @ k.transpose(2, 3) / math.sqrt(q.shape[3])  # (B, H, T_q, T_k)
        if mask is not None:
            scores = scores.masked_fill(mask == 0, -math.inf)
        weights = torch.softmax(scores, dim=2)  # "over the sequence"
        return out(merge_heads(weights @ v))

    _check(CROSS_ATTENTION, cross_attention, "softmax_over_queries")


def test_cross_attention_scaled_by_the_model_width_is_named():
    def cross_attention(x, memory, q_proj, kv_proj, out, num_heads, mask=None):
        q, k, v = _projections(x, memory, q_proj, kv_proj, num_heads)
        d_k = q_proj.out_features  # "the key width"
        scores = q @ k.transpose(-2, -1) / d_k**0.5
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        return out(merge_heads(scores.softmax(-1) @ v))

    _check(CROSS_ATTENTION, cross_attention, "scale_by_d_model")


def test_cross_attention_scaled_by_the_memory_length_is_named():
    def cross_attention(x, memory, q_proj, kv_proj, out, num_heads, mask=None):
        q, k, v = _projections(x, memory, q_proj, kv_proj, num_heads)
        scores = q @ k.transpose(-2, -1) / math.sqrt(k.shape[2])  # k (B, H, T_k, d): shape[2]
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        return out(merge_heads(scores.softmax(-1) @ v))

    _check(CROSS_ATTENTION, cross_attention, "scale_by_memory_length")


def test_cross_attention_with_keys_and_values_swapped_is_named():
    def cross_attention(x, memory, q_proj, kv_proj, out, num_heads, mask=None):
        D = x.shape[-1]
        kv = kv_proj(memory)
        v, k = kv[..., :D], kv[..., D:]  # "values first"
        y, _ = attention(
            split_heads(q_proj(x), num_heads),
            split_heads(k, num_heads),
            split_heads(v, num_heads),
            mask,
        )
        return out(merge_heads(y))

    _check(CROSS_ATTENTION, cross_attention, "kv_swapped")


def test_cross_attention_that_splits_kv_into_heads_first_is_named():
    def cross_attention(x, memory, q_proj, kv_proj, out, num_heads, mask=None):
        q = split_heads(q_proj(x), num_heads)
        kv = split_heads(kv_proj(memory), num_heads)  # (B, H, T_k, 2d)
        k, v = kv.chunk(2, dim=-1)
        y, _ = attention(q, k, v, mask)
        return out(merge_heads(y))

    _check(CROSS_ATTENTION, cross_attention, "kv_split_into_heads_first")


def test_cross_attention_with_torchs_mask_convention_is_named():
    def cross_attention(x, memory, q_proj, kv_proj, out, num_heads, mask=None):
        q, k, v = _projections(x, memory, q_proj, kv_proj, num_heads)
        if mask is not None:
            mask = mask.logical_not()  # "attn_mask: True where blocked"
        y, _ = attention(q, k, v, mask)
        return out(merge_heads(y))

    _check(CROSS_ATTENTION, cross_attention, "mask_inverted")


def test_cross_attention_that_forgets_the_mask_is_named():
    def cross_attention(x, memory, q_proj, kv_proj, out, num_heads, mask=None):
        y, _ = attention(*_projections(x, memory, q_proj, kv_proj, num_heads))
        return out(merge_heads(y))

    _check(CROSS_ATTENTION, cross_attention, "mask_ignored")


def test_cross_attention_with_the_roles_swapped_is_named():
    def cross_attention(x, memory, q_proj, kv_proj, out, num_heads, mask=None):
        q, k, v = _projections(memory, x, q_proj, kv_proj, num_heads)  # "memory asks"
        y, _ = attention(q, k, v)
        return out(merge_heads(y))

    _check(CROSS_ATTENTION, cross_attention, "queries_from_memory")


def test_cross_attention_without_the_output_projection_is_named():
    def cross_attention(x, memory, q_proj, kv_proj, out, num_heads, mask=None):
        y, _ = attention(*_projections(x, memory, q_proj, kv_proj, num_heads), mask)
        return merge_heads(y)

    _check(CROSS_ATTENTION, cross_attention, "no_out")


def test_cross_attention_that_returns_the_weights_too_is_named():
    def cross_attention(x, memory, q_proj, kv_proj, out, num_heads, mask=None):
        y, weights = attention(*_projections(x, memory, q_proj, kv_proj, num_heads), mask)
        return out(merge_heads(y)), weights

    _check(CROSS_ATTENTION, cross_attention, "returns_pair")


def _torchs_layer(x, q_proj, kv_proj, out, num_heads):
    layer = nn.MultiheadAttention(x.shape[-1], num_heads, batch_first=True, dtype=x.dtype)
    with torch.no_grad():
        layer.in_proj_weight.copy_(torch.cat([q_proj.weight, kv_proj.weight]))
        layer.in_proj_bias.copy_(torch.cat([q_proj.bias, kv_proj.bias]))
        layer.out_proj.load_state_dict(out.state_dict())
    return layer


def test_cross_attention_through_torchs_or_the_courses_layer_is_refused():
    # each of these is a right answer (it passes once the forbidden list is emptied), and the
    # check refuses it by the function it runs, with the hint for it
    def torchs_layer(x, memory, q_proj, kv_proj, out, num_heads, mask=None):
        B, T_q, T_k = x.shape[0], x.shape[1], memory.shape[1]
        blocked = None
        if mask is not None:  # torch's convention, (B * H, T_q, T_k)
            blocked = ~mask.expand(B, num_heads, T_q, T_k).reshape(B * num_heads, T_q, T_k)
        layer = _torchs_layer(x, q_proj, kv_proj, out, num_heads)
        return layer(x, memory, memory, attn_mask=blocked, need_weights=False)[0]

    def torchs_layer_given_our_mask(x, memory, q_proj, kv_proj, out, num_heads, mask=None):
        layer = _torchs_layer(x, q_proj, kv_proj, out, num_heads)
        return layer(x, memory, memory, attn_mask=mask)[0]  # wrong form, refused all the same

    def the_courses_layer(x, memory, q_proj, kv_proj, out, num_heads, mask=None):
        layer = CrossAttention(x.shape[-1], num_heads).to(x.dtype)
        layer.q, layer.kv, layer.out = q_proj, kv_proj, out
        return layer(x, memory, mask)

    def the_courses_cut(x, memory, q_proj, kv_proj, out, num_heads, mask=None):
        d = x.shape[-1] // num_heads
        q = split_heads(q_proj(x), num_heads)
        k, v = stacked_heads(kv_proj(memory), 2, num_heads, d)  # each (B, H, T_k, d)
        return out(merge_heads(attention(q, k, v, mask)[0]))

    def the_courses_pieces(x, memory, q_proj, kv_proj, out, num_heads, mask=None):
        return course_pieces().cross_attention(x, memory, q_proj, kv_proj, out, num_heads, mask)

    def fused_attention(x, memory, q_proj, kv_proj, out, num_heads, mask=None):
        q, k, v = _projections(x, memory, q_proj, kv_proj, num_heads)
        return out(merge_heads(F.scaled_dot_product_attention(q, k, v, attn_mask=mask)))

    unguarded = dataclasses.replace(CROSS_ATTENTION, forbidden=())
    for fn, called in [
        (torchs_layer, "MultiheadAttention.forward"),
        (torchs_layer_given_our_mask, "MultiheadAttention.forward"),
        (the_courses_layer, "CrossAttention.forward"),
        (the_courses_cut, "course_lib.multihead.stacked_heads"),
        (the_courses_pieces, "torch.nn.functional.multi_head_attention_forward"),
        (fused_attention, "torch.nn.functional.scaled_dot_product_attention"),
    ]:
        if fn is not torchs_layer_given_our_mask:  # raises without the list
            before = run(unguarded, fn)
            # the course's pieces hand back the reference, which the core knew already
            assert before.passed or before.bug == "course's own", (fn.__name__, before.message)
        result = run(CROSS_ATTENTION, fn)
        assert result.bug == "forbidden", (fn.__name__, result.message)
        assert f"your function calls {called}" in result.message, result.message
        assert "yours to build from your attention" in result.steps[0]


def test_cross_attention_in_float32_only_is_told_about_the_dtype():
    def cross_attention(x, memory, q_proj, kv_proj, out, num_heads, mask=None):
        q, k, v = _projections(x, memory, q_proj, kv_proj, num_heads)
        y, _ = attention(q, k, v, mask)
        return out(merge_heads(y)).to(torch.float32)

    result = _check(CROSS_ATTENTION, cross_attention, words=["expected dtype torch.float64"])
    assert result.steps[0] == DTYPE_HINT


# ---------------------------------------------------------------- decoder_layer


def test_decoder_layer_written_step_by_step_passes():
    def decoder_layer(y, memory, self_attn, cross_attn, memory_mask=None):
        T = y.shape[1]
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        y = y + self_attn(y, mask)
        y = y + cross_attn(y, memory, memory_mask)
        return y

    assert run(DECODER_LAYER, decoder_layer).passed


def test_decoder_layer_without_a_causal_mask_is_named():
    def decoder_layer(y, memory, self_attn, cross_attn, memory_mask=None):
        h = y + self_attn(y)  # "the decoder is self-attention plus cross-attention"
        return h + cross_attn(h, memory, memory_mask)

    result = _check(DECODER_LAYER, decoder_layer, "no_causal_mask")
    assert "copy" in result.steps[0]


def test_decoder_layer_with_the_causal_mask_on_both_attentions_is_named():
    def decoder_layer(y, memory, self_attn, cross_attn, memory_mask=None):
        mask = causal_mask(y.shape[1])
        h = y + self_attn(y, mask)
        if memory_mask is not None:
            mask = mask & memory_mask
        return h + cross_attn(h, memory, mask)  # "the decoder is causal"

    result = _check(DECODER_LAYER, decoder_layer, "causal_cross")
    assert "(T_out, T_src)" in result.steps[0]


def test_decoder_layer_with_the_causal_mask_on_both_raises_a_clear_error_on_unequal_lengths():
    # on the lesson's shapes the wrong mask cannot broadcast: the error names both shapes
    def decoder_layer(y, memory, self_attn, cross_attn, memory_mask=None):
        mask = causal_mask(y.shape[1])
        h = y + self_attn(y, mask)
        return h + cross_attn(h, memory, mask)

    case = DECODER_LAYER.case_list()[2]  # the lesson's shapes: 9 output, 8 source positions
    with pytest.raises(ValueError, match=r"\(2, 2, 9, 8\), got \(9, 9\)"):
        decoder_layer(*case.args, **case.kwargs)


def test_decoder_layer_with_cross_attention_to_itself_is_named():
    def decoder_layer(y, memory, self_attn, cross_attn, memory_mask=None):
        h = y + self_attn(y, causal_mask(y.shape[1]))
        return h + cross_attn(h, h)  # "attend across the whole output"

    _check(DECODER_LAYER, decoder_layer, "keys_from_decoder")


def test_decoder_layer_with_both_sub_layers_reading_y_is_named():
    def decoder_layer(y, memory, self_attn, cross_attn, memory_mask=None):
        looked_back = self_attn(y, causal_mask(y.shape[1]))
        looked_across = cross_attn(y, memory, memory_mask)
        return y + looked_back + looked_across  # "in parallel"

    _check(DECODER_LAYER, decoder_layer, "cross_reads_y")


def test_decoder_layer_with_cross_attention_first_is_named():
    def decoder_layer(y, memory, self_attn, cross_attn, memory_mask=None):
        y = y + cross_attn(y, memory, memory_mask)  # "read the source, then think"
        return y + self_attn(y, causal_mask(y.shape[1]))

    _check(DECODER_LAYER, decoder_layer, "order_swapped")


def test_decoder_layer_without_additions_is_named():
    def decoder_layer(y, memory, self_attn, cross_attn, memory_mask=None):
        looked = self_attn(y, causal_mask(y.shape[1]))
        return cross_attn(looked, memory, memory_mask)

    _check(DECODER_LAYER, decoder_layer, "no_residual")


def test_decoder_layer_that_forgets_the_memory_mask_is_named():
    def decoder_layer(y, memory, self_attn, cross_attn, memory_mask=None):
        h = y + self_attn(y, causal_mask(y.shape[1]))
        return h + cross_attn(h, memory)

    _check(DECODER_LAYER, decoder_layer, "memory_mask_ignored")


def test_decoder_layer_that_puts_the_padding_mask_on_self_attention_is_named():
    def decoder_layer(y, memory, self_attn, cross_attn, memory_mask=None):
        mask = causal_mask(y.shape[1])
        if memory_mask is not None:
            mask = mask & memory_mask  # "padding goes everywhere"
        h = y + self_attn(y, mask)
        return h + cross_attn(h, memory, memory_mask)

    _check(DECODER_LAYER, decoder_layer, "memory_mask_on_self")


def test_decoder_layer_with_an_upper_triangular_mask_is_named():
    def decoder_layer(y, memory, self_attn, cross_attn, memory_mask=None):
        T = y.shape[1]
        h = y + self_attn(y, torch.triu(torch.ones(T, T, dtype=torch.bool)))
        return h + cross_attn(h, memory, memory_mask)

    _check(DECODER_LAYER, decoder_layer, "causal_mask_transposed")


def test_decoder_layer_that_adds_in_place_is_caught():
    def decoder_layer(y, memory, self_attn, cross_attn, memory_mask=None):
        y += self_attn(y, causal_mask(y.shape[1]))
        y += cross_attn(y, memory, memory_mask)
        return y

    _check(DECODER_LAYER, decoder_layer, "in place", words=["`y` in place"])


def test_decoder_layer_whose_mask_takes_the_source_length_raises_a_clear_error():
    def decoder_layer(y, memory, self_attn, cross_attn, memory_mask=None):
        h = y + self_attn(y, causal_mask(memory.shape[1]))  # "T is the sentence length"
        return h + cross_attn(h, memory, memory_mask)

    result = _check(DECODER_LAYER, decoder_layer, words=["raised ValueError", "(2, 2, 9, 9)"])
    assert "(T_out, T_out)" in " ".join(result.steps)


def _copied_into_the_courses_layer(torch_layer, dtype):
    """The course's DecoderLayer holding the weights of torch's layer behind the check."""
    sa, ca = torch_layer.self_attn, torch_layer.multihead_attn
    D = sa.embed_dim
    layer = DecoderLayer(D, sa.num_heads).to(dtype)
    with torch.no_grad():
        layer.self_attn.qkv.weight.copy_(sa.in_proj_weight)
        layer.self_attn.qkv.bias.copy_(sa.in_proj_bias)
        layer.self_attn.out.load_state_dict(sa.out_proj.state_dict())
        layer.cross.q.weight.copy_(ca.in_proj_weight[:D])
        layer.cross.q.bias.copy_(ca.in_proj_bias[:D])
        layer.cross.kv.weight.copy_(ca.in_proj_weight[D:])
        layer.cross.kv.bias.copy_(ca.in_proj_bias[D:])
        layer.cross.out.load_state_dict(ca.out_proj.state_dict())
    return layer


def test_decoder_layer_through_a_whole_decoder_layer_is_refused():
    # each of these is a right answer (it passes once the forbidden list is emptied), and the
    # check refuses it by the function it runs, with the hint for it
    def courses_reference(y, memory, self_attn, cross_attn, memory_mask=None):
        return decoder_layer_reference(y, memory, self_attn, cross_attn, memory_mask)

    def courses_pieces(y, memory, self_attn, cross_attn, memory_mask=None):
        return course_pieces().decoder_layer(y, memory, self_attn, cross_attn, memory_mask)

    def torchs_layer_behind_the_arguments(y, memory, self_attn, cross_attn, memory_mask=None):
        layer, (B, T, _), T_src = self_attn.layer, y.shape, memory.shape[1]
        H = layer.self_attn.num_heads
        blocked = None
        if memory_mask is not None:
            blocked = ~memory_mask.expand(B, H, T, T_src).reshape(B * H, T, T_src)
        return layer(y, memory, tgt_mask=~causal_mask(T), memory_mask=blocked)

    def courses_layer(y, memory, self_attn, cross_attn, memory_mask=None):
        return _copied_into_the_courses_layer(self_attn.layer, y.dtype)(y, memory, memory_mask)

    unguarded = dataclasses.replace(DECODER_LAYER, forbidden=())
    for fn, called in [
        (courses_reference, "course_lib.seq2seq.decoder_layer_reference"),
        (courses_pieces, "course_lib.seq2seq.decoder_layer_reference"),
        (torchs_layer_behind_the_arguments, "TransformerDecoderLayer.forward"),
        (courses_layer, "DecoderLayer.forward"),
    ]:
        assert run(unguarded, fn).passed, fn.__name__
        result = run(DECODER_LAYER, fn)
        assert result.bug == "forbidden", (fn.__name__, result.message)
        assert f"your function calls {called}" in result.message, result.message
        assert "yours to wire from the self_attn and cross_attn" in result.steps[0]
