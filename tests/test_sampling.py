"""course_lib.sampling: sampled lines read by the language's generator, the stored table, and
the counts of what attention costs (lesson 10)."""

import math

import pytest
import torch

from course_lib import corpus, language, sampling
from course_lib.attention import causal_mask
from course_lib.attention import scaled_dot_product_attention as attention


def test_every_line_of_the_language_keeps_every_rule_with_its_floor_probabilities():
    ids, floor, _ = corpus.floored_split("valid")
    for n in range(20):
        check = sampling.rule_check(corpus.to_tokens(ids[n]))
        assert check.broken is None
        assert torch.allclose(-torch.tensor(check.probs).log(), floor[n].float(), atol=1e-5)


def test_a_broken_rule_is_found_where_it_is():
    tokens = corpus.to_tokens(corpus.load_split("valid")[3])  # Dogs with cats eat cat ( ...
    assert tokens[4] == "cat"
    wrong = [*tokens[:4], "dog", *tokens[5:]]  # the object is decided: cat, nothing else
    check = sampling.rule_check(wrong)
    assert check.broken == 4 and len(check.probs) == 3
    assert sampling.rule_check(["with", "cats"]).broken == 0  # no line starts with a preposition


def test_language_next_is_next_token_distributions_last_row():
    tokens = corpus.to_tokens(corpus.load_split("valid")[0])[:9]
    dists, _ = language.next_token_distributions(tokens)
    assert sampling.language_next(tokens[:8]) == pytest.approx(dists[-1])
    with pytest.raises(ValueError, match="breaks a rule"):
        sampling.language_next(["Dogs", "dogs"])
    with pytest.raises(ValueError, match="tokens: expected a line of at least one token"):
        sampling.rule_check([])


def test_read_samples_counts_kept_lines_and_different_starts():
    ids = corpus.load_split("valid")[:4, :10].clone()
    ids[1] = ids[0]
    ids[3, 6] = corpus.TOKEN_ID["("]  # breaks line 3 (no aside opens there) ...
    read = sampling.read_samples(ids, prompt_len=2, group=2)
    expected_kept = sum(sampling.rule_check(corpus.to_tokens(r)).broken is None for r in ids)
    assert read["kept"] == expected_kept / 4 and read["kept"] < 1
    assert read["distinct"] == (1 + 2) / 2  # rows 0 and 1 start alike, rows 2 and 3 do not


def test_leak_is_what_the_sampler_puts_off_the_language():
    from course_lib.variants import load_trained

    lines = corpus.load_split("valid")[:10]
    read = sampling.leak(load_trained("base", 0), lines, 1.0)
    assert 0 < read["leak"] < 0.02 and 0.7 < read["keep"] < 1
    hotter = sampling.leak(load_trained("base", 0), lines, 2.0)
    assert hotter["leak"] > 5 * read["leak"]
    with pytest.raises(ValueError, match="temperature: expected a positive number, got 0"):
        sampling.leak(load_trained("base", 0), lines, 0)


def test_counted_multiply_adds_match_the_formula_and_see_nothing_in_the_fused_kernel():
    q, k, v = (torch.randn(2, 3, 16, 8) for _ in range(3))
    counted = sampling.counted_multiply_adds(lambda *a: attention(*a)[0], q, k, v, causal_mask(16))
    assert counted == sampling.attention_multiply_adds(2, 3, 16, 8) == 2 * 2 * 3 * 16 * 16 * 8
    assert sampling.counted_multiply_adds(sampling.fused_causal, q, k, v) == 0
    assert sampling.score_bytes(2, 3, 16) == 2 * 3 * 16 * 16 * 4


@pytest.mark.slow  # the profiler's first start takes about 1.5 s
def test_memory_table_sees_two_matrices_in_attention_and_none_in_the_fused_kernel():
    rows = sampling.memory_table(lambda *a: attention(*a), (256, 512), B=1, H=2, d=16)
    for row in rows:
        matrix = sampling.score_bytes(1, 2, row["T"])
        assert row["mine"].largest_bytes == matrix
        assert 2 * matrix <= row["mine"].peak_bytes < 2.3 * matrix
        assert row["fused"].peak_bytes < matrix / 4
    with pytest.raises(ValueError, match="H: expected a positive int, got 0"):
        sampling.memory_table(attention, (8,), H=0)


def test_fitted_exponent_recovers_a_power_law():
    assert math.isclose(sampling.fitted_exponent([1, 2, 4], [3, 12, 48]), 2.0)


def test_wall_times_returns_one_time_per_length_for_each_function():
    times = sampling.wall_times({"a": lambda q, k, v, m: q @ k.transpose(-2, -1)}, (8, 16),
                                repeats=1)  # fmt: skip
    assert list(times) == ["a"] and len(times["a"]) == 2 and all(t > 0 for t in times["a"])


@pytest.mark.slow
def test_favourite_breaks_counts_broken_lines_and_the_models_own_choices():
    from course_lib.variants import load_trained

    model = load_trained("base", 0)
    greedy = sampling.favourite_breaks(model, 0)
    assert greedy == {"broken": 0, "favourite": 0}  # the 8 greedy lines keep every rule
    cold = sampling.favourite_breaks(model, 0.2)
    assert 0 < cold["favourite"] <= cold["broken"]


def test_broken_skill_names_the_skill_the_broken_token_needed():
    """Lesson 12: 'Dogs with cats eat' asks for its object; a repeated preposition for its copy."""
    object_ = "Dogs with cats eat bird".split()
    assert sampling.rule_check(object_).broken == 4
    assert sampling.broken_skill(object_, 4) == "object"
    copy = "Birds near fishes with bird near bird".split()
    assert sampling.rule_check(copy).broken == 6
    assert sampling.broken_skill(copy, 6) == "induction"
    with pytest.raises(ValueError, match="at: expected a position in 1..6"):
        sampling.broken_skill(copy, 7)
    with pytest.raises(ValueError, match="a rule is broken before position 6"):
        sampling.broken_skill("Birds near fishes with bird eat bird".split(), 6)


def test_leak_by_skill_splits_leak_over_each_skills_predictions():
    from course_lib import variants

    model = variants.load_trained("base", 0)
    ids = corpus.load_split("valid")[:20]
    by_skill = sampling.leak_by_skill(model, ids)
    assert by_skill["all"] == pytest.approx(sampling.leak(model, ids, 1.0, start=0)["leak"])
    assert set(by_skill) <= {"all", *language.SKILLS} and "object" in by_skill
    with pytest.raises(ValueError, match="temperature"):
        sampling.leak_by_skill(model, ids, 0)
