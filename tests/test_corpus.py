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
    ],
)
def test_bad_input_names_the_parameter(call, words):
    with pytest.raises((ValueError, TypeError)) as error:
        call()
    for word in words:
        assert word in str(error.value)
