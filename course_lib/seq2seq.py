"""Cross-attention and a small encoder-decoder built around it (lesson 05_encoder_decoder).

The encoder reads the whole source with bidirectional self-attention (no mask: every position
sees every other). The decoder writes the output one token at a time: causal self-attention
over what it has written so far, then cross-attention, whose queries come from the decoder
and whose keys and values come from the encoder's output (`memory`). Each sub-layer's output
is added to the stream it read (a residual connection). The model has no feed-forward
sub-layers and no norms: the lesson's task, reversing a short sentence, needs neither.

`run_pieces` computes the same forward pass through functions given in a `Pieces`: the
learner's multihead (lesson 04a), cross_attention and decoder_layer (lesson
05_encoder_decoder), on the model's own weights, so the model the lesson trains is computed by
the learner's code. `course_pieces()` are the course's stand-ins for the ones not written.
"""

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from course_lib._validation import float_tensor, positive_int
from course_lib.attention import attend, causal_mask, check_mask, scale_factor
from course_lib.multihead import MultiHeadAttention, check_heads, stacked_heads


def check_cross_inputs(x, memory, mask, num_heads: int, d_head: int) -> None:
    """Raise unless x (B, T_q, D) and memory (B, T_k, D) fit H heads of width d and mask fits
    the scores (B, H, T_q, T_k) (lesson 05_encoder_decoder)."""
    D = num_heads * d_head
    for name, value in (("x", x), ("memory", memory)):
        float_tensor(name, value, min_dim=3)
        if value.dim() != 3 or value.shape[-1] != D:
            raise ValueError(f"{name}: expected shape (B, T, {D}), got {tuple(value.shape)}")
    if memory.shape[0] != x.shape[0]:
        raise ValueError(
            f"memory: expected the batch size of x ({x.shape[0]}), got {tuple(memory.shape)}"
        )
    if memory.dtype != x.dtype:
        raise TypeError(f"memory: expected x's dtype {x.dtype}, got {memory.dtype}")
    if mask is not None:
        B, T_q, T_k = x.shape[0], x.shape[1], memory.shape[1]
        check_mask(mask, torch.Size((B, num_heads, T_q, T_k)))


class CrossAttention(nn.Module):
    """Multi-head attention whose queries come from x and whose keys and values come from
    memory, another sequence of its own length (lesson 05_encoder_decoder).

    q is a Linear(D, D) for the queries, kv one Linear(D, 2D) laid out [k | v], out a
    Linear(D, D): torch.nn.MultiheadAttention's in_proj_weight is [q; k; v] stacked the same
    way, so `to_torch()` copies the weights straight across.
    """

    def __init__(self, d_model: int, num_heads: int, *, bias: bool = True):
        super().__init__()
        check_heads(d_model, num_heads, True)
        self.num_heads = num_heads
        self.d_head = d_model // num_heads
        self.q = nn.Linear(d_model, d_model, bias=bias)
        self.kv = nn.Linear(d_model, 2 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)

    def heads(self, x, memory):
        """q (B, H, T_q, d) from x; k and v (B, H, T_k, d) from memory."""
        B, T_q, D = x.shape
        q = self.q(x).view(B, T_q, self.num_heads, self.d_head).transpose(1, 2)  # (B, H, T_q, d)
        k, v = stacked_heads(self.kv(memory), 2, self.num_heads, self.d_head)  # (B, H, T_k, d)
        return q, k, v

    def forward(self, x, memory, mask=None, return_weights: bool = False):
        check_cross_inputs(x, memory, mask, self.num_heads, self.d_head)
        q, k, v = self.heads(x, memory)
        y, weights = attend(q, k, v, mask, scale_factor(True, self.d_head))  # (B, H, T_q, d)
        B, T_q, D = x.shape
        y = self.out(y.transpose(1, 2).reshape(B, T_q, D))  # (B, H, T_q, d) -> (B, T_q, D)
        return (y, weights) if return_weights else y  # weights (B, H, T_q, T_k)

    def to_torch(self) -> nn.MultiheadAttention:
        """torch.nn.MultiheadAttention (batch_first) holding copies of these weights: called as
        layer(x, memory, memory) it computes this module's x, memory (lesson 05_encoder_decoder)."""
        bias = self.q.bias is not None
        D = self.q.in_features
        twin = nn.MultiheadAttention(D, self.num_heads, bias=bias, batch_first=True)
        twin = twin.to(self.q.weight.dtype)
        with torch.no_grad():
            twin.in_proj_weight.copy_(torch.cat([self.q.weight, self.kv.weight]))  # (3D, D)
            twin.out_proj.weight.copy_(self.out.weight)
            if bias:
                twin.in_proj_bias.copy_(torch.cat([self.q.bias, self.kv.bias]))
                twin.out_proj.bias.copy_(self.out.bias)
        return twin


class EncoderLayer(nn.Module):
    """x + self-attention over the whole source, no mask (lesson 05_encoder_decoder)."""

    def __init__(self, d_model: int, num_heads: int):
        super().__init__()
        self.attn = MultiHeadAttention(d_model, num_heads, check_inputs=False)

    def forward(self, x):
        return x + self.attn(x)  # (B, T_src, D): bidirectional


class DecoderLayer(nn.Module):
    """Causal self-attention, then cross-attention to the encoder's output, each added to the
    stream (lesson 05_encoder_decoder)."""

    def __init__(self, d_model: int, num_heads: int):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, check_inputs=False)
        self.cross = CrossAttention(d_model, num_heads)

    def forward(self, y, memory, memory_mask=None, return_weights: bool = False):
        h = y + self.self_attn(y, causal_mask(y.shape[1], device=y.device))  # (B, T_out, D)
        update, weights = self.cross(h, memory, memory_mask, return_weights=True)
        out = h + update  # (B, T_out, D)
        return (out, weights) if return_weights else out


@dataclass(frozen=True)
class Seq2SeqConfig:
    """The encoder-decoder's sizes; every default is the lesson's (lesson 05_encoder_decoder)."""

    vocab_size: int  # the tokens of source and output, start and end marks included
    source_length: int = 8  # positions with a learned vector in the encoder
    output_length: int = 9  # positions in the decoder: the start mark, then the output
    d_model: int = 32
    num_heads: int = 2  # head width d = 16
    encoder_layers: int = 1
    decoder_layers: int = 2

    def __post_init__(self):
        for name in (
            "vocab_size",
            "source_length",
            "output_length",
            "d_model",
            "num_heads",
            "encoder_layers",
            "decoder_layers",
        ):
            positive_int(name, getattr(self, name))
        check_heads(self.d_model, self.num_heads, True)


class EncoderDecoder(nn.Module):
    """Token embeddings plus one learned vector per position, an encoder stack, a decoder
    stack, and a Linear to next-token logits (lesson 05_encoder_decoder)."""

    def __init__(self, config: Seq2SeqConfig):
        super().__init__()
        if not isinstance(config, Seq2SeqConfig):
            raise TypeError(f"config: expected a Seq2SeqConfig, got {type(config).__name__}")
        self.config = config
        D = config.d_model
        self.embed = nn.Embedding(config.vocab_size, D)
        # one learned vector per position, added to the token's (the lesson on positions
        # explains better ways); standard normal at the start, like the embeddings
        self.source_positions = nn.Parameter(nn.init.normal_(torch.empty(config.source_length, D)))
        self.output_positions = nn.Parameter(nn.init.normal_(torch.empty(config.output_length, D)))
        self.encoder = nn.ModuleList(
            EncoderLayer(D, config.num_heads) for _ in range(config.encoder_layers)
        )
        self.decoder = nn.ModuleList(
            DecoderLayer(D, config.num_heads) for _ in range(config.decoder_layers)
        )
        self.head = nn.Linear(D, config.vocab_size)

    def check_ids(self, name: str, ids, length: int) -> None:
        if not isinstance(ids, torch.Tensor) or ids.dtype != torch.long or ids.dim() != 2:
            got = f"{ids.dtype} {tuple(ids.shape)}" if isinstance(ids, torch.Tensor) else ids
            raise TypeError(f"{name}: expected token ids, an int64 tensor (B, T), got {got!r}")
        if not 1 <= ids.shape[1] <= length:
            raise ValueError(f"{name}: expected 1 to {length} positions, got {ids.shape[1]}")
        if ids.numel() and (ids.min() < 0 or ids.max() >= self.config.vocab_size):
            raise ValueError(
                f"{name}: expected ids in 0..{self.config.vocab_size - 1}, "
                f"got {int(ids.min())}..{int(ids.max())}"
            )

    def source_stream(self, source):
        self.check_ids("source", source, self.config.source_length)
        return self.embed(source) + self.source_positions[: source.shape[1]]  # (B, T_src, D)

    def output_stream(self, decoder_in):
        self.check_ids("decoder_in", decoder_in, self.config.output_length)
        return self.embed(decoder_in) + self.output_positions[: decoder_in.shape[1]]

    def encode(self, source):
        """The encoder's output, the memory (B, T_src, D)."""
        x = self.source_stream(source)
        for layer in self.encoder:
            x = layer(x)
        return x

    def decode(self, decoder_in, memory, memory_mask=None, return_weights: bool = False):
        """Logits (B, T_out, V); with return_weights also each layer's cross-attention weights,
        a list of (B, H, T_out, T_src)."""
        y = self.output_stream(decoder_in)
        maps = []
        for layer in self.decoder:
            y, weights = layer(y, memory, memory_mask, return_weights=True)
            maps.append(weights)
        logits = self.head(y)  # (B, T_out, V)
        return (logits, maps) if return_weights else logits

    def forward(self, source, decoder_in, memory_mask=None, return_weights: bool = False):
        return self.decode(decoder_in, self.encode(source), memory_mask, return_weights)


# ---------------------------------------------------------------- the learner's pieces


def cross_attention_reference(x, memory, q_proj, kv_proj, out, num_heads, mask=None):
    """torch's own multi-head attention with queries from x and keys and values from memory,
    holding q_proj's and kv_proj's weights as its in_proj and out as its out_proj: the
    reference the lesson's cross_attention is checked against (lesson 05_encoder_decoder)."""
    B, T_q, D = x.shape
    T_k = memory.shape[1]
    weight = torch.cat([q_proj.weight, kv_proj.weight])  # (3D, D): [q; k; v], torch's layout
    bias = None if q_proj.bias is None else torch.cat([q_proj.bias, kv_proj.bias])
    blocked = None
    if mask is not None:  # ours: True = may attend; torch's: True = blocked, (B * H, T_q, T_k)
        blocked = ~mask.expand(B, num_heads, T_q, T_k).reshape(B * num_heads, T_q, T_k)
    seq_first = x.transpose(0, 1), memory.transpose(0, 1)  # (T, B, D): torch's layout
    y, _ = F.multi_head_attention_forward(
        seq_first[0],
        seq_first[1],
        seq_first[1],
        D,
        num_heads,
        weight,
        bias,
        None,
        None,
        False,
        0.0,
        out.weight,
        out.bias,
        training=False,
        need_weights=False,
        attn_mask=blocked,
    )
    return y.transpose(0, 1)  # (B, T_q, D)


def decoder_layer_reference(y, memory, self_attn, cross_attn, memory_mask=None):
    """y + causal self-attention, then + cross-attention over memory (lesson 05_encoder_decoder)."""
    h = y + self_attn(y, causal_mask(y.shape[1], device=y.device))  # (B, T_out, D)
    return h + cross_attn(h, memory, memory_mask)  # (B, T_out, D)


def _course_multihead(x, qkv, out, num_heads, mask=None, rope=None):
    from course_lib.exercises.lesson04a_multihead_layer import multihead_reference

    return multihead_reference(x, qkv, out, num_heads, mask, rope)


@dataclass(frozen=True)
class Pieces:
    """The functions a forward pass is computed with: multihead (lesson 04a), cross_attention
    and decoder_layer (lesson 05_encoder_decoder), each with its exercise's signature."""

    multihead: Callable
    cross_attention: Callable
    decoder_layer: Callable

    def __post_init__(self):
        for name in ("multihead", "cross_attention", "decoder_layer"):
            if not callable(getattr(self, name)):
                raise TypeError(f"{name}: expected a function, got {type(getattr(self, name))}")


def course_pieces() -> Pieces:
    """The course's versions of the three pieces (lesson 05_encoder_decoder)."""
    return Pieces(_course_multihead, cross_attention_reference, decoder_layer_reference)


def run_pieces(
    model: EncoderDecoder,
    source,
    decoder_in,
    pieces: Pieces,
    *,
    memory_mask=None,
    record: list | None = None,
):
    """The model's logits (B, T_out, V), computed through `pieces` on the model's weights.

    With `record` a list, each decoder layer's cross-attention weights (B, H, T_out, T_src)
    are appended to it: the weights the course's arithmetic gives for the queries and keys
    that the decoder layer handed its cross-attention (lesson 05_encoder_decoder).
    """
    if not isinstance(pieces, Pieces):
        raise TypeError(f"pieces: expected a Pieces, got {type(pieces).__name__}")
    H = model.config.num_heads
    x = model.source_stream(source)
    for layer in model.encoder:  # bidirectional: no mask
        x = x + pieces.multihead(x, layer.attn.qkv, layer.attn.out, H, None)
    memory = x  # (B, T_src, D)
    y = model.output_stream(decoder_in)
    for layer in model.decoder:

        def self_attn(h, mask=None, attn=layer.self_attn):
            return pieces.multihead(h, attn.qkv, attn.out, H, mask)

        def cross_attn(h, keys_from, mask=None, cross=layer.cross):
            if record is not None:
                with torch.no_grad():
                    record.append(cross(h, keys_from, mask, return_weights=True)[1])
            return pieces.cross_attention(h, keys_from, cross.q, cross.kv, cross.out, H, mask)

        y = pieces.decoder_layer(y, memory, self_attn, cross_attn, memory_mask)
    return model.head(y)  # (B, T_out, V)
