"""Where each head looks when a model predicts the mark (lesson 04).

The mark that ends a sentence spells the kinds of the sentence's last three nouns
(course_lib.language), so the position just before it has to read three places at once.
`mark_queries` finds those positions and the three nouns in a line; `noun_weights` averages,
over every such position, the attention weight each head puts on each of the three nouns.
Lesson 04 reads the shipped one-layer models trained with 1, 2, 4 and 8 heads with it.
"""

import torch

from course_lib import language

HEAD_COUNTS = (1, 2, 4, 8)  # the one-layer variants of the table, shipped from seed 0
_MARKS = frozenset(language.MARKS)
_NOUNS = frozenset(language.NOUNS) | frozenset(language.SUBJECTS)


def variant(num_heads: int) -> str:
    """The variant table's name of the one-layer model with num_heads heads (lesson 04)."""
    if num_heads not in HEAD_COUNTS:
        raise ValueError(f"num_heads: expected one of {HEAD_COUNTS}, got {num_heads!r}")
    return f"1-layer-heads-{num_heads}"


def mark_queries(tokens) -> list[tuple[int, tuple[int, int, int]]]:
    """(query, nouns) for every mark in a line of tokens (from a line's start): the position
    whose next token is the mark, and the positions of its sentence's last three nouns (the
    subject counts), oldest first (lesson 04)."""
    tokens = list(tokens)
    found, start = [], 0
    for t, token in enumerate(tokens[:-1]):
        if tokens[t + 1] in _MARKS:
            nouns = [i for i in range(start, t + 1) if tokens[i] in _NOUNS][-3:]
            found.append((t, tuple(nouns)))
        if token in _MARKS:
            start = t + 1
    return found


def noun_weights(weights: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """(H, 3): each head's attention weight from the position before a mark on the sentence's
    last three nouns (oldest first), averaged over every mark in ids (lesson 04).

    weights: one layer's attention (N, H, T, T) on ids (N, T).
    """
    if weights.dim() != 4 or weights.shape[0] != ids.shape[0] or weights.shape[-1] != ids.shape[1]:
        raise ValueError(
            f"weights: expected one layer's (N, H, T, T) for ids {tuple(ids.shape)}, "
            f"got {tuple(weights.shape)}"
        )
    rows, queries, keys = [], [], []
    for n, line in enumerate(ids.tolist()):
        for query, nouns in mark_queries([language.VOCAB[i] for i in line]):
            rows.append(n)
            queries.append(query)
            keys.append(nouns)
    if not rows:
        raise ValueError("ids: expected at least one mark, found none")
    n, q = torch.tensor(rows)[:, None], torch.tensor(queries)[:, None]  # (P, 1) each
    picked = weights[n, :, q, torch.tensor(keys)]  # (P, 3, H)
    return picked.mean(dim=0).T  # (H, 3)


def model_noun_weights(model, ids: torch.Tensor) -> torch.Tensor:
    """noun_weights of a one-layer model's attention on ids (N, T) (lesson 04)."""
    with torch.no_grad():
        _, weights = model(ids, return_weights=True)  # one (N, H, T, T) per layer
    if len(weights) != 1:
        raise ValueError(f"model: expected one attention layer, got {len(weights)}")
    return noun_weights(weights[0], ids)
