import hashlib
import random

import pytest
import torch

from course_lib import data


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_shipped_files_are_exactly_what_the_generator_writes(tmp_path):
    written = data.write_data(tmp_path)
    assert [p.name for p in written] == ["vocab.txt", "train.txt", "valid.txt", "long.txt"]
    for path in written:
        assert sha256(path) == sha256(data.DATA_DIR / path.name), f"{path.name} drifted"


def test_splits_have_the_documented_shapes():
    for name, (num, length, _) in data.SPLITS.items():
        assert data.load_split(name).shape == (num, length)
    assert data.SPLITS["long"][1] == 4 * data.SPLITS["train"][1] == 4 * data.SEQ_LEN
    with pytest.raises(ValueError, match="train"):
        data.load_split("test")


def test_vocabulary_is_small_unique_and_matches_vocab_txt():
    assert 30 <= len(data.VOCAB) <= 60
    assert len(set(data.VOCAB)) == len(data.VOCAB)
    assert (data.DATA_DIR / "vocab.txt").read_text().split("\n")[:-1] == list(data.VOCAB)


def test_encode_decode_round_trip():
    text = 'Dogs near the cat sing bone run bone run ( the bird " the boys " ) .'
    ids = data.encode(text)
    assert ids.dtype == torch.long and ids.shape == (len(text.split()),)
    assert data.decode(ids) == text
    assert data.to_tokens(ids) == text.split()
    assert torch.equal(data.encode(text.split()), ids)


@pytest.mark.parametrize(
    "text, kwargs, message",
    [
        ("Dogs near the cow run .", {}, "unknown token 'cow' at position 3"),
        ("", {}, "empty text"),
        ("   ", {}, "empty text"),
        ("Dog runs . Dog runs .", {"max_len": 4}, "at most max_len = 4 tokens, got 6"),
    ],
)
def test_bad_text_raises_a_value_error_naming_the_problem(text, kwargs, message):
    with pytest.raises(ValueError, match=message):
        data.encode(text, **kwargs)


def test_bad_ids_raise():
    with pytest.raises(ValueError, match=r"\[0, "):
        data.decode([0, len(data.VOCAB)])
    with pytest.raises(ValueError, match="1-D"):
        data.decode(torch.zeros(2, 3, dtype=torch.long))


def sentences(n=400, seed=0):
    rng = random.Random(seed)
    return [data.generate_sentence(rng) for _ in range(n)]


def test_every_verb_agrees_with_its_subject_in_number_and_kind():
    plural_of = dict(data.VERBS)
    for words in sentences():
        subject = words[0]
        verb = next(w for w in words if w in data.VERB_FORMS)
        singular_noun = next(s for s, p in data.NOUNS if subject.lower() in (s, p))
        is_plural = subject.lower() != singular_noun
        allowed = data.CAN[singular_noun]
        assert verb in ([plural_of[v] for v in allowed] if is_plural else allowed), words


def test_distractor_numbers_are_independent_of_the_subject():
    same = total = 0
    for words in sentences(2000):
        subject_plural = words[0].endswith("s")
        verb_at = next(i for i, w in enumerate(words) if w in data.VERB_FORMS)
        for w in words[1:verb_at]:
            if w.lower() != w or w not in {n for pair in data.NOUNS for n in pair}:
                continue
            total += 1
            same += (w in {p for _, p in data.NOUNS}) == subject_plural
    assert 0.45 < same / total < 0.55  # a shortcut "verb = opposite of last noun" would fail


def test_brackets_are_balanced_and_nest_only_across_families():
    for words in sentences():
        pairs = data.bracket_pairs(words)
        assert len(pairs) == sum(w in (")", "]") for w in words) + words.count('"') // 2
        for query, key in pairs:
            assert data.OPENERS[words[key]] == words[query + 1]
            inside = words[key + 1 : query + 1]
            for w in inside:  # a nested span of the same family never occurs
                if w in data.OPENERS:
                    assert (w == '"') != (words[key] == '"'), words


def test_songs_alternate_two_words():
    sung = 0
    for words in sentences():
        for query, key in data.previous_token_pairs(words):
            assert words[query + 1] == words[key] != words[query]
            sung += 1
    assert sung > 100


def test_pairs_on_a_hand_written_line():
    line = 'Dogs near the cat sing bone run bone run ( the bird " the boys " ) . Girl with the boys'
    tokens = line.split()
    assert data.previous_token_pairs(tokens) == [(6, 5), (7, 6)]
    # ( at 9 closes at 16; " at 12 closes at 15
    assert data.bracket_pairs(tokens) == [(14, 12), (15, 9)]
    # the second sentence has no verb yet: no pair
    assert data.subject_pairs(tokens) == [(3, 0)]
    assert data.subject_pairs(data.encode(line)) == [(3, 0)]


def test_generation_is_deterministic_and_lines_have_the_asked_length():
    a = data.generate_sequences(5, 40, seed=7)
    assert a == data.generate_sequences(5, 40, seed=7)
    assert a != data.generate_sequences(5, 40, seed=8)
    assert all(len(line) == 40 for line in a)
    with pytest.raises(ValueError, match="length"):
        data.generate_sequences(5, 0, seed=7)
