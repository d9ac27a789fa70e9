"""Several heads against one on the mark, and where each head looks there (lesson 04b).

The mark that ends a sentence spells the kinds of the sentence's last three nouns
(course_lib.language), so the position just before it has to read three places at once.
`head_runs`, `runs_table` and `rows_text` read the variant table's models trained with 1, 2,
4 and 8 heads (data/variants.json, course_lib.variants) as lesson 04b prints them.
`mark_queries` finds the positions before the marks and the three nouns in a line;
`noun_weights` averages, over every such position, the attention weight each head puts on each
of the three nouns; `shipped_noun_weights` does it for the shipped one-layer models.
"""

import json

import torch

from course_lib import language

HEAD_COUNTS = (1, 2, 4, 8)  # the one-layer variants of the table, shipped from seed 0
_MARKS = frozenset(language.MARKS)
_NOUNS = frozenset(language.NOUNS) | frozenset(language.SUBJECTS)


# the variant table's models by depth and number of heads, everything else the same
HEAD_VARIANTS = {
    1: {1: "1-layer-heads-1", 2: "1-layer-heads-2", 4: "1-layer-heads-4", 8: "1-layer-heads-8"},
    2: {1: "heads-1", 2: "heads-2", 4: "base", 8: "heads-8"},
}
# the table's rows on the number of heads, in the order lesson 04b reads them
HEAD_ROWS = (
    "several heads at one layer",
    "two heads against one, at one layer",
    "several heads at two layers",
)
_NAMES = {name: (layers, H) for layers, by_heads in HEAD_VARIANTS.items()
          for H, name in by_heads.items()}  # fmt: skip


def _table() -> dict:
    from course_lib import variants  # here: reading the table needs no model code

    return json.loads(variants.RESULTS.read_text(encoding="utf-8"))


def head_runs(skills=("mark", "all")) -> dict:
    """{(layers, H): {skill: [excess of seed 0, 1, 2]}}: each run's excess loss over the floor
    on the validation split, in nats per prediction, for every model of HEAD_VARIANTS; skill
    "all" is every prediction (lesson 04b)."""
    runs = _table()["runs"]
    return {
        key: {s: [r["valid"][s] for r in runs if r["variant"] == name] for s in skills}
        for name, key in _NAMES.items()
    }


def parameters() -> dict[int, int]:
    """{layers: the parameter count that every model of that depth has, whatever H} (lesson 04b).
    Raises if the models of one depth differ."""
    counts = _table()["parameters"]
    found = {}
    for layers, by_heads in HEAD_VARIANTS.items():
        (found[layers],) = {counts[name] for name in by_heads.values()}
    return found


def runs_table(runs: dict) -> str:
    """head_runs' numbers as a table: one line per model, each seed's excess on the mark and
    overall (lesson 04b)."""
    lines = ["layers  heads  on the mark, seeds 0 / 1 / 2   overall, seeds 0 / 1 / 2"]
    for (layers, H), excess in sorted(runs.items()):
        mark, overall = (" / ".join(f"{e:.3f}" for e in excess[s]) for s in ("mark", "all"))
        lines.append(f"{layers:6d}  {H:5d}  {mark}        {overall}")
    counts = parameters()
    lines.append(f"parameters: {counts[1]:,} in every one-layer model, {counts[2]:,} in every "
                 "two-layer one")  # fmt: skip
    return "\n".join(lines)


def rows_text(names=HEAD_ROWS) -> str:
    """The table's rows `names` in words: each claim's gap between the two variants' means,
    its bar (three times the larger seed range) and whether the gap clears it (lesson 04b)."""
    rows = {row["name"]: row for row in _table()["rows"]}
    lines = []
    for name in names:
        row = rows[name]
        lines.append(f"{name}: {'holds' if row['holds'] else 'does not hold'}")
        for c in row["claims"]:
            better, worse = _NAMES[c["better"]][1], _NAMES[c["worse"]][1]
            skill = "on the mark" if c["skill"] == "mark" else "overall"
            verdict = "clears it" if c["holds"] else "falls short"
            lines.append(f"  {better} heads over {worse}, {skill + ':':12s} gap {c['gap']:.3f}, "
                         f"bar {c['bar']:.3f}: {verdict}")  # fmt: skip
    return "\n".join(lines)


def variant(num_heads: int) -> str:
    """The variant table's name of the one-layer model with num_heads heads (lesson 04b)."""
    if num_heads not in HEAD_COUNTS:
        raise ValueError(f"num_heads: expected one of {HEAD_COUNTS}, got {num_heads!r}")
    return f"1-layer-heads-{num_heads}"


def mark_queries(tokens) -> list[tuple[int, tuple[int, int, int]]]:
    """(query, nouns) for every mark in a line of tokens (from a line's start): the position
    whose next token is the mark, and the positions of its sentence's last three nouns (the
    subject counts), oldest first (lesson 04b)."""
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
    last three nouns (oldest first), averaged over every mark in ids (lesson 04b).

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


def count_marks(ids: torch.Tensor) -> int:
    """How many positions before a mark the lines ids (N, T) hold (lesson 04b)."""
    return sum(len(mark_queries(language.VOCAB[i] for i in line)) for line in ids.tolist())


def shipped_noun_weights(ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """{"H heads, d = D/H": (H, 3)}: model_noun_weights of the shipped one-layer model with
    H heads (seed 0 of the variant table) on ids (N, T), for every H of HEAD_COUNTS
    (lesson 04b)."""
    from course_lib import variants  # here: the models load only when asked for

    found = {}
    for H in HEAD_COUNTS:
        model = variants.load_trained(variant(H), 0)
        d = model.config.d_model // H
        found[f"{H} head{'s' if H > 1 else ''}, d = {d}"] = model_noun_weights(model, ids)
    return found


def model_noun_weights(model, ids: torch.Tensor) -> torch.Tensor:
    """noun_weights of a one-layer model's attention on ids (N, T) (lesson 04b)."""
    with torch.no_grad():
        _, weights = model(ids, return_weights=True)  # one (N, H, T, T) per layer
    if len(weights) != 1:
        raise ValueError(f"model: expected one attention layer, got {len(weights)}")
    return noun_weights(weights[0], ids)
