"""Lesson 06's demonstrations: attention is blind to order, sinusoids at any position, a
rotation, query-key scores under RoPE and under added encodings (lesson 06); a trained model
whose attention layers run another multi-head function, its RoPE layout changed, RoPE scores
moved along the sequence, the learned table's untrained rows, excess loss position by position
on the long lines, and the variant table's claims on positions (lessons 07a and 07b).

The position schemes a model uses are course_lib.positional.
"""

import copy
import json

import torch
from torch import nn

from course_lib import corpus, variants
from course_lib._validation import float_tensor, one_of
from course_lib.attention import scaled_dot_product_attention
from course_lib.model import TinyTransformer
from course_lib.positional import (
    ROPE_LAYOUTS,
    RotaryEmbedding,
    _angle_table,
    _check_base,
    _check_even,
    apply_rope,
    apply_rope_half,
    sinusoidal_encoding,
)
from course_lib.toy import project_qkv, toy_embeddings
from course_lib.train import token_losses


def _int_positions(name: str, positions) -> torch.Tensor:
    if isinstance(positions, int) and not isinstance(positions, bool):
        positions = torch.tensor([positions])
    if not isinstance(positions, torch.Tensor):
        raise TypeError(
            f"{name}: expected an int or a 1-D integer tensor, got {type(positions).__name__}"
        )
    if positions.is_floating_point() or positions.is_complex() or positions.dtype == torch.bool:
        raise TypeError(f"{name}: expected integer positions, got dtype {positions.dtype}")
    if positions.dim() != 1:
        raise ValueError(f"{name}: expected a 1-D tensor, got shape {tuple(positions.shape)}")
    return positions


def sinusoidal_at(positions, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """(T, D) sinusoidal encodings of any integer positions, negative ones too (lesson 06).

    Row p equals sinusoidal_encoding(...)[p] for p >= 0; sin and cos accept any angle, so
    the same formula gives a row for p < 0 (lesson 06's score-by-offset pictures use them).
    """
    positions = _int_positions("positions", positions)
    _check_even("d_model", d_model)
    base = _check_base(base)
    angles = _angle_table(positions, d_model, base, torch.float32)  # (T, D/2): p / base**(2i/D)
    pe = torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)  # (T, D/2, 2) -> (T, D)
    return pe.to(torch.float32)


def position_similarity(seq_len: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """(T, T) cosine similarity between the sinusoidal encodings of every two positions (lesson 06).

    Every row has norm sqrt(D/2) (each pair is a point on the unit circle), so this is the
    plain dot product divided by D/2: 1 on the diagonal, and it depends only on p - q.
    """
    pe = sinusoidal_encoding(seq_len, d_model, base)  # (T, D)
    return pe @ pe.T / (d_model / 2)  # (T, D) @ (D, T) -> (T, T)


def rotate_pair(pair: torch.Tensor, angle) -> torch.Tensor:
    """Rotate 2-vectors pair (..., 2) counter-clockwise by angle radians (lesson 06)."""
    float_tensor("pair", pair)
    if pair.shape[-1] != 2:
        raise ValueError(f"pair: expected a last dimension of 2, got shape {tuple(pair.shape)}")
    angle = torch.as_tensor(angle, dtype=pair.dtype)
    cos, sin = angle.cos(), angle.sin()
    x, y = pair[..., 0], pair[..., 1]
    return torch.stack((x * cos - y * sin, x * sin + y * cos), dim=-1)  # (..., 2)


def rope_scores(
    q: torch.Tensor, k: torch.Tensor, m, n, base: float = 10000.0, *, layout: str = "interleaved"
) -> torch.Tensor:
    """(P,) scores q_m . k_n: q (d,) rotated to positions m, k (d,) to positions n (lesson 06).

    m and n are ints or (P,) integer tensors (broadcast together). layout "interleaved" pairs
    dimensions (2i, 2i+1), as lesson 06; "half" pairs (i, i + d/2) (lesson 07a).
    """
    rotations = {"interleaved": apply_rope, "half": apply_rope_half}
    rotate = rotations[one_of("layout", layout, ROPE_LAYOUTS)]
    float_tensor("q", q)
    float_tensor("k", k)
    if q.dim() != 1 or q.shape != k.shape:
        raise ValueError(
            "q, k: expected two 1-D vectors of one even width, "
            f"got {tuple(q.shape)}, {tuple(k.shape)}"
        )
    m, n = torch.broadcast_tensors(_int_positions("m", m), _int_positions("n", n))  # (P,) each
    # float64: in float32 a score drifts by up to about 1e-4 between shift 0 and shift 1000
    # (tests/test_lesson07b_positions_past_training.py measures it; lesson 07b shows it)
    q_rot = rotate(q.double().expand(len(m), -1), m, base)  # (P, d)
    k_rot = rotate(k.double().expand(len(n), -1), n, base)  # (P, d)
    return (q_rot * k_rot).sum(dim=-1).to(q.dtype)  # (P,)


def additive_scores(x_q, x_k, w_q, w_k, m, n, base: float = 10000.0) -> torch.Tensor:
    """(P,) scores when sinusoidal encodings are added to the embeddings first (lesson 06).

    q = W_q (x_q + PE[m]) and k = W_k (x_k + PE[n]); x_q, x_k (D,); w_q, w_k (d, D), a row per
    output, as lesson 02a stores a projection.
    """
    for name, value in (("x_q", x_q), ("x_k", x_k), ("w_q", w_q), ("w_k", w_k)):
        float_tensor(name, value)
    m, n = torch.broadcast_tensors(_int_positions("m", m), _int_positions("n", n))  # (P,) each
    D = x_q.shape[-1]
    q = (x_q + sinusoidal_at(m, D, base)) @ w_q.T  # (P, D) @ (D, d) -> (P, d)
    k = (x_k + sinusoidal_at(n, D, base)) @ w_k.T  # (P, D) @ (D, d) -> (P, d)
    return (q * k).sum(dim=-1)  # (P,)


def permutation_demo(words, permutation, D: int = 16, d: int = 8, *, positions=None, seed: int = 0):
    """Attention outputs (T, d) for words and for words reordered by permutation (lesson 06).

    Returns (out, out_permuted). Embeddings and projections are random but fixed
    (course_lib.toy.toy_embeddings, project_qkv); positions = None, "sinusoidal"
    (added to the embeddings) or "rope" (queries and keys rotated). Without positions,
    out_permuted equals out[permutation]: attention only reorders its answers.
    """
    if positions not in (None, "sinusoidal", "rope"):
        raise ValueError(f"positions: expected None, 'sinusoidal' or 'rope', got {positions!r}")
    permutation = _int_positions("permutation", permutation)
    if sorted(permutation.tolist()) != list(range(len(words))):
        raise ValueError(
            f"permutation: expected a reordering of 0..{len(words) - 1}, got {permutation.tolist()}"
        )
    x = toy_embeddings(list(words), D, seed)  # (T, D)
    outputs = []
    for seq in (x, x[permutation]):  # (T, D) each
        where = torch.arange(len(words))  # (T,)
        if positions == "sinusoidal":
            seq = seq + sinusoidal_encoding(len(words), D)  # (T, D)
        q, k, v = project_qkv(seq, d, seed)  # (T, d) each
        if positions == "rope":
            q, k = apply_rope(q, where), apply_rope(k, where)
        outputs.append(scaled_dot_product_attention(q, k, v)[0])  # (T, d)
    return outputs[0], outputs[1]


# ---------------------------------------------------------------- a trained model's attention


class _AttentionThrough(nn.Module):
    """A trained attention layer whose forward is multihead(x, qkv, out, H, mask=, rope=)."""

    def __init__(self, layer, multihead, rope):
        super().__init__()
        self.layer, self.multihead, self.rope = layer, multihead, rope

    def forward(self, x, mask=None, return_weights: bool = False):
        if return_weights:
            raise ValueError("return_weights: expected False, a multihead function returns outputs")
        layer = self.layer
        return self.multihead(x, layer.qkv, layer.out, layer.num_heads, mask=mask, rope=self.rope)


def attention_layers(model) -> list:
    """The attention layers of a TinyTransformer, first to last: each holds its trained
    projections `qkv` (rows [q | k | v], each H heads of d) and `out` (lessons 06-07a)."""
    return [block.attn for block in model.blocks]


def with_attention(model, multihead, rope=None):
    """A copy of a trained TinyTransformer whose every attention layer computes
    multihead(x, layer.qkv, layer.out, layer.num_heads, mask=mask, rope=rope) with its own
    trained weights: the learner's multi-head attention and RoPE inside it (lesson 06)."""
    twin = copy.deepcopy(model)
    for block in twin.blocks:
        block.attn = _AttentionThrough(block.attn, multihead, rope)
    return twin.eval()


def set_rope_layout(model, layout: str):
    """Give every attention layer of a RoPE model the RoPE of `layout` ("interleaved" or
    "half"), weights untouched; returns the model (lesson 07a)."""
    for layer in attention_layers(model):
        layer.rope = RotaryEmbedding(layer.d_head, layout=layout, max_len=model.config.max_len)
    return model


def hf_permute(w: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Hugging Face's `permute` (convert_llama_weights_to_hf.py), for a query or key weight
    (H * d, D) trained in the interleaved layout: its rows for rotate-half RoPE (lesson 07a)."""
    H, D = num_heads, w.shape[1]
    d = w.shape[0] // H
    # each head's d rows as d/2 pairs of rows; swapping those two axes puts every pair's first
    # row (the even rows) before every pair's second (the odd rows)
    return w.view(H, d // 2, 2, D).transpose(1, 2).reshape(H * d, D)  # via (H, 2, d/2, D)


def rope_drift(q: torch.Tensor, k: torch.Tensor, m: int, n: int, shifts, dtype) -> torch.Tensor:
    """(S,) the largest |score(m + s, n + s) - score(m, n)| over P query-key pairs, q and k
    (P, d), for each shift s, every vector turned by apply_rope in dtype (its angles in float32
    for float32, in float64 for float64): zero on paper, what rounding leaves (lesson 07b)."""
    float_tensor("q", q, min_dim=2)
    float_tensor("k", k, min_dim=2)
    if q.dim() != 2 or q.shape != k.shape:
        raise ValueError(
            f"q, k: expected two (P, d) tensors, got {tuple(q.shape)}, {tuple(k.shape)}"
        )
    shifts = _int_positions("shifts", shifts)
    where = torch.cat((torch.zeros(1, dtype=shifts.dtype), shifts))  # (S + 1,): s = 0 first
    q_m = apply_rope(q.to(dtype)[:, None].expand(-1, len(where), -1), m + where)  # (P, S + 1, d)
    k_n = apply_rope(k.to(dtype)[:, None].expand(-1, len(where), -1), n + where)  # (P, S + 1, d)
    scores = (q_m * k_n).sum(dim=-1)  # (P, S + 1)
    return (scores[:, 1:] - scores[:, :1]).abs().amax(dim=0)  # (S,)


def learned_rows_moved(variant: str = "learned-positions", seed: int = 0) -> torch.Tensor:
    """(max_len,) how far each row of a shipped learned-positions model's table moved in
    training from its random start (rebuilt from the seed, as the training run built it), as
    a share of the row's length at the start (lesson 07b)."""
    trained = variants.load_trained(variant, seed)
    if trained.config.positional != "learned":
        raise ValueError(f"variant: expected one with learned positions, got {variant!r}")
    with torch.random.fork_rng(devices=[]):  # the caller's random numbers stay as they were
        torch.manual_seed(seed)  # course_lib.set_seed(seed), as variants trains: torch's part
        start = TinyTransformer.from_config(trained.config).pos.weight.detach()  # (L, D)
    change = trained.pos.weight.detach() - start  # (L, D)
    return change.norm(dim=-1) / start.norm(dim=-1)  # (L,)


# ---------------------------------------------------------------- lengths beyond training


def long_excess(kinds: dict) -> dict:
    """{label: (seeds, LONG_LEN - 1)}: excess loss over the floor at every position of the long
    split's lines, one row per seed, for each shipped variant of `kinds` ({variant: label}):
    position t predicts token t + 1, positions 0-30 are inside the trained length (lesson 07b)."""
    long_ids = corpus.load_split("long")  # (200, 128)
    curves = {}
    for variant, label in kinds.items():
        runs = [token_losses(variants.load_trained(variant, seed), long_ids)
                for seed in variants.SEEDS]  # fmt: skip
        curves[label] = torch.stack([corpus.excess_by_position(r, "long") for r in runs])
    return curves


def seed_excess(variant: str, split: str = "valid", skill: str = "all") -> list[float]:
    """The variant table's excess over the floor for `variant`, one number per seed, on the
    validation split ("valid") or beyond the trained length ("long", positions 32-126)
    (lesson 07b)."""
    table = json.loads(variants.RESULTS.read_text(encoding="utf-8"))
    runs = [r[split][skill] for r in table["runs"] if r["variant"] == variant]
    if not runs:
        raise ValueError(f"variant: expected one in the variant table, got {variant!r}")
    return runs


# the variant table's rows on positions, each with the words a lesson reads it in
POSITION_ROWS = {
    "positions, inside the trained length, at one layer": "one layer, inside",
    "positions, inside the trained length": "two layers, inside",
    "learned positions against none, inside the trained length": "two layers, inside",
    "positions, beyond the trained length": "two layers, beyond",
    "RoPE against no positions, beyond the trained length": "two layers, beyond",
    "RoPE and no positions against learned positions, beyond the trained length":
        "two layers, beyond",
}  # fmt: skip
POSITION_NAMES = {"base": "RoPE", "sinusoidal": "sinusoidal", "learned-positions": "learned",
                  "no-positions": "none", "1-layer-heads-4": "RoPE",
                  "1-layer-sinusoidal": "sinusoidal", "1-layer-no-positions": "none"}  # fmt: skip


def position_claims(skill: str = "all") -> list[str]:
    """The variant table's claims on positions for `skill`, one line each: which variant is
    ahead of which by how much (the gap of the means), the bar (3 times the larger seed range)
    and whether the claim "the first beats the second" holds (lesson 07b).

    A claim whose gap is negative has the first variant behind: the line says so.
    """
    table = json.loads(variants.RESULTS.read_text(encoding="utf-8"))
    rows = {r["name"]: r for r in table["rows"]}
    lines, last = [], None
    for name, where in POSITION_ROWS.items():
        row = rows[name]
        for c in (c for c in row["claims"] if c["skill"] == skill):
            better, worse = POSITION_NAMES[c["better"]], POSITION_NAMES[c["worse"]]
            side = "ahead of" if c["gap"] >= 0 else "behind"
            said = "holds" if c["holds"] else "does not hold"
            lead = f"{where}:" if where != last else ""
            lines.append(f"{lead:20s} {better:10s} {side:8s} {worse:10s} by {abs(c['gap']):.3f}, "
                         f"bar {c['bar']:.3f}: {said}")  # fmt: skip
            last = where
    return lines
