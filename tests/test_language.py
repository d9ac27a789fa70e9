"""The toy language's generator and its exact floor (course_lib/language.py)."""

import math
import random
from collections import Counter

import pytest
import torch

from course_lib import language as L


def _lines(num, length, seed):
    rng = random.Random(seed)
    return [L.sample_line(rng, length) for _ in range(num)]


@pytest.fixture(scope="module")
def sampled():
    return _lines(300, 48, seed=11)


# ---------------------------------------------------------------- the rules, checked by hand


def _number(token):
    return int(token.lower() not in ("dog", "cat", "bird", "fish"))


def _kind(token):
    return next(k for k, pair in zip(L.KINDS, L.NOUN_FORMS, strict=True) if token.lower() in pair)


def _check_rules(tokens):
    """Read a line's complete sentences with a hand-written parser; fail on any broken rule."""
    bound = {}
    ends = [i for i, t in enumerate(tokens) if t in L.MARKS]
    starts = [0] + [i + 1 for i in ends[:-1]]
    for a, b in zip(starts, ends, strict=True):
        s = tokens[a : b + 1]
        subject, nouns, i = s[0], [_kind(s[0])], 1
        assert subject in L.SUBJECTS
        while s[i] in L.PREPOSITIONS:
            noun = s[i + 1]
            assert bound.setdefault(s[i], noun) == noun, "a preposition changed its noun"
            nouns.append(_kind(noun))
            i += 2
        assert 1 <= (i - 1) // 2 <= L.MAX_DISTRACTORS, "one or two nouns between subject and verb"
        verb = s[i]
        singular = verb if verb in L.VERB_FORMS else {v: k for k, v in L.VERB_FORMS.items()}[verb]
        assert singular in L.CAN[_kind(subject)], "the subject's kind cannot do this"
        assert (verb == singular) == (not _number(subject)), "verb and subject disagree"
        i += 1
        if singular in L.TAKES_OBJECT:
            xor = _number(subject) ^ _number(s[i - 2])
            assert _number(s[i]) == xor, "the object's number is not the exclusive or"
            kinds = list(L.KINDS)
            kind = kinds[(kinds.index(_kind(subject)) + kinds.index(_kind(s[i - 2]))) % 4]
            assert _kind(s[i]) == kind, "the object's kind is not the table's"
            nouns.append(_kind(s[i]))
            i += 1
        elif singular == "sings":
            end = next(j for j in range(i, len(s)) if s[j] in L.OPENERS)
            song, rounds = s[i:end], L.SONG_ROUNDS[_number(subject)]
            tune = song[: len(song) // rounds]
            assert len(tune) in L.TUNE_LENGTHS and len(set(tune)) == len(tune), song
            assert song == tune * rounds, "a song is not its tune sung round after round"
            i = end
        open_ = []
        for token in s[i:-1]:
            if token in L.OPENERS:
                open_.append(token)
                assert len(open_) <= L.MAX_DEPTH
            elif token in L.OPENERS.values():
                assert L.OPENERS[open_.pop()] == token, "a closer does not match"
            else:
                nouns.append(_kind(token))
        assert not open_ and s[i] in L.OPENERS, "every sentence ends in a closed aside"
        assert s[-1] == "." + "".join(kind[0] for kind in nouns[-3:]), "the mark is wrong"


def test_generated_text_keeps_every_rule(sampled):
    for tokens, _ in sampled:
        _check_rules(tokens)


def test_the_rule_checker_catches_a_broken_mark(sampled):
    tokens = list(sampled[0][0])
    i = next(i for i, t in enumerate(tokens) if t in L.MARKS)
    tokens[i] = next(m for m in L.MARKS if m != tokens[i])
    with pytest.raises(AssertionError, match="mark"):
        _check_rules(tokens)


# ---------------------------------------------------------------- the exact distributions


def test_every_distribution_sums_to_one_and_every_written_token_is_possible(sampled):
    for tokens, _ in sampled:
        dists, skills = L.next_token_distributions(tokens)
        assert len(dists) == len(skills) == len(tokens) - 1
        for t, dist in enumerate(dists):
            assert math.isclose(sum(dist.values()), 1.0, abs_tol=1e-12)
            assert set(dist) <= set(L.VOCAB)
            assert dist[tokens[t + 1]] > 0


def _marginal(tokens):
    """P(tokens) summed over every path of the generator that writes them: a depth-first
    walk, independent of next_token_distributions' forward merging of states."""

    def walk(state, i):
        if i == len(tokens):
            return 1.0
        return sum(p * walk(state._replace(**changes), i + 1)
                   for p, token, changes in L.step(state) if token == tokens[i])  # fmt: skip

    return walk(L.State(), 0)


def test_product_of_conditionals_is_the_probability_of_the_text(sampled):
    for tokens, log_p in sampled[:120]:
        dists, _ = L.next_token_distributions(tokens)
        first = sum(p for p, token, _ in L.step(L.State()) if token == tokens[0])
        total = math.log(first) + sum(math.log(d[tokens[t + 1]]) for t, d in enumerate(dists))
        assert total == pytest.approx(math.log(_marginal(tokens)), abs=1e-9)
        assert log_p <= total + 1e-9  # the draws are one of the paths that write the text


@pytest.mark.slow
def test_sampled_frequencies_agree_with_the_exact_distribution():
    """Chi-squared, at several prefixes, of 20,000 fresh lines against the exact conditionals."""
    rng = random.Random(5)
    lines = [tuple(L.sample_line(rng, 6)[0]) for _ in range(20_000)]
    prefixes = Counter(line[:3] for line in lines).most_common(4)
    for prefix, count in prefixes:
        observed = Counter(line[3] for line in lines if line[:3] == prefix)
        dist = L.next_token_distributions([*prefix, next(iter(observed))])[0][-1]
        tokens = sorted(dist)
        expected = [dist[t] * count for t in tokens]
        assert min(expected) >= 5, "too few samples for the chi-squared test"
        chi2 = sum((observed[t] - e) ** 2 / e for t, e in zip(tokens, expected, strict=True))
        # the chi-squared survival function with len(tokens) - 1 degrees of freedom
        dof = torch.tensor((len(tokens) - 1) / 2, dtype=torch.float64)
        p_value = float(torch.special.gammaincc(dof, torch.tensor(chi2 / 2, dtype=torch.float64)))
        assert p_value > 1e-3, (prefix, p_value)


def test_impossible_text_is_named():
    with pytest.raises(ValueError, match="position 1"):
        L.next_token_distributions(["Dog", "runs", "near"])
    with pytest.raises(ValueError, match="at the end"):
        L.next_token_distributions(["Dog", "Dog"])


def test_the_deterministic_skills_cost_nothing_at_the_floor(sampled):
    floor, skills = L.floor_losses([tokens for tokens, _ in sampled])
    labels = [label for row in skills for label in row]
    flat = floor.flatten()
    for skill in ("mark", "induction", "object"):
        at = torch.tensor([label == skill for label in labels])
        assert at.sum() > 50, skill
        assert flat[at].abs().max() < 1e-12, skill
    # once the tune has come round, every word is sure; before, a new syllable may come
    at = torch.tensor([label == "song" for label in labels])
    assert at.sum() > 100 and (flat[at] < 1e-12).float().mean() > 0.5
    # the verb's form is decided, but which of the kind's three verbs is not
    at = torch.tensor([label == "subject" for label in labels])
    assert flat[at].min() >= math.log(3) - 1e-12


def test_excess_by_skill_subtracts_the_floor_over_each_skills_own_positions():
    floor = torch.tensor([[0.5, 0.0, 1.0]], dtype=torch.float64)
    losses = torch.tensor([[1.0, 0.25, 1.0]])
    skills = [["other", "mark", "other"]]
    out = L.excess_by_skill(losses, floor, skills)
    assert out == pytest.approx({"all": 0.25, "mark": 0.25, "other": 0.25})
    assert L.excess_by_skill(losses, floor, skills, start=1) == pytest.approx(
        {"all": 0.125, "mark": 0.25, "other": 0.0}
    )
    with pytest.raises(ValueError, match="losses"):
        L.excess_by_skill(losses[:, :2], floor, skills)


def test_copy_pairs_point_from_a_repeated_preposition_to_the_noun_it_brought():
    tokens = "Dog near cat with dogs chases cats ( dog ) .cdd Cats near cat".split()
    assert L.copy_pairs(tokens) == [(12, 2)]
    for line, _ in _lines(50, 32, seed=4):
        for q, k in L.copy_pairs(line):
            assert line[q] == line[k - 1] in L.PREPOSITIONS and line[q + 1] == line[k]


def test_every_token_is_in_exactly_one_word_class():
    listed = [token for tokens in L.WORD_CLASSES.values() for token in tokens]
    assert tuple(listed) == L.VOCAB  # in VOCAB's order, each once


def test_first_of_each_skill_is_where_the_skill_first_decides_the_next_token(sampled):
    for tokens, _ in sampled[:50]:
        _, skills = L.next_token_distributions(tokens)
        first = L.first_of_each_skill(tokens)
        assert list(first) == [s for s in L.SKILLS if s in skills]
        for skill, t in first.items():
            assert skills[t] == skill and skill not in skills[:t]
