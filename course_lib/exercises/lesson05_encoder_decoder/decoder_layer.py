"""Lesson 05_encoder_decoder's decoder_layer exercise, checked against
torch.nn.TransformerDecoderLayer with its norms and feed-forward layer switched off."""

import math

import torch
from torch import nn

from course_lib import seq2seq
from course_lib.attention import causal_mask, check_mask
from course_lib.exercises.core import Bug, Case, Exercise


def _blocked(mask, B: int, H: int, T_q: int, T_k: int):
    """Our mask (True = may attend, broadcastable to (B, H, T_q, T_k)) as torch takes it:
    True = blocked, (B * H, T_q, T_k)."""
    if mask is None:
        return None
    check_mask(mask, torch.Size((B, H, T_q, T_k)))  # a mask of the wrong size says so
    return ~mask.expand(B, H, T_q, T_k).reshape(B * H, T_q, T_k)


class TorchSelfAttention:
    """self_attn(h, mask=None) -> (B, T, D): the self-attention of a torch decoder layer."""

    def __init__(self, layer: nn.TransformerDecoderLayer):
        self.layer = layer

    def __call__(self, h, mask=None):
        attn = self.layer.self_attn
        B, T, _ = h.shape
        blocked = _blocked(mask, B, attn.num_heads, T, T)
        return attn(h, h, h, attn_mask=blocked, need_weights=False)[0]  # (B, T, D)


class TorchCrossAttention:
    """cross_attn(h, memory, mask=None) -> (B, T_q, D): the cross-attention of a torch decoder
    layer, queries from h, keys and values from memory."""

    def __init__(self, layer: nn.TransformerDecoderLayer):
        self.layer = layer

    def __call__(self, h, memory, mask=None):
        attn = self.layer.multihead_attn
        B, T_q, _ = h.shape
        blocked = _blocked(mask, B, attn.num_heads, T_q, memory.shape[1])
        return attn(h, memory, memory, attn_mask=blocked, need_weights=False)[0]


def _torch_layer(D: int, H: int, g: torch.Generator, dtype=torch.float32):
    """A torch decoder layer that computes y + SA(y), then + CA(., memory): pre-norm with its
    norms replaced by the identity and its feed-forward layer's output weights zero."""
    with torch.random.fork_rng(devices=[]):
        layer = nn.TransformerDecoderLayer(
            D, H, dim_feedforward=4, dropout=0.0, batch_first=True, norm_first=True, dtype=dtype
        )
    layer.norm1 = layer.norm2 = layer.norm3 = nn.Identity()
    with torch.no_grad():
        for attn in (layer.self_attn, layer.multihead_attn):
            for p in attn.parameters():
                p.copy_(torch.randn(p.shape, generator=g, dtype=dtype) / math.sqrt(D))
        layer.linear2.weight.zero_()
        layer.linear2.bias.zero_()
    return layer.eval()


def decoder_layer_torch(y, memory, self_attn, cross_attn, memory_mask=None):
    """What torch's own decoder layer (behind self_attn and cross_attn) computes from y and
    memory, with a causal mask on its self-attention: the checker's reference."""
    layer = self_attn.layer
    B, T, _ = y.shape
    H = layer.self_attn.num_heads
    blocked = _blocked(memory_mask, B, H, T, memory.shape[1])
    return layer(y, memory, tgt_mask=~causal_mask(T), memory_mask=blocked, tgt_is_causal=True)


def _cases() -> list[Case]:
    g = torch.Generator().manual_seed(5)

    def case(B, T_out, T_src, D, H, label, lengths=None, dtype=torch.float32):
        layer = _torch_layer(D, H, g, dtype)
        y = torch.randn(B, T_out, D, generator=g, dtype=torch.float64).to(dtype)
        memory = torch.randn(B, T_src, D, generator=g, dtype=torch.float64).to(dtype)
        mask = None
        if lengths is not None:
            mask = (torch.arange(T_src) < torch.tensor(lengths)[:, None])[:, None, None, :]
        args = (y, memory, TorchSelfAttention(layer), TorchCrossAttention(layer))
        return Case(args, {"memory_mask": mask}, label=label)

    return [
        # T_out = T_src first: masks of the wrong size give numbers here, not an error
        case(2, 5, 5, 8, 2, "as many output positions as source positions (5), no padding"),
        case(
            2,
            6,
            6,
            8,
            2,
            "T_out = T_src = 6, the second source padded after 4 tokens",
            lengths=[6, 4],
        ),
        case(2, 9, 8, 16, 2, "the lesson's shapes: 9 output positions, 8 source positions"),
        case(
            2,
            3,
            7,
            16,
            4,
            "3 output positions, 7 source positions, the first source padded after 5",
            lengths=[5, 7],
        ),
        case(
            2,
            4,
            6,
            8,
            2,
            "float64 y, memory and layers: the result stays float64",
            lengths=[6, 3],
            dtype=torch.float64,
        ),
    ]


def _wire(
    *,
    self_mask="causal",
    cross_mask="memory",
    keys="memory",
    cross_reads="h",
    order=("self", "cross"),
    residual=(True, True),
):
    """decoder_layer wired the way a learner might get it wrong."""

    def wrong(y, memory, self_attn, cross_attn, memory_mask=None):
        T_out = y.shape[1]
        causal = causal_mask(T_out)
        self_masks = {
            "causal": causal,
            "none": None,
            "upper": causal.T.contiguous(),
            "causal and memory": causal if memory_mask is None else causal & memory_mask,
        }
        cross_masks = {
            "memory": memory_mask,
            "none": None,
            "causal": causal if memory_mask is None else causal & memory_mask,
        }

        def self_part(h):
            return self_attn(h, self_masks[self_mask])

        def cross_part(h):
            source = {"h": h, "y": y}[cross_reads]
            keys_from = memory if keys == "memory" else source
            return cross_attn(source, keys_from, cross_masks[cross_mask])

        parts = {"self": self_part, "cross": cross_part}
        h = y
        for which, add in zip(order, residual, strict=True):
            update = parts[which](h)
            h = h + update if add else update
        return h

    return wrong


def _one_residual(y, memory, self_attn, cross_attn, memory_mask=None):
    """One addition around both sub-layers: y + CA(SA(y), memory)."""
    return y + cross_attn(self_attn(y, causal_mask(y.shape[1])), memory, memory_mask)


DECODER_LAYER = Exercise(
    name="decoder_layer",
    lesson="05_encoder_decoder",
    reference=decoder_layer_torch,
    cases=_cases,
    idea="the section 'An encoder-decoder from your pieces': the picture of the decoder "
    "layer, and the contract's line on what the layer's output at position t may see",
    bugs=(
        Bug(
            "no_causal_mask",
            _wire(self_mask="none"),
            "each output position's self-attention sees the positions after it: your "
            "decoder's self-attention has no causal mask",
            "the decoder's self-attention reads the output written so far, so position t may "
            "see positions 0..t only (a causal mask of size T_out, the length of y). Without "
            "it, training lets each position copy the token it should predict.",
        ),
        Bug(
            "causal_mask_transposed",
            _wire(self_mask="upper"),
            "your self-attention mask lets each output position see the positions after it "
            "and blocks the ones before",
            "your causal mask is upper-triangular. Row t is query t and column s key s: "
            "query t may see keys s <= t, True on and below the diagonal.",
        ),
        Bug(
            "causal_cross",
            _wire(cross_mask="causal"),
            "output position i of your cross-attention sees source positions 0..i only: it "
            "got a causal mask",
            "the causal mask belongs to the decoder's self-attention only. Cross-attention "
            "reads the source, which is known in full before decoding starts: it gets "
            "memory_mask (padding) as it is, and its scores are (T_out, T_src), not "
            "(T_out, T_out).",
        ),
        Bug(
            "memory_mask_ignored",
            _wire(cross_mask="none"),
            "with a memory_mask, your cross-attention still reads the source's padding",
            "memory_mask is never passed on: give it to cross_attn, whose scores it fits "
            "((B, 1, 1, T_src) broadcasts over every query and head).",
        ),
        Bug(
            "memory_mask_on_self",
            _wire(self_mask="causal and memory"),
            "with a memory_mask, your self-attention blocks positions of the output: the "
            "source's padding mask went into the decoder's self-attention",
            "memory_mask marks the padding of the source; the decoder's self-attention "
            "compares output positions with output positions and gets the causal mask alone.",
        ),
        Bug(
            "keys_from_decoder",
            _wire(keys="h"),
            "your cross-attention takes its keys and values from the decoder's own stream, "
            "not from memory",
            "cross_attn(h, memory, mask): the queries come from the decoder's stream, the keys "
            "and values from memory, the encoder's output. That is the only place the source "
            "enters the decoder.",
        ),
        Bug(
            "cross_reads_y",
            _wire(cross_reads="y"),
            "your cross-attention reads the layer's input y, not the stream after self-attention",
            "the two sub-layers run one after the other: cross-attention's queries come from "
            "h = y + self-attention(y), so it sees what self-attention just added.",
        ),
        Bug(
            "order_swapped",
            _wire(order=("cross", "self")),
            "your layer runs cross-attention first and self-attention second",
            "first causal self-attention over the output so far, then cross-attention to the "
            "source, reading the stream self-attention has added to.",
        ),
        Bug(
            "no_residual",
            _wire(residual=(False, False)),
            "your layer returns what the sub-layers compute, without adding it to the stream",
            "each sub-layer's output is an update added to the stream it read: h = y + "
            "self-attention, then h + cross-attention.",
        ),
        Bug(
            "second_residual_missing",
            _wire(residual=(True, False)),
            "your layer returns the cross-attention's output alone: it is not added to the stream",
            "cross-attention's output is an update too: return h plus it.",
        ),
        Bug(
            "first_residual_missing",
            _wire(residual=(False, True)),
            "the stream after your self-attention is its output alone: y is never added",
            "self-attention's output is an update: h = y + self-attention(y), and "
            "cross-attention reads that h.",
        ),
        Bug(
            "one_residual",
            _one_residual,
            "one addition around both sub-layers: cross-attention reads the self-attention's "
            "output alone",
            "each sub-layer gets its own addition: h = y + self-attention(y), then "
            "h + cross-attention(h, memory).",
        ),
    ),
    hints=(
        "Two steps, each added to the stream: causal self-attention over y (a causal mask of "
        "y's length), then cross-attention whose queries come from the result and whose keys "
        "and values come from memory, under memory_mask.",
        "A mask of the wrong size raises an error that says which shape it expected: the "
        "self-attention's scores are (T_out, T_out), the cross-attention's (T_out, T_src).",
    ),
    # whole decoder layers, in torch (the one behind self_attn and cross_attn, reachable
    # through their .layer) and in the course (course_pieces().decoder_layer is
    # decoder_layer_reference); the reference itself is caught by the core
    forbidden=(
        (nn.TransformerDecoderLayer, "forward"),
        (seq2seq, "decoder_layer_reference"),
        (seq2seq.DecoderLayer, "forward"),
    ),
    forbidden_hint="decoder_layer is yours to wire from the self_attn and cross_attn it is "
    "handed. torch's decoder layer (the one behind them, which the check compares with) and "
    "the course's own decoder layers compute the whole layer, so calling one checks nothing.",
)
