"""A toy language whose next token needs three different kinds of looking back (lesson 06).

Every sentence has the same skeleton, for example

    Dogs near the cat with the girl sing bone run bone run bone ( the bird " the boys " ) .

and each part of it needs one skill:

- local: a song (after "sings" or "sing") is two words taking turns, any two lowercase words,
  so inside it the next word is the one before the current word: a job for a head that looks
  one token back;
- agreement: the verb agrees with the subject, the capitalised noun that starts the sentence,
  in number (sings / sing) and in kind (each subject has its own three verbs), never with the
  distractor nouns in between, whose number and kind are drawn independently;
- matching: an aside in ( ), [ ] or " " may end with one nested span of the other family
  (quotes inside brackets, brackets inside quotes), so a closer must match its own opener.

Sentences are packed into lines of exactly `length` tokens (the last one cut off), one line per
sequence. The files in data/ are written by `write_data` and a test regenerates them, so the
shipped text and this generator never drift apart.
"""

import random
from pathlib import Path

import torch

from course_lib._validation import positive_int, text_ids
from course_lib.paths import DATA_DIR

SEQ_LEN = 32  # L: the length every model is trained on
LONG_LEN = 4 * SEQ_LEN  # the held-out long sequences, to test length generalisation

# (singular, plural) pairs; any of them can be the subject
NOUNS = (
    ("dog", "dogs"), ("cat", "cats"), ("girl", "girls"), ("boy", "boys"), ("bird", "birds"),
    ("fish", "fishes"),
)  # fmt: skip
VERBS = (("runs", "run"), ("sleeps", "sleep"), ("eats", "eat"), ("reads", "read"),
         ("throws", "throw"), ("sings", "sing"))  # fmt: skip
CAN = {  # a subject picks its verbs (by the singular forms), so the verb needs the subject
    "dog": ("runs", "eats", "sings"),
    "cat": ("sleeps", "eats", "sings"),
    "girl": ("reads", "throws", "sings"),
    "boy": ("throws", "runs", "sings"),
    "bird": ("eats", "sleeps", "sings"),
    "fish": ("sleeps", "runs", "sings"),
}
TAKES_OBJECT = ("eats", "reads", "throws")
OBJECTS = ("bone", "apple", "book", "letter", "ball", "stone")
PREPOSITIONS = ("near", "with", "behind")
OPENERS = {"(": ")", "[": "]", '"': '"'}
CLOSERS = (")", "]", '"')

VERB_FORMS = frozenset(form for pair in VERBS for form in pair)
SUBJECT_FORMS = frozenset(noun.capitalize() for pair in NOUNS for noun in pair)

VOCAB: tuple[str, ...] = (
    ".", "(", ")", "[", "]", '"', "the", "and",
    *(noun.capitalize() for pair in NOUNS for noun in pair),
    *(noun for pair in NOUNS for noun in pair),
    *(verb for pair in VERBS for verb in pair),
    *OBJECTS,
    *PREPOSITIONS,
)  # fmt: skip
TOKEN_ID = {token: i for i, token in enumerate(VOCAB)}
# a song alternates two words, any two of these: "dog runs dog runs ..."
SONG_WORDS = tuple(t for t in VOCAB if t.islower())

# name -> (number of lines, tokens per line, seed)
SPLITS = {
    "train": (4000, SEQ_LEN, 1),
    "valid": (400, SEQ_LEN, 2),
    "long": (200, LONG_LEN, 3),
}


# ---------------------------------------------------------------- the generator


def _noun(rng: random.Random) -> str:
    return rng.choice(NOUNS)[rng.random() < 0.5]


def _span(rng: random.Random, opener: str, nest: bool) -> list[str]:
    """An aside: the opener, one to three nouns, maybe one nested span, the closer."""
    words = [opener, "the", _noun(rng)]
    while len(words) < 9 and rng.random() < 0.4:
        words += ["and", "the", _noun(rng)]
    if nest and rng.random() < 0.4:
        # the nested span is of the other family and always ends the outer one
        inner = '"' if opener != '"' else rng.choice(("(", "["))
        words += _span(rng, inner, nest=False)
    return [*words, OPENERS[opener]]


def _song(rng: random.Random) -> list[str]:
    """A song: two words taking turns, so each word is the one two back."""
    first, second = rng.sample(SONG_WORDS, 2)
    return ([first, second] * 5)[: rng.randint(4, 10)]


def generate_sentence(rng: random.Random) -> list[str]:
    """One sentence of the toy language, as a list of tokens ending in "." (lesson 06)."""
    plural = rng.random() < 0.5
    subject = rng.choice(NOUNS)
    words = [subject[plural].capitalize()]
    for _ in range(rng.choice((1, 1, 2))):  # distractors: their number is drawn independently
        words += [rng.choice(PREPOSITIONS), "the", _noun(rng)]
    verb = rng.choice(CAN[subject[0]])
    words.append(verb if not plural else dict(VERBS)[verb])
    if verb in TAKES_OBJECT:
        words += ["the", rng.choice(OBJECTS)]
    elif verb == "sings":
        words += _song(rng)
    if rng.random() < 0.6:
        words += _span(rng, rng.choice(tuple(OPENERS)), nest=True)
    return [*words, "."]


def generate_sequences(num: int, length: int, seed: int) -> list[list[str]]:
    """`num` lines of exactly `length` tokens: whole sentences, the last one cut (lesson 06)."""
    positive_int("num", num)
    positive_int("length", length)
    rng = random.Random(seed)
    lines = []
    for _ in range(num):
        words: list[str] = []
        while len(words) < length:
            words += generate_sentence(rng)
        lines.append(words[:length])
    return lines


def write_data(directory=DATA_DIR) -> list[Path]:
    """Write vocab.txt and one NAME.txt per split (a line per sequence); return the paths."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / "vocab.txt"]
    paths[0].write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    for name, (num, length, seed) in SPLITS.items():
        path = directory / f"{name}.txt"
        lines = generate_sequences(num, length, seed)
        path.write_text("".join(" ".join(line) + "\n" for line in lines), encoding="utf-8")
        paths.append(path)
    return paths


# ---------------------------------------------------------------- tokens <-> ids


def encode(text, *, max_len: int | None = None) -> torch.Tensor:
    """Token ids (T,) of a space-separated string or a list of tokens (lesson 06).

    Raises ValueError for empty text, a token outside VOCAB, or more than max_len tokens.
    """
    ids = text_ids(text, TOKEN_ID, f"the vocabulary: {' '.join(VOCAB)}")
    if max_len is not None and len(ids) > max_len:
        raise ValueError(f"text: expected at most max_len = {max_len} tokens, got {len(ids)}")
    return torch.tensor(ids, dtype=torch.long)  # (T,)


def to_tokens(ids) -> list[str]:
    """The token strings of a 1-D sequence of ids, e.g. to label an attention map (lesson 06)."""
    if isinstance(ids, torch.Tensor):
        if ids.dim() != 1:
            raise ValueError(f"ids: expected a 1-D sequence, got shape {tuple(ids.shape)}")
        ids = ids.tolist()
    out = []
    for i in ids:
        if not 0 <= i < len(VOCAB):
            raise ValueError(f"ids: expected ids in [0, {len(VOCAB)}), got {i}")
        out.append(VOCAB[i])
    return out


def decode(ids) -> str:
    """The text of a 1-D sequence of ids, tokens joined by spaces (lesson 06)."""
    return " ".join(to_tokens(ids))


def load_split(name: str, directory=DATA_DIR) -> torch.Tensor:
    """The shipped split `name` ("train", "valid" or "long") as ids (N, T) (lesson 06)."""
    if name not in SPLITS:
        raise ValueError(f"name: expected one of {tuple(SPLITS)}, got {name!r}")
    path = Path(directory) / f"{name}.txt"
    lines = path.read_text(encoding="utf-8").splitlines()
    return torch.stack([encode(line) for line in lines])  # (N, T)


# ---------------------------------------------------------------- where each skill is needed


def _as_tokens(sequence) -> list[str]:
    return to_tokens(sequence) if isinstance(sequence, torch.Tensor) else list(sequence)


def previous_token_pairs(sequence) -> list[tuple[int, int]]:
    """(query, key) = (t, t - 1) wherever the previous token decides the next one (lesson 06).

    That is inside a song, the words after "sings" or "sing" up to the next "." or opener:
    its words take turns, so from the song's second word on, the next word is a copy of the
    word before the current one.
    """
    tokens = _as_tokens(sequence)
    pairs = []
    position = 0
    while position < len(tokens):
        if tokens[position] in ("sings", "sing"):
            start = end = position + 1
            while end < len(tokens) and tokens[end] in SONG_WORDS:
                end += 1
            # queries whose next token is still in the song: start + 1 .. end - 2
            pairs += [(t, t - 1) for t in range(start + 1, end - 1)]
            position = end
        else:
            position += 1
    return pairs


def bracket_pairs(sequence) -> list[tuple[int, int]]:
    """(query, key) for every closer in the sequence (lesson 06).

    The query is the position just before the closer, where the model must predict it, and
    the key is the position of its matching opener. A " closes the span when the innermost
    open span is a quote, and opens a new one otherwise.
    """
    tokens = _as_tokens(sequence)
    stack: list[int] = []
    pairs = []
    for position, token in enumerate(tokens):
        closes_quote = token == '"' and stack and tokens[stack[-1]] == '"'
        if token in (")", "]") or closes_quote:
            if stack and OPENERS[tokens[stack[-1]]] == token:
                pairs.append((position - 1, stack.pop()))
        elif token in OPENERS:
            stack.append(position)
    return pairs


def subject_pairs(sequence) -> list[tuple[int, int]]:
    """(query, key) for every sentence whose verb is in the sequence (lesson 06).

    The query is the position just before the verb, where the model must choose its form,
    and the key is the subject: the capitalised noun that starts the sentence.
    """
    tokens = _as_tokens(sequence)
    pairs = []
    subject = None
    for position, token in enumerate(tokens):
        if token in SUBJECT_FORMS:
            subject = position
        elif token in VERB_FORMS and subject is not None:
            pairs.append((position - 1, subject))
            subject = None
    return pairs


# ---------------------------------------------------------------- lesson 06: checking samples


def sentences(sequence) -> list[list[str]]:
    """The complete sentences in a sequence: runs of tokens that end in "." (lesson 06).

    Tokens before the first "." are dropped (a sentence cut at the start) and so are tokens
    after the last one (a sentence not finished yet).
    """
    tokens = _as_tokens(sequence)
    ends = [i for i, token in enumerate(tokens) if token == "."]
    return [tokens[a + 1 : b + 1] for a, b in zip(ends, ends[1:], strict=False)]


def agreement_holds(sentence) -> bool | None:
    """Does the first verb agree with the subject in number and kind? (lesson 06)

    None when untestable: the sentence does not start with a subject noun or has no verb.
    """
    tokens = _as_tokens(sentence)
    verbs = [t for t in tokens if t in VERB_FORMS]
    if not tokens or tokens[0] not in SUBJECT_FORMS or not verbs:
        return None
    noun = tokens[0].lower()
    plural = noun not in CAN
    singular = next(s for s, p in NOUNS if noun in (s, p))
    allowed = CAN[singular] if not plural else tuple(dict(VERBS)[v] for v in CAN[singular])
    return verbs[0] in allowed


def brackets_matched(sentence) -> bool | None:
    """Does every closer match the innermost open span, and is none left open? None if no
    brackets or quotes at all (lesson 06). A " closes an open quote and opens one otherwise."""
    tokens = _as_tokens(sentence)
    if not any(t in OPENERS or t in CLOSERS for t in tokens):
        return None
    stack: list[str] = []
    for token in tokens:
        if token == '"' and stack and stack[-1] == '"':
            stack.pop()
        elif token in OPENERS:
            stack.append(token)
        elif token in CLOSERS:
            if not stack or OPENERS[stack.pop()] != token:
                return False
    return not stack


def rule_rates(sequences) -> dict[str, tuple[float, int]]:
    """For each rule, (share of testable complete sentences that keep it, how many were
    testable), over sequences of ids (N, T) or token lists (lesson 06)."""
    kept = {"agreement": [], "brackets": []}
    for sequence in sequences:
        for sentence in sentences(sequence):
            for rule, check in (("agreement", agreement_holds), ("brackets", brackets_matched)):
                verdict = check(sentence)
                if verdict is not None:
                    kept[rule].append(verdict)
    return {rule: (sum(v) / len(v) if v else float("nan"), len(v)) for rule, v in kept.items()}
