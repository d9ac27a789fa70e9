"""course_lib.mark_heads: the position before each mark, its three nouns, and the weights
each head puts on them."""

import pytest
import torch

from course_lib import corpus, mark_heads


def test_mark_queries_finds_the_row_before_each_mark_and_its_last_three_nouns():
    tokens = "Bird near dog sings mi ka mi ka ( cat ) .bdc Dogs with cats eat cat ( dogs ) .ccd"
    found = mark_heads.mark_queries(tokens.split())
    # the second sentence's nouns: Dogs, cats, cat, dogs; its last three: cats, cat, dogs
    assert found == [(10, (0, 2, 9)), (19, (14, 16, 18))]


def test_a_line_cut_before_its_mark_has_no_query_there():
    assert mark_heads.mark_queries("Bird near dog sings mi ka".split()) == []


def test_noun_weights_averages_the_weight_on_each_noun():
    ids = corpus.encode("Bird near dog sings mi ka mi ka ( cat ) .bdc".split())[None]  # (1, 12)
    weights = torch.zeros(1, 2, 12, 12)
    weights[0, 0, 10, [0, 2, 9]] = torch.tensor([0.1, 0.2, 0.7])
    weights[0, 1, 10, 9] = 1.0
    found = mark_heads.noun_weights(weights, ids)
    torch.testing.assert_close(found, torch.tensor([[0.1, 0.2, 0.7], [0.0, 0.0, 1.0]]))


def test_noun_weights_names_wrong_inputs():
    ids = corpus.encode("Bird near dog sings".split())[None]
    with pytest.raises(ValueError, match="at least one mark"):
        mark_heads.noun_weights(torch.zeros(1, 1, 4, 4), ids)
    with pytest.raises(ValueError, match=r"one layer's \(N, H, T, T\)"):
        mark_heads.noun_weights(torch.zeros(1, 4, 4), ids)


def test_variant_names_the_table_rows():
    assert [mark_heads.variant(h) for h in (1, 8)] == ["1-layer-heads-1", "1-layer-heads-8"]
    with pytest.raises(ValueError, match="num_heads"):
        mark_heads.variant(3)


def test_count_marks_counts_the_positions_before_each_mark():
    line = "Bird near dog sings mi ka mi ka ( cat ) .bdc Dogs with cats eat cat ( dogs ) .ccd"
    ids = corpus.encode(line)[None]  # (1, T)
    assert mark_heads.count_marks(ids) == 2
    assert mark_heads.count_marks(ids[:, :-1]) == 1  # the line cut before its second mark


def test_the_head_tables_name_every_model_and_row():
    runs = mark_heads.head_runs()
    lines = mark_heads.runs_table(runs).splitlines()
    assert len(lines) == 1 + 8 + 1  # a heading, a line per model, the parameters
    assert all(len(seeds) == 3 for found in runs.values() for seeds in found.values())
    text = mark_heads.rows_text()
    for name in mark_heads.HEAD_ROWS:
        assert f"\n{name}: " in f"\n{text}"
    with pytest.raises(KeyError):
        mark_heads.rows_text(["no such row"])
