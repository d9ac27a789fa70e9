"""The demonstrations of lessons 02a and 02b: the line 02a follows, an embedding written by
hand whose four features can be read (lesson 02a), an untrained embedding, and sentences padded
to one length (lesson 02b).

The math (attention, the masks) lives in `course_lib.attention`; this module only makes the
vectors and batches the lesson runs it on.
"""

import torch

from course_lib import corpus, language
from course_lib._validation import positive_int

LINE = 196  # the validation line the lesson follows: Cat near dogs near dogs eats ...
LINE_LENGTH = 12  # its first sentence and the next sentence's subject
# the embedding written by hand: one feature per column, 1 where the token has it
FEATURES = ("singular subject", "plural subject", "noun", "verb")
PAD = len(corpus.VOCAB)  # the id that fills a short sentence out: one past the vocabulary
PADDED_LINES = (2, 3, 4)  # the validation lines whose first sentences the batch holds


def lesson_line() -> list[str]:
    """The 12 tokens the lesson follows: a sentence whose singular subject (Cat) stands two
    nouns before its verb, then the next sentence's plural subject (lesson 02a)."""
    return corpus.to_tokens(corpus.load_split("valid")[LINE])[:LINE_LENGTH]


def feature_embedding() -> torch.Tensor:
    """(V, 4) float32: row i holds token i's FEATURES, 1 or 0; marks, prepositions,
    syllables and brackets have none (lesson 02a)."""
    table = torch.zeros(len(corpus.VOCAB), len(FEATURES))
    for token, i in corpus.TOKEN_ID.items():
        if token in language.SUBJECTS:
            table[i, language.SUBJECTS.index(token) % 2] = 1.0  # Dog 0, Dogs 1, Cat 0, ...
        elif token in language.NOUNS:
            table[i, 2] = 1.0
        elif token in language.WORD_CLASSES["verbs"]:
            table[i, 3] = 1.0
    return table


def untrained_embedding(D: int = 16, seed: int = 0) -> torch.Tensor:
    """(V + 1, D) float32: a random N(0, 1) row per token, as an embedding starts before
    training, and a row of zeros for PAD, the id that fills short sentences (lesson 02b)."""
    positive_int("D", D)
    g = torch.Generator().manual_seed(seed)
    rows = torch.randn(len(corpus.VOCAB), D, generator=g)
    return torch.cat([rows, torch.zeros(1, D)])  # (V + 1, D)


def first_sentence(tokens) -> list[str]:
    """A line's tokens up to and including its first full stop (a mark) (lesson 02b)."""
    tokens = list(tokens)
    for t, token in enumerate(tokens):
        if token in language.MARKS:
            return tokens[: t + 1]
    raise ValueError("tokens: expected a line with a full stop (a mark such as .dcc)")


def padded_batch(lines=PADDED_LINES) -> tuple[list[list[str]], torch.Tensor, torch.Tensor]:
    """(sentences, ids (B, T) int64, lengths (B,) int64): the first sentence of each
    validation line in `lines`, right-padded with PAD to the longest one's length T
    (lesson 02b)."""
    valid = corpus.load_split("valid")
    sentences = [first_sentence(corpus.to_tokens(valid[i])) for i in lines]
    lengths = torch.tensor([len(s) for s in sentences])  # (B,)
    T = int(lengths.max())
    ids = torch.full((len(sentences), T), PAD, dtype=torch.int64)  # (B, T)
    for b, sentence in enumerate(sentences):
        ids[b, : len(sentence)] = corpus.encode(sentence)
    return sentences, ids, lengths
