"""Lesson 12's exercise: a head detector, the score of every head of every layer on a job.

CONTRACT (fixed: the lesson and its check rely on it):
- head_detector(weights, pairs) -> (L, H) tensor in the weights' dtype. weights: a list of L
  attention tensors, one per layer, each (N, H, T, T), row q the query, column k the key;
  pairs: a list of N lists, pairs[n] the (query, key) positions of line n (a line may have
  none, at least one line has one). Entry [l, h] is the mean of weights[l][n, h, q, k] over
  every pair of every line: each pair counts once, so a line with three pairs weighs three
  times a line with one.

The reference below is written another way than course_lib.heads.detector_score (which
gathers every pair with one indexing): a loop over the pairs, summed in float64. Every bug is
a way a learner gets the indexing or the mean wrong, written the way it comes out; the tests
(tests/test_exercises_lesson12_read_your_model.py) write each again as a learner would.
"""

import torch

from course_lib import heads
from course_lib.exercises.core import Bug, Case, Exercise


def head_detector_reference(weights, pairs):
    """The mean attention from each pair's query to its key, per layer and head: (L, H)."""
    total = torch.zeros(len(weights), weights[0].shape[1], dtype=torch.float64)  # (L, H)
    count = 0
    for n, line in enumerate(pairs):
        for q, k in line:
            total += torch.stack([w[n, :, q, k].double() for w in weights])  # (L, H)
            count += 1
    return (total / count).to(weights[0].dtype)  # (L, H)


def _attention(L, N, H, T, seed, dtype=torch.float32):
    """L layers of causal attention weights (N, H, T, T) drawn from seed: rows sum to 1."""
    g = torch.Generator().manual_seed(seed)
    causal = torch.ones(T, T, dtype=torch.bool).tril()  # (T, T)
    out = []
    for _ in range(L):
        scores = 2 * torch.randn(N, H, T, T, generator=g, dtype=dtype)
        out.append(scores.masked_fill(~causal, float("-inf")).softmax(dim=-1))  # (N, H, T, T)
    return out


def _copy_like_pairs():
    # the language's copy pairs have the key a few tokens before the query, lines differ in
    # how many they have, and some have none
    return [[(7, 3), (11, 3)], [], [(9, 2)], [(5, 1), (10, 6), (11, 1)], [], [(4, 0)]]


def _cases() -> list[Case]:
    from course_lib import corpus

    lines = corpus.load_split("valid")[:8]  # (8, 32): real lines of the language
    real = [corpus.induction_pairs(line) for line in lines]
    return [
        Case((_attention(2, 6, 4, 12, seed=1), _copy_like_pairs()),
             label="2 layers of 4 heads, 6 lines of 12 tokens, 0 to 3 pairs a line"),
        Case((_attention(2, 8, 4, 32, seed=2), real),
             label="the copy pairs of 8 validation lines, random attention"),
        Case((_attention(3, 3, 2, 6, seed=3), [[(5, 1)], [(2, 0), (4, 3)], [(3, 3)]]),
             label="3 layers of 2 heads; one pair whose key is its own query"),
        Case((_attention(1, 2, 1, 5, seed=4), [[(4, 2)], []]),
             label="1 layer, 1 head, one pair in all"),
        Case((_attention(2, 4, 3, 9, seed=5, dtype=torch.float64),
              [[(8, 1)], [(6, 5), (7, 5)], [], [(2, 1)]]),
             label="float64 weights"),
    ]  # fmt: skip


def _indices(pairs):
    """(lines, queries, keys): three index tensors, one entry per pair."""
    found = [(n, q, k) for n, line in enumerate(pairs) for q, k in line]
    return torch.tensor(found, dtype=torch.long).T  # (3, P)


def _swapped(weights, pairs):
    n, q, k = _indices(pairs)
    return torch.stack([w[n, :, k, q].mean(dim=0) for w in weights])  # (L, H)


def _summed(weights, pairs):
    n, q, k = _indices(pairs)
    return torch.stack([w[n, :, q, k].sum(dim=0) for w in weights])  # (L, H)


def _per_line(skip_empty: bool):
    def score(weights, pairs):
        rows = []
        for w in weights:
            means = [
                torch.stack([w[n, :, q, k] for q, k in line]).mean(dim=0)
                if line
                else torch.full(w.shape[1:2], float("nan"), dtype=w.dtype)
                for n, line in enumerate(pairs)
                if line or not skip_empty
            ]
            rows.append(torch.stack(means).mean(dim=0))  # (H,)
        return torch.stack(rows)  # (L, H)

    return score


def _every_line(weights, pairs):
    _, q, k = _indices(pairs)
    return torch.stack([w[:, :, q, k].mean(dim=(0, 2)) for w in weights])  # (L, H)


def _last_layer(weights, pairs):
    n, q, k = _indices(pairs)
    return weights[-1][n, :, q, k].mean(dim=0)  # (H,)


def _transposed(weights, pairs):
    n, q, k = _indices(pairs)
    return torch.stack([w[n, :, q, k].mean(dim=0) for w in weights], dim=1)  # (H, L)


def _next_key(weights, pairs):
    n, q, k = _indices(pairs)
    k = (k + 1).clamp(max=weights[0].shape[-1] - 1)
    return torch.stack([w[n, :, q, k].mean(dim=0) for w in weights])  # (L, H)


HEAD_DETECTOR = Exercise(
    name="head_detector",
    lesson="12_read_your_model",
    reference=head_detector_reference,
    cases=_cases,
    idea="the section 'A detector of your own' and the exercise's contract",
    bugs=(
        Bug(
            "query_key_swapped",
            _swapped,
            "your scores are 0, or nearly, for every head, though the heads attend somewhere",
            "you read weights[..., key, query]: row k, column q. A row is a query, so the "
            "weight from query q to key k sits at [n, h, q, k]. Under the causal mask an "
            "earlier row never reaches a later column, so the swapped cell is 0 whenever "
            "the key comes before the query.",
        ),
        Bug(
            "summed",
            _summed,
            "your scores can be above 1: a head cannot put more than all its weight on a key",
            "you add up the weights of every pair; the score is their mean: divide the sum by "
            "the number of pairs, over all lines together.",
        ),
        Bug(
            "mean_per_line",
            _per_line(skip_empty=True),
            "your scores are right where every line has the same number of pairs, and off "
            "where lines have different numbers",
            "you average each line's pairs, then average the lines: a line with one pair then "
            "weighs as much as a line with three. The contract counts every pair once: one "
            "mean over all pairs of all lines.",
        ),
        Bug(
            "nan_from_empty_lines",
            _per_line(skip_empty=False),
            "your scores are NaN in a case where some lines have no pairs",
            "a line with no pairs gives the mean of nothing, NaN, and the NaN spreads into "
            "every score. Count each pair once, over all lines together, and a line without "
            "pairs simply adds nothing.",
        ),
        Bug(
            "every_line",
            _every_line,
            "your scores are averaged over lines the pairs do not belong to",
            "you read each pair's (query, key) cell in every line, weights[:, h, q, k]; a pair "
            "belongs to its own line n only: index the line too, weights[n, h, q, k].",
        ),
        Bug(
            "last_layer_only",
            _last_layer,
            "your result has one row of head scores, the last layer's; the contract asks for "
            "one row per layer",
            "weights is a list of L tensors, one per layer: score each of them and stack the "
            "L rows of H scores into (L, H).",
        ),
        Bug(
            "heads_by_layers",
            _transposed,
            "your result is (H, L): one row per head; the contract asks for (L, H)",
            "stack the layers' rows along a new first dimension: row l is layer l, column h "
            "head h.",
        ),
        Bug(
            "key_plus_one",
            _next_key,
            "your scores read the position after each pair's key",
            "the key of a pair is the position the query should look at: read weights[n, h, "
            "q, k] itself, not k + 1 (the token after it is what the model then predicts).",
        ),
    ),
    hints=(
        "Try it on one line by hand: print weights[0][n, :, q, k] for that line's first pair; "
        "it is (H,), one weight per head, each between 0 and 1.",
        "Collect every pair as three lists, line, query and key, one entry per pair; "
        "w[lines, :, queries, keys] then gives (P, H) for one layer's w.",
    ),
    # the course's detectors: the lesson imports course_lib.heads for its other tools
    forbidden=((heads, "detector_score"), (heads, "detector_scores")),
    forbidden_hint="heads.detector_score is the course's detector, the function this exercise "
    "asks you to write; the check compares yours with the course's, so a detector built on it "
    "checks nothing of yours. Index the weights with the pairs yourself.",
)

EXERCISES = (HEAD_DETECTOR,)

__all__ = ["HEAD_DETECTOR", "head_detector_reference", "EXERCISES"]
