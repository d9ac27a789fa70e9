"""The toy language of course_lib.language as shipped text: data/language/ (lesson 01a on).

    python -m course_lib.corpus    # write data/language/ again (a test checks it matches)

A line of a split's file is one sequence of tokens separated by spaces: sentences one after
another, cut at the line's length. The files are generated from fixed seeds, so the shipped
text and the generator never drift apart, and the floor of every split (the least loss any
model can reach on it, prediction by prediction) comes from `language.floor_losses`.
`python -m course_lib.train --data` writes them too, with every shipped checkpoint.
"""

import functools
import random
from pathlib import Path

import torch

from course_lib import language
from course_lib._validation import text_ids
from course_lib.paths import DATA_DIR

DIRECTORY = DATA_DIR / "language"
SEQ_LEN = 32  # the length every model is trained on
LONG_LEN = 4 * SEQ_LEN  # held-out longer lines, to measure beyond the trained length
VOCAB: tuple[str, ...] = language.VOCAB
TOKEN_ID = {token: i for i, token in enumerate(VOCAB)}
# name -> (lines, tokens per line, seed)
SPLITS = {"train": (20000, SEQ_LEN, 1), "valid": (400, SEQ_LEN, 2), "long": (200, LONG_LEN, 3)}


def generate(name: str) -> list[list[str]]:
    """The lines of split `name`, drawn from the language with the split's seed (lesson 01a)."""
    num, length, seed = SPLITS[_split_name(name)]
    rng = random.Random(seed)
    return [language.sample_line(rng, length)[0] for _ in range(num)]


def write_data(directory=DIRECTORY) -> list[Path]:
    """Write vocab.txt and one NAME.txt per split (a line per sequence); return the paths
    (lesson 01a)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / "vocab.txt"]
    paths[0].write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    for name in SPLITS:
        path = directory / f"{name}.txt"
        path.write_text("".join(" ".join(line) + "\n" for line in generate(name)), "utf-8")
        paths.append(path)
    return paths


def _split_name(name) -> str:
    if name not in SPLITS:
        raise ValueError(f"name: expected one of {', '.join(map(repr, SPLITS))}, got {name!r}")
    return name


def encode(text) -> torch.Tensor:
    """Token ids (T,) of a space-separated string or a list of tokens (lesson 01a)."""
    return torch.tensor(text_ids(text, TOKEN_ID, "the vocabulary (corpus.VOCAB)"), dtype=torch.long)


def to_tokens(ids) -> list[str]:
    """The tokens of a 1-D sequence of ids (lesson 01a)."""
    if isinstance(ids, torch.Tensor):
        if ids.dim() != 1:
            raise ValueError(f"ids: expected a 1-D sequence, got shape {tuple(ids.shape)}")
        ids = ids.tolist()
    for i in ids:
        if not 0 <= i < len(VOCAB):
            raise ValueError(f"ids: expected ids in [0, {len(VOCAB)}), got {i}")
    return [VOCAB[i] for i in ids]


def decode(ids) -> str:
    """The text of a 1-D sequence of ids, tokens joined by spaces (lesson 01a)."""
    return " ".join(to_tokens(ids))


@functools.cache
def load_split(name: str) -> torch.Tensor:
    """The shipped split `name` ("train", "valid" or "long") as ids (N, T) (lesson 01a)."""
    path = DIRECTORY / f"{_split_name(name)}.txt"
    lines = path.read_text(encoding="utf-8").splitlines()
    return torch.stack([encode(line) for line in lines])  # (N, T)


@functools.cache
def floored_split(name: str) -> tuple[torch.Tensor, torch.Tensor, list[list[str]]]:
    """(ids (N, T), floor (N, T - 1), skills): a split with the floor of every prediction
    (nats, -log p of the true next token under the generator) and the skill it needs
    (lesson 01b)."""
    ids = load_split(name)
    return (ids, *language.floor_losses([to_tokens(row) for row in ids]))


def _start(split: str) -> int:
    return SEQ_LEN if split == "long" else 0  # on "long", only what lies beyond SEQ_LEN


def excess_loss(losses: torch.Tensor, split: str) -> dict[str, float]:
    """Loss minus floor, overall and per skill, of the (N, T - 1) losses of a model on a split.
    On "long" only the predictions made beyond the trained length count (positions 32-126)
    (lesson 01b)."""
    ids, floor, skills = floored_split(split)
    if tuple(losses.shape) != tuple(floor.shape):
        raise ValueError(
            f"losses: expected shape {tuple(floor.shape)} (one per prediction of {split!r}), "
            f"got {tuple(losses.shape)}"
        )
    return language.excess_by_skill(losses, floor, skills, _start(split))


def excess_by_position(losses: torch.Tensor, split: str) -> torch.Tensor:
    """Loss minus floor at each prediction position, averaged over a split's lines: (T - 1,)
    from the (N, T - 1) losses of a model on `split`; entry t is the prediction of token t + 1
    from tokens 0..t (on "long", entries 32 on lie beyond the trained length) (lesson 07b)."""
    _, floor, _ = floored_split(split)
    if not isinstance(losses, torch.Tensor) or tuple(losses.shape) != tuple(floor.shape):
        got = tuple(losses.shape) if isinstance(losses, torch.Tensor) else type(losses).__name__
        raise ValueError(
            f"losses: expected shape {tuple(floor.shape)} (one per prediction of {split!r}), "
            f"got {got}"
        )
    return (losses.detach().to(floor.dtype) - floor).mean(0)  # (T - 1,)


def split_floor(split: str) -> dict[str, float]:
    """The floor of a split, overall and per skill, in nats per prediction (lesson 01b)."""
    _, floor, skills = floored_split(split)
    excess = language.excess_by_skill(torch.zeros_like(floor), floor, skills, _start(split))
    return {skill: -value + 0.0 for skill, value in excess.items()}


# ---------------------------------------------------------------- where a head should look
# Each finder gives the (query, key) positions of one job in a line: at query t the model
# predicts token t + 1, and the key is the one position that decides it. heads.py scores a
# head by its mean attention on the key (heads.DETECTORS is this module's DETECTORS).


def _tokens(line) -> list[str]:
    return to_tokens(line) if isinstance(line, torch.Tensor) else list(line)


def subject_pairs(line) -> list[tuple[int, int]]:
    """(the position before each verb, the subject it agrees with): across the distractors
    (lesson 12)."""
    tokens, pairs, subject = _tokens(line), [], None
    for t, token in enumerate(tokens):
        if token in language.SUBJECTS:
            subject = t
        elif token in _VERBS and subject is not None and t > 0:
            pairs.append((t - 1, subject))
            subject = None
    return pairs


def previous_pairs(line) -> list[tuple[int, int]]:
    """(each noun right after a preposition, that preposition): the first half of the
    induction circuit, a head that tags the noun with the token before it (lesson 12)."""
    tokens = _tokens(line)
    return [
        (t, t - 1)
        for t in range(1, len(tokens))
        if tokens[t - 1] in language.PREPOSITIONS and tokens[t] in language.NOUNS
    ]


def induction_pairs(line) -> list[tuple[int, int]]:
    """(each preposition the line used before, the noun after its first use): the second
    half, the head that finds the earlier copy and reads what followed (language.copy_pairs)
    (lesson 12)."""
    return language.copy_pairs(_tokens(line))


def song_pairs(line) -> list[tuple[int, int]]:
    """(each song word whose next word repeats the tune, the word after the current word's
    earlier copy): one tune back, whatever the tune's length (2-4) (lesson 12)."""
    tokens, pairs = _tokens(line), []
    for start in [t + 1 for t, token in enumerate(tokens) if token in ("sings", "sing")]:
        end = start
        while end < len(tokens) and tokens[end] in language.SYLLABLES:
            end += 1
        song = tokens[start:end]
        tune = next((k for k in range(1, len(song)) if song[k] == song[0]), None)
        if tune is None:
            continue  # the tune has not come round inside the line
        # query t predicts t + 1, a copy of t + 1 - tune; from the tune's first repeat on,
        # where the repeat has shown the tune's length (before it, a new word may come)
        pairs += [(t, t + 1 - tune) for t in range(start + tune, end - 1)]
    return pairs


def bracket_pairs(line) -> list[tuple[int, int]]:
    """(the position before each closer, its opener) (lesson 12)."""
    tokens, stack, pairs = _tokens(line), [], []
    for t, token in enumerate(tokens):
        if token in language.OPENERS:
            stack.append(t)
        elif token in _CLOSERS and stack and language.OPENERS[tokens[stack[-1]]] == token:
            pairs.append((t - 1, stack.pop()))
    return pairs


_VERBS = frozenset(form for pair in language.VERB_FORMS.items() for form in pair)
_CLOSERS = frozenset(language.OPENERS.values())
DETECTORS = {
    "subject": subject_pairs,
    "previous": previous_pairs,
    "induction": induction_pairs,
    "song": song_pairs,
    "bracket": bracket_pairs,
}


if __name__ == "__main__":
    for written in write_data():
        print(written)
