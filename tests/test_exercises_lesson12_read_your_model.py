"""Lesson 12's exercise: learner-style detectors get their hint.

Every wrong detector here is written out whole the way a learner would write it (loops over
lines and pairs, a list of weights, torch.mean over a stack), not taken from the bug list in
course_lib/exercises/lesson12_read_your_model.py; each names the bug its hint must be. The
reference (a loop in float64) is checked against the course's own vectorised
heads.detector_score on a trained model.
"""

from pathlib import Path

import pytest
import torch

from course_lib import corpus, heads, variants
from course_lib.checks import check_head_detector
from course_lib.exercises.core import run
from course_lib.exercises.lesson12_read_your_model import HEAD_DETECTOR, head_detector_reference
from helpers import failed_with_hint as _check
from helpers import verdict

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "12_read_your_model.ipynb"


# ---------------------------------------------------------------- right answers, as written


def by_loops(weights, pairs):
    L, H = len(weights), weights[0].shape[1]
    out = torch.zeros(L, H, dtype=weights[0].dtype)
    count = 0
    for n, line in enumerate(pairs):
        for q, k in line:
            for layer in range(L):
                out[layer] += weights[layer][n, :, q, k]
            count += 1
    return out / count


def by_masks(weights, pairs):
    """A (N, T, T) mask of the pairs' cells, then a weighted mean over it."""
    N, _, T, _ = weights[0].shape
    mask = torch.zeros(N, T, T, dtype=weights[0].dtype)
    for n, line in enumerate(pairs):
        for q, k in line:
            mask[n, q, k] += 1  # a pair listed twice counts twice
    rows = [(w * mask[:, None]).sum(dim=(0, 2, 3)) / mask.sum() for w in weights]
    return torch.stack(rows)


@pytest.mark.parametrize("fn", [by_loops, by_masks])
def test_right_detectors_written_other_ways_pass(fn):
    assert run(HEAD_DETECTOR, fn).passed


@pytest.mark.slow
def test_the_reference_is_the_courses_detector_on_a_trained_model():
    model = variants.load_trained("base", 0)
    ids = corpus.load_split("valid")[:50]
    weights = heads.attention_weights(model, ids)
    for job, find in corpus.DETECTORS.items():
        want = heads.detector_score(weights, ids, job, corpus.DETECTORS)
        got = head_detector_reference(weights, [find(line) for line in ids])
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- learner-style mistakes


def test_query_and_key_swapped_are_named():
    def swapped(weights, pairs):
        scores = []
        for w in weights:
            picked = [w[n, :, k, q] for n, line in enumerate(pairs) for q, k in line]
            scores.append(torch.stack(picked).mean(dim=0))
        return torch.stack(scores)

    _check(HEAD_DETECTOR, swapped, "query_key_swapped", ["0, or nearly"])


def test_a_sum_is_named():
    def summed(weights, pairs):
        return torch.stack([sum(w[n, :, q, k] for n, line in enumerate(pairs) for q, k in line)
                            for w in weights])  # fmt: skip

    _check(HEAD_DETECTOR, summed, "summed", ["above 1"])


def test_a_mean_per_line_is_named():
    def per_line(weights, pairs):
        out = []
        for w in weights:
            lines = [torch.stack([w[n, :, q, k] for q, k in line]).mean(0)
                     for n, line in enumerate(pairs) if line]  # fmt: skip
            out.append(torch.stack(lines).mean(0))
        return torch.stack(out)

    _check(HEAD_DETECTOR, per_line, "mean_per_line", ["different numbers"])


def test_nan_from_lines_without_pairs_is_named():
    def per_line(weights, pairs):
        out = []
        for w in weights:
            means = []
            for n, line in enumerate(pairs):
                cells = [w[n, :, q, k] for q, k in line]
                stacked = torch.stack(cells) if cells else w.new_empty(0, w.shape[1])
                means.append(stacked.mean(0))
            out.append(torch.stack(means).mean(0))
        return torch.stack(out)

    _check(HEAD_DETECTOR, per_line, "nan_from_empty_lines", ["NaN"])


def test_every_line_at_once_is_named():
    def every_line(weights, pairs):
        q = torch.tensor([q for line in pairs for q, _ in line])
        k = torch.tensor([k for line in pairs for _, k in line])
        return torch.stack([w[:, :, q, k].mean(dim=(0, 2)) for w in weights])

    _check(HEAD_DETECTOR, every_line, "every_line", ["lines the pairs do not belong to"])


def test_the_last_layer_only_is_named():
    def last_layer(weights, pairs):
        w = weights[-1]
        picked = [w[n, :, q, k] for n, line in enumerate(pairs) for q, k in line]
        return torch.stack(picked).mean(dim=0)

    _check(HEAD_DETECTOR, last_layer, "last_layer_only", ["one row per layer"])


def test_heads_by_layers_is_named():
    def transposed(weights, pairs):
        columns = []
        for w in weights:
            picked = [w[n, :, q, k] for n, line in enumerate(pairs) for q, k in line]
            columns.append(torch.stack(picked).mean(dim=0))
        return torch.stack(columns, dim=1)

    _check(HEAD_DETECTOR, transposed, "heads_by_layers", ["(H, L)"])


def test_the_position_after_the_key_is_named():
    def after_key(weights, pairs):  # "the key's next token is what gets copied"
        T = weights[0].shape[-1]
        picked = [[w[n, :, q, min(k + 1, T - 1)] for n, line in enumerate(pairs) for q, k in line]
                  for w in weights]  # fmt: skip
        return torch.stack([torch.stack(p).mean(0) for p in picked])

    _check(HEAD_DETECTOR, after_key, "key_plus_one", ["after each pair's key"])


def test_a_float32_result_from_float64_weights_is_named():
    def always_float32(weights, pairs):
        return by_loops(weights, pairs).float()

    result = _check(HEAD_DETECTOR, always_float32, None, ["float64"])
    assert "dtype" in result.message


def test_the_check_prints_the_symptom_and_hints_point_at_the_lesson(capsys):
    def summed(weights, pairs):
        return torch.stack([sum(w[n, :, q, k] for n, line in enumerate(pairs) for q, k in line)
                            for w in weights])  # fmt: skip

    out = verdict(check_head_detector, summed, capsys)
    assert out.startswith("TRY AGAIN  head_detector: your scores can be above 1"), out
    import nbformat

    text = "\n".join(c.source for c in nbformat.read(NOTEBOOK, as_version=4).cells)
    assert HEAD_DETECTOR.idea.split("'")[1] in text


# ---------------------------------------------------------------- the course's detector


def test_a_detector_wrapping_the_courses_is_refused_with_its_hint():
    """The lesson imports course_lib.heads: its detector_score does the exercise's job whole,
    and a learner can hand it the pairs through a finder of their own."""

    def through_the_course(weights, pairs):
        finder = {"mine": lambda n: pairs[int(n)]}
        return heads.detector_score(weights, torch.arange(len(pairs)), "mine", finder)

    result = run(HEAD_DETECTOR, through_the_course)
    assert not result.passed and result.bug == "forbidden", result.message
    assert "calls course_lib.heads.detector_score" in result.message
    assert result.steps[0] == HEAD_DETECTOR.forbidden_hint


def test_a_detector_importing_the_courses_by_name_is_refused_too():
    from course_lib.heads import detector_score

    def imported(weights, pairs):
        finder = {"x": lambda n: pairs[int(n)]}
        return detector_score(weights, torch.arange(len(pairs)), "x", finder)

    result = run(HEAD_DETECTOR, imported)
    assert result.bug == "forbidden" and result.steps[0] == HEAD_DETECTOR.forbidden_hint
