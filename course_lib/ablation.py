"""Ablation: knock parts of a trained TinyTransformer out and measure what each skill loses
(lessons 09 and 12), or run it without the 1/sqrt(d) scale it was trained with.

A detector (course_lib.heads) says where a head looks; knocking the head out says what the
model needs it for. The loss is split by skill, using the positions course_lib.data marks:

- "overall": every prediction, position t predicting token t + 1, as in train.evaluate;
- "agreement": the predictions of a verb, made at the position just before it (the query of
  data.subject_pairs); the verb's number and kind are decided by the subject;
- "brackets": the predictions of a closer ) ] or a closing ", made at the position just before
  it (the query of data.bracket_pairs); which closer it is is decided by its opener;
- "song" (not in SKILLS, ask for it with skills=): the predictions inside a song, where the next
  word copies the one before the current word (the queries of data.previous_token_pairs).

Each skill's loss is the mean cross-entropy of the token that actually comes next, over its
positions only, so it also contains the model's doubt about *whether* a verb or closer comes
next; a knock-out that raises it has made that prediction worse, whatever the reason.

Knocking out never changes the model: forward hooks, removed when the call ends, change what
one head (or one feed-forward layer) hands on, and only while the call runs.
"""

import copy
import dataclasses
from contextlib import contextmanager

import torch
import torch.nn.functional as F

from course_lib import data, train
from course_lib._validation import one_of
from course_lib.attention import causal_mask, scaled_dot_product_attention
from course_lib.model import TinyTransformer
from course_lib.runtime import evaluating

SKILLS = ("overall", "agreement", "brackets")
ALL_SKILLS = (*SKILLS, "song")
MODES = ("zero", "mean")
# the query of each (query, key) pair is the position whose prediction needs the skill
_SKILL_PAIRS = {
    "agreement": data.subject_pairs,
    "brackets": data.bracket_pairs,
    "song": data.previous_token_pairs,
}


# ---------------------------------------------------------------- arguments


def _check_ids(ids) -> torch.Tensor:
    if not isinstance(ids, torch.Tensor) or ids.dtype != torch.long or ids.dim() != 2:
        got = tuple(ids.shape) if isinstance(ids, torch.Tensor) else type(ids).__name__
        raise ValueError(f"ids: expected a (N, T) tensor of int64 token ids, got {got}")
    if ids.shape[1] < 2:
        raise ValueError(f"ids: expected T >= 2 tokens (one to predict), got {ids.shape[1]}")
    return ids


def _check_heads(model, knocked_out) -> list[tuple[int, int]]:
    """knocked_out as a list of (layer, head) pairs, each in range for this model."""
    if (
        isinstance(knocked_out, tuple)
        and len(knocked_out) == 2
        and all(isinstance(x, int) for x in knocked_out)
    ):
        raise ValueError(
            f"knocked_out: expected an iterable of (layer, head) pairs, e.g. [{knocked_out}], "
            f"got the bare pair {knocked_out}"
        )
    layers, heads = len(model.blocks), model.config.num_heads
    pairs = []
    for pair in knocked_out:
        if not isinstance(pair, tuple | list) or len(pair) != 2:
            raise ValueError(f"knocked_out: expected (layer, head) pairs, got {pair!r}")
        layer, head = pair
        for name, value, count in (("layer", layer, layers), ("head", head, heads)):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < count:
                raise ValueError(
                    f"knocked_out: {name} expected an int in 0..{count - 1} for this model, "
                    f"got {value!r} in {tuple(pair)}"
                )
        pairs.append((layer, head))
    return pairs


# ---------------------------------------------------------------- knocking out


def _head_hooks(attn, heads: list[int], mode: str):
    """A pre-hook for attn.out that replaces the chosen heads' slices of its input (B, T, D),
    and a pre-hook for attn that keeps the input the heads were computed from ("mean")."""
    seen = {}

    def keep_input(_module, args):
        seen["x"] = args[0]

    def replace(_module, args):
        y = args[0].clone()  # (B, T, D): the heads' outputs side by side, before the projection
        T, d = y.shape[1], attn.d_head
        if mode == "mean":
            q, k, v = attn.qkv_heads(seen["x"])  # each (B, H, T, d)
            mask = causal_mask(T, device=y.device)
        for h in heads:
            if mode == "zero":
                y[..., h * d : (h + 1) * d] = 0.0
            else:
                _, w = scaled_dot_product_attention(
                    q[:, h], k[:, h], v[:, h], mask, scale=attn.scale
                )
                mean = w.mean(dim=0)  # (B, T, T) -> (T, T): the head's pattern averaged over B
                y[..., h * d : (h + 1) * d] = mean @ v[:, h]  # (T, T) @ (B, T, d) -> (B, T, d)
        return (y,)

    return keep_input, replace


@contextmanager
def knockout(model, knocked_out=(), mode: str = "zero"):
    """Inside the with-block, the given (layer, head) pairs are knocked out (lessons 03, 12).

    "zero": the head hands on zeros (its slice of the concatenated head outputs, before the
    output projection, is zeroed). "mean": the head keeps its values but its attention pattern
    is replaced by that pattern averaged over the batch, so it no longer depends on the text.
    The model's weights are never touched; the hooks are removed on leaving the block.
    """
    one_of("mode", mode, MODES)
    pairs = _check_heads(model, knocked_out)
    by_layer: dict[int, list[int]] = {}
    for layer, head in pairs:
        by_layer.setdefault(layer, []).append(head)
    handles = []
    try:
        for layer, heads in by_layer.items():
            attn = model.blocks[layer].attn
            keep_input, replace = _head_hooks(attn, sorted(set(heads)), mode)
            handles.append(attn.register_forward_pre_hook(keep_input))
            handles.append(attn.out.register_forward_pre_hook(replace))
        yield model
    finally:
        for handle in handles:
            handle.remove()


# ---------------------------------------------------------------- loss per skill


def skill_positions(ids: torch.Tensor, skills=SKILLS) -> dict[str, tuple[torch.Tensor, ...]]:
    """For each skill, (rows, positions): the predictions it is scored on (lesson 03).

    Position t predicts ids[:, t + 1]; "overall" is every t in 0..T-2, the others the
    queries of their data pairs (see the module docstring).
    """
    _check_ids(ids)
    out = {}
    for skill in skills:
        one_of("skills", skill, ALL_SKILLS)
        if skill == "overall":
            N, T = ids.shape
            rows = torch.arange(N).repeat_interleave(T - 1)
            out[skill] = (rows, torch.arange(T - 1).repeat(N))
            continue
        found = [(b, q) for b, seq in enumerate(ids) for q, _ in _SKILL_PAIRS[skill](seq)]
        if not found:
            raise ValueError(f"ids: no {skill!r} positions in these sequences to score")
        out[skill] = tuple(torch.tensor(found).T)  # each (P,)
    return out


def skill_losses(
    model, ids: torch.Tensor, *, knocked_out=(), mode: str = "zero", skills=SKILLS
) -> dict[str, float]:
    """Mean next-token cross-entropy per skill on ids (N, T), with heads knocked out
    (lesson 03). One forward pass over all of ids, in eval mode; "mean" averages each
    knocked-out head's pattern over all N sequences. The model is left as it was."""
    return _losses(model, ids, skill_positions(ids, skills), knocked_out, mode)


@torch.no_grad()
def _losses(model, ids, positions: dict, knocked_out, mode: str) -> dict[str, float]:
    with evaluating(model), knockout(model, knocked_out, mode):
        logits = model(ids[:, :-1])  # (N, T-1, V)
    loss = F.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")  # (N, T-1)
    return {skill: float(loss[rows, t].mean()) for skill, (rows, t) in positions.items()}


def ablation_table(
    model, ids: torch.Tensor, *, mode: str = "zero", skills=SKILLS
) -> tuple[list, torch.Tensor]:
    """Loss per skill with each single head knocked out (lesson 03).

    Returns (labels, table): labels[0] is None, the baseline with nothing knocked out, then
    one (layer, head) per head in order; table is (1 + layers * H, len(skills)), column j
    the loss of skills[j]. The loss increase of a head is table[i] - table[0].
    """
    one_of("mode", mode, MODES)
    labels = [None] + [
        (layer, head)
        for layer in range(len(model.blocks))
        for head in range(model.config.num_heads)
    ]
    positions = skill_positions(ids, skills)  # found once, used by every row
    rows = []
    for label in labels:
        losses = _losses(model, ids, positions, () if label is None else [label], mode)
        rows.append([losses[s] for s in skills])
    return labels, torch.tensor(rows)


# ---------------------------------------------------------------- the scale


def flip_scale(model: TinyTransformer) -> TinyTransformer:
    """A copy of a model with the same weights and the 1/sqrt(d) scale switched: off if the
    model uses it, on if it does not. Flipping twice gives the model back.

    Switching the scale off multiplies every score by sqrt(d); so does multiplying every
    query projection by sqrt(d), since RoPE's rotation is linear (the tests check both agree).
    """
    clone = copy.deepcopy(model)
    clone.config = dataclasses.replace(clone.config, scale=not clone.config.scale)
    for block in clone.blocks:
        block.attn.scale = clone.config.scale
    return clone


def without_scale(model: TinyTransformer) -> TinyTransformer:
    """A copy of a model trained with the 1/sqrt(d) scale, run without it."""
    if not model.config.scale:
        raise ValueError("model: expected one trained with the 1/sqrt(d) scale, got scale=False")
    return flip_scale(model)


# ---------------------------------------------------------------- lesson 12: the toy language


@torch.no_grad()
def knockout_excess(model, split: str = "valid", knocked_out=(), mode: str = "zero") -> dict:
    """Loss minus floor on a split of the toy language (course_lib.corpus), overall and per
    skill, with the given (layer, head) pairs knocked out (lesson 12). The model is left as it
    was."""
    from course_lib import corpus

    ids = corpus.load_split(split)
    with knockout(model, knocked_out, mode):
        losses = train.token_losses(model, ids, batch_size=len(ids))  # (N, T - 1)
    return corpus.excess_loss(losses, split)


def excess_table(model, split: str = "valid", skills=("all",), mode: str = "zero") -> tuple:
    """knockout_excess with nothing knocked out, then with each head alone (lesson 12).

    Returns (labels, table): labels[0] None, then every (layer, head); table (1 + layers * H,
    len(skills)), row i the excess of each skill. A head's cost is table[i] - table[0].
    """
    labels = [None] + [
        (layer, head)
        for layer in range(len(model.blocks))
        for head in range(model.config.num_heads)
    ]
    rows = []
    for label in labels:
        excess = knockout_excess(model, split, () if label is None else [label], mode)
        rows.append([excess[s] for s in skills])
    return labels, torch.tensor(rows, dtype=torch.float64)
