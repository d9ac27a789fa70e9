"""Ablation: knock heads of a trained TinyTransformer out and measure what each skill loses
(lesson 12).

A detector (course_lib.heads) says where a head looks; knocking the head out says what the
model needs it for. The loss is measured as excess over the floor of the toy language
(course_lib.corpus), overall and per skill, so a knock-out that raises a skill's excess has
made that prediction worse, whatever the reason.

Knocking out never changes the model: forward hooks, removed when the call ends, change what
one head hands on, and only while the call runs.
"""

from contextlib import contextmanager

import torch

from course_lib import corpus, train
from course_lib._validation import one_of
from course_lib.attention import causal_mask, scaled_dot_product_attention

MODES = ("zero", "mean")


# ---------------------------------------------------------------- arguments


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
    """Inside the with-block, the given (layer, head) pairs are knocked out (lesson 12).

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


# ---------------------------------------------------------------- excess per skill


@torch.no_grad()
def knockout_excess(model, split: str = "valid", knocked_out=(), mode: str = "zero") -> dict:
    """Loss minus floor on a split of the toy language (course_lib.corpus), overall and per
    skill, with the given (layer, head) pairs knocked out (lesson 12). The model is left as it
    was."""
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
