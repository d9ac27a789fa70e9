"""Head detectors: a score in [0, 1] per (layer, head) for each job a head can take on (lesson 12).

A detector is a list of (query, key) position pairs per line, from course_lib.corpus: at query
t the model predicts token t + 1, and the key is the one position that decides it (the
subject a verb agrees with, the preposition before a noun, the noun after a repeated
preposition's first use, a song word's earlier copy, a closer's opener).

A head's score is the attention weight it puts on the key, averaged over every pair in every
sequence: the mean attention mass on the target position. 1 means the head always looks
exactly there. Under the causal mask query t sees only the t + 1 keys 0..t, so a head that
spreads evenly over what it may see puts 1 / (t + 1) on each: its score, the detector's chance
level, is the mean of 1 / (t + 1) over the detector's queries (`chance_score`).
"""

import torch

from course_lib import corpus
from course_lib.runtime import evaluating

DETECTORS = corpus.DETECTORS  # name -> pair finder, for the toy language of data/language/


@torch.no_grad()
def attention_weights(model, ids: torch.Tensor, batch_size: int = 100) -> list[torch.Tensor]:
    """The model's attention, one (N, H, T, T) tensor per layer, for ids (N, T) (lesson 12)."""
    with evaluating(model):
        chunks = [
            model(ids[i : i + batch_size], return_weights=True)[1]
            for i in range(0, len(ids), batch_size)
        ]
    return [torch.cat(per_layer) for per_layer in zip(*chunks, strict=True)]  # each (N, H, T, T)


def _finder(detector: str, detectors):
    detectors = DETECTORS if detectors is None else detectors
    if detector not in detectors:
        raise ValueError(f"detector: expected one of {tuple(detectors)}, got {detector!r}")
    return detectors[detector]


def detector_score(
    weights: list[torch.Tensor], ids: torch.Tensor, detector: str, detectors=None
) -> torch.Tensor:
    """(num_layers, H): mean attention mass each head puts on the detector's key (lesson 12).

    detectors: name -> pair finder; DETECTORS (course_lib.corpus's) unless given.
    """
    find = _finder(detector, detectors)
    pairs = [(b, q, k) for b, seq in enumerate(ids) for q, k in find(seq)]
    if not pairs:
        raise ValueError(f"ids: no {detector!r} pairs in these sequences to score")
    b, q, k = torch.tensor(pairs).T  # each (P,)
    return torch.stack([w[b, :, q, k].mean(dim=0) for w in weights])  # (P, H) -> (layers, H)


def chance_score(ids: torch.Tensor, detector: str, detectors=None) -> float:
    """The score of a head that spreads evenly over the keys it may see: the mean of
    1 / (t + 1) over the detector's query positions t in ids (N, T) (lesson 12)."""
    find = _finder(detector, detectors)
    queries = [q for seq in ids for q, _ in find(seq)]
    if not queries:
        raise ValueError(f"ids: no {detector!r} pairs in these sequences to score")
    return float((1.0 / (torch.tensor(queries, dtype=torch.float64) + 1)).mean())


def chance_scores(ids: torch.Tensor, detectors=None) -> dict[str, float]:
    """Every detector's chance level on ids (N, T), see chance_score (lesson 12)."""
    detectors = DETECTORS if detectors is None else detectors
    return {name: chance_score(ids, name, detectors) for name in detectors}


def detector_scores(model, ids: torch.Tensor, detectors=None) -> dict[str, torch.Tensor]:
    """Every detector's (num_layers, H) scores for a model on ids (N, T) (lesson 12)."""
    detectors = DETECTORS if detectors is None else detectors
    weights = attention_weights(model, ids)
    return {name: detector_score(weights, ids, name, detectors) for name in detectors}


def repeated_tokens(vocab_size: int, num: int = 50, half: int = 15, seed: int = 0) -> torch.Tensor:
    """(num, 2 * half) ids: `half` random tokens, then the same tokens again (lesson 12).

    Text no sentence of the toy language looks like, so only a head that copies by looking
    back for the current token's earlier place, not by the language's rules, scores on it.
    """
    generator = torch.Generator().manual_seed(seed)
    first = torch.randint(vocab_size, (num, half), generator=generator)
    return torch.cat([first, first], dim=1)


@torch.no_grad()
def repeat_induction_score(model, ids: torch.Tensor | None = None) -> torch.Tensor:
    """(num_layers, H): mean attention from each token's second occurrence to the token after
    its first, on repeated_tokens (or ids made the same way) (lesson 12). Chance level:
    `repeat_induction_chance`."""
    ids = repeated_tokens(model.config.vocab_size) if ids is None else ids
    half = ids.shape[1] // 2
    weights = attention_weights(model, ids)
    q = torch.arange(half, 2 * half - 1)  # second occurrences whose next token is in the line
    return torch.stack([w[:, :, q, q - half + 1].mean(dim=(0, 2)) for w in weights])


def repeat_induction_chance(half: int = 15) -> float:
    """The induction score of a head spreading evenly over what it may see: mean 1 / (t + 1)
    over the scored queries t (lesson 12)."""
    return float((1.0 / (torch.arange(half, 2 * half - 1, dtype=torch.float64) + 1)).mean())
