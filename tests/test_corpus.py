"""data/language/: the toy language's shipped text (course_lib.corpus)."""

import hashlib
import math

import pytest
import torch

from course_lib import corpus, language


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.slow
def test_the_shipped_files_are_the_generators(tmp_path):
    for path in corpus.write_data(tmp_path):
        assert sha256(path) == sha256(corpus.DIRECTORY / path.name), f"{path.name} drifted"


def test_each_split_has_its_lines_and_length():
    for name, (num, length, _) in corpus.SPLITS.items():
        assert tuple(corpus.load_split(name).shape) == (num, length)


def test_the_validation_lines_follow_the_language():
    # every true next token has p > 0 under the generator, so no floor is infinite
    ids, floor, skills = corpus.floored_split("valid")
    assert torch.isfinite(floor).all() and (floor >= 0).all()
    assert {s for row in skills for s in row} == set(language.SKILLS)


def test_encode_and_decode_are_inverse():
    line = corpus.decode(corpus.load_split("valid")[0])
    assert corpus.decode(corpus.encode(line)) == line
    assert corpus.to_tokens(corpus.encode(line.split()[:3])) == line.split()[:3]


def test_excess_loss_of_the_floor_is_zero_and_a_uniform_guess_is_log_v_above_nothing():
    _, floor, _ = corpus.floored_split("valid")
    excess = corpus.excess_loss(floor.clone(), "valid")
    assert all(abs(v) < 1e-12 for v in excess.values())
    uniform = torch.full_like(floor, math.log(len(corpus.VOCAB)))
    expected = math.log(len(corpus.VOCAB)) - corpus.split_floor("valid")["all"]
    assert corpus.excess_loss(uniform, "valid")["all"] == pytest.approx(expected, abs=1e-6)


def test_excess_by_position_averages_each_position_over_the_lines():
    _, floor, _ = corpus.floored_split("long")
    losses = floor + torch.linspace(0, 1, floor.shape[1])  # (N, T - 1), t / (T - 2) above
    by_position = corpus.excess_by_position(losses, "long")
    assert by_position.shape == (floor.shape[1],)
    torch.testing.assert_close(by_position, torch.linspace(0, 1, floor.shape[1]).double())
    bumped = losses.clone()
    bumped[0, 40] += floor.shape[0]  # one line's loss at one position: that mean rises by 1
    rise = corpus.excess_by_position(bumped, "long")[40] - by_position[40]
    assert float(rise) == pytest.approx(1)
    # over a split whose every position counts, the positions' mean is the overall excess
    _, valid_floor, _ = corpus.floored_split("valid")
    noisy = valid_floor + torch.rand(valid_floor.shape, generator=torch.Generator().manual_seed(0))
    overall = corpus.excess_loss(noisy, "valid")["all"]
    assert float(corpus.excess_by_position(noisy, "valid").mean()) == pytest.approx(overall)


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda: corpus.load_split("test"), ["name", "'train'", "'test'"]),
        (lambda: corpus.encode("Dog eats zebra"), ["text", "'zebra'", "position 2"]),
        (lambda: corpus.encode(""), ["text", "at least one token"]),
        (lambda: corpus.encode(3), ["text", "int"]),
        (lambda: corpus.to_tokens([0, 104]), ["ids", "104"]),
        (lambda: corpus.to_tokens(torch.zeros(2, 2, dtype=torch.long)), ["ids", "(2, 2)"]),
        (lambda: corpus.excess_loss(torch.zeros(3, 31), "valid"), ["losses", "(400, 31)"]),
        (lambda: corpus.excess_by_position(torch.zeros(200, 31), "long"), ["losses", "(200, 127)"]),
        (lambda: corpus.excess_by_position([0.0], "valid"), ["losses", "list"]),
    ],
)
def test_bad_input_names_the_parameter(call, words):
    with pytest.raises((ValueError, TypeError)) as error:
        call()
    for word in words:
        assert word in str(error.value)


@pytest.fixture(scope="module")
def valid_lines():
    return [corpus.to_tokens(row) for row in corpus.load_split("valid")]


def test_each_detectors_key_decides_the_next_token(valid_lines):
    verbs_of = {}
    for kind, verbs in language.CAN.items():
        for number, subject in enumerate(language.NOUN_FORMS[language.KINDS.index(kind)]):
            forms = verbs if number == 0 else tuple(language.VERB_FORMS[v] for v in verbs)
            verbs_of[subject.capitalize()] = forms
    counts = dict.fromkeys(corpus.DETECTORS, 0)
    for line in valid_lines:
        for q, k in corpus.subject_pairs(line):
            assert line[q + 1] in verbs_of[line[k]]
        for q, k in corpus.previous_pairs(line):
            assert (q, line[k], line[q] in language.NOUNS) == (k + 1, line[k], True)
            assert line[k] in language.PREPOSITIONS
        for q, k in corpus.induction_pairs(line) + corpus.song_pairs(line):
            assert line[q + 1] == line[k] and k < q  # a copy of the key, from the past
        for q, k in corpus.bracket_pairs(line):
            assert language.OPENERS[line[k]] == line[q + 1]
        for name, find in corpus.DETECTORS.items():
            counts[name] += len(find(line))
    assert min(counts.values()) >= 100, counts  # every job has plenty of positions to score


def test_the_song_and_induction_detectors_sit_where_the_floor_is_zero():
    # their next token is certain once the pattern has shown itself
    ids, floor, _ = corpus.floored_split("valid")
    for name in ("song", "induction"):
        pairs = [(b, q) for b, row in enumerate(ids) for q, _ in corpus.DETECTORS[name](row)]
        b, q = torch.tensor(pairs).T
        assert floor[b, q].abs().max() < 1e-9, name


def test_the_song_detector_waits_for_the_tune_to_come_round():
    line = "Dogs near cat sing la mi do la mi do la mi do [ dog ] .dcd".split()
    # tune of 3 from position 4; the first repeat is at 7, so queries start there
    assert corpus.song_pairs(line) == [(t, t - 2) for t in range(7, 12)]


def test_a_head_on_the_detectors_key_scores_one():
    from course_lib import heads

    ids = corpus.load_split("valid")[:20]
    T = ids.shape[1]
    weights = torch.zeros(len(ids), 1, T, T)
    for b, row in enumerate(ids):
        for q, k in corpus.bracket_pairs(row):
            weights[b, 0, q, k] = 1.0
    score = heads.detector_score([weights], ids, "bracket", corpus.DETECTORS)
    assert score.shape == (1, 1) and float(score) == 1.0
    chance = heads.chance_scores(ids, corpus.DETECTORS)
    assert set(chance) == set(corpus.DETECTORS) and all(0 < c < 1 for c in chance.values())
    with pytest.raises(ValueError, match="detector: expected one of"):
        heads.detector_score([weights], ids, "mark", corpus.DETECTORS)
