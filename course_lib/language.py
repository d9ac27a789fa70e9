"""The toy language as a program, and the best loss any model can reach on it (lessons 01a
and 01b).

A line is sentences one after another, cut at the line's length. A sentence reads like

    Dogs near cat with birds eat bird ( dog [ cats ] ) .bdc

and each part of it asks for one skill, at the positions `next_token_distributions` names:

- "subject": the verb agrees with the subject (number: eats / eat; kind: each animal has its
  own verbs), never with the one to three nouns in between, drawn independently;
- "induction": the first time a line uses a preposition, the noun after it is drawn at
  random; every later time, the same noun comes again: after [near][cat] ... [near], [cat].
  Copying it needs two layers: a head that tags each token with the one before it, and a
  head that finds the earlier copy of the current token and reads what followed;
- "object": every verb but "sings" takes an object, which the subject and the noun just
  before the verb decide together: its number is their numbers' exclusive or (plural when
  exactly one of them is plural), and its kind is the subject's kind moved on along dog,
  cat, bird, fish (and round) by the other noun's place in that list (dog 0, cat 1, bird 2,
  fish 3). No sum of the two nouns' features tells the answer, so the feed-forward layer
  has to;
- "song": "sings" starts a tune of two to four different syllables, drawn at random, sung
  twice for a singular subject and three times for a plural one (la mi do la mi do). Once
  the tune has come round, each word copies the word one tune back: the word that followed
  the current word's earlier copy, whatever the tune's length, which is another induction;
- "bracket": every sentence ends in an aside, ( ... ) or [ ... ], holding a noun and maybe
  another aside, up to three deep; each closer matches the innermost open one;
- "mark": the full stop spells the kinds of the sentence's last three nouns, oldest first,
  by their initials: ".bdc" after bird, dog, cat. Three places at once, at one position.

Everything else ("other") is word choice that no model can predict.

The language is written once, as `step`: given the generator's state, every next token it
may write with its probability and the state after it. Sampling follows `step` with a random
number generator; `next_token_distributions` runs the same `step` forward over a given text,
keeping every state the generator could be in and its probability (exact inference, no
sampling), so it gives the exact probability of each next token and with it the loss floor.
"""

import math
import random
from typing import NamedTuple

import torch

KINDS = ("dog", "cat", "bird", "fish")
NOUN_FORMS = (("dog", "dogs"), ("cat", "cats"), ("bird", "birds"), ("fish", "fishes"))
SUBJECTS = tuple(form.capitalize() for pair in NOUN_FORMS for form in pair)  # Dog Dogs Cat ...
NOUNS = tuple(form for pair in NOUN_FORMS for form in pair)  # dog dogs cat cats ...
PREPOSITIONS = ("near", "with")
VERB_FORMS = {  # singular -> plural
    "chases": "chase", "eats": "eat", "sees": "see", "hears": "hear", "sings": "sing",
}  # fmt: skip
CAN = {  # each kind's own verbs, by their singular forms; every kind sings
    "dog": ("chases", "eats", "sings"),
    "cat": ("hears", "eats", "sings"),
    "bird": ("sees", "chases", "sings"),
    "fish": ("hears", "sees", "sings"),
}
TAKES_OBJECT = ("chases", "eats", "sees", "hears")
SYLLABLES = ("la", "mi", "do", "re", "fa", "so", "ti", "ka")
TUNE_LENGTHS = (2, 3, 4)  # a song's tune: this many different syllables, drawn at random
SONG_ROUNDS = (2, 3)  # times the tune is sung: singular subject, plural subject
OPENERS = {"(": ")", "[": "]"}
MAX_DEPTH = 3  # asides nest at most this deep
MAX_DISTRACTORS = 3  # nouns between the subject and the verb: 1 to this many
INITIALS = "dcbf"  # each kind's initial: dog, cat, bird, fish
MARKS = tuple("." + a + b + c for a in INITIALS for b in INITIALS for c in INITIALS)  # .ddd ...

VOCAB: tuple[str, ...] = (
    *MARKS, *SUBJECTS, *NOUNS, *PREPOSITIONS,
    *(form for pair in VERB_FORMS.items() for form in pair),
    *SYLLABLES, *(b for pair in OPENERS.items() for b in pair),
)  # fmt: skip
SKILLS = ("subject", "induction", "object", "song", "bracket", "mark", "other")
# every token of VOCAB in exactly one word class, in VOCAB's order (lesson 01a)
WORD_CLASSES: dict[str, tuple[str, ...]] = {
    "marks": MARKS,
    "subjects": SUBJECTS,
    "nouns": NOUNS,
    "prepositions": PREPOSITIONS,
    "verbs": tuple(form for pair in VERB_FORMS.items() for form in pair),
    "syllables": SYLLABLES,
    "brackets": tuple(b for pair in OPENERS.items() for b in pair),
}


def _noun(token: str) -> tuple[int, int]:
    """(kind, number) of a noun or subject token; number 0 is singular, 1 plural."""
    index = (SUBJECTS if token[0].isupper() else NOUNS).index(token)
    return divmod(index, 2)


class State(NamedTuple):
    """Where the generator is: what it writes next, and what it remembers to write it."""

    phase: str = "start"  # start, prep, noun, more, object, song, aside, anoun, nest, ...
    bound: tuple = ()  # (preposition, noun) for each preposition the line has used
    subject: str = ""
    preposition: str = ""  # the one just written, while its noun is still to come
    last: str = ""  # the latest noun between the subject and the verb
    nouns: tuple = ()  # the kind of each noun of the sentence so far
    distractors: int = 0  # nouns between the subject and the verb
    song: tuple = ()  # the tune's syllables so far
    tune: int = 0  # how many syllables the tune has (hidden until it repeats)
    sung: int = 0  # words of the song written
    stack: tuple = ()  # the open asides, innermost last


# a sentence starts afresh, but the line keeps its prepositions' nouns
_NEW_SENTENCE = {k: v for k, v in State()._asdict().items() if k != "bound"}


def step(state: State) -> list[tuple[float, str, dict]]:
    """Every (probability, next token, changes) the generator may take from `state`, where
    `state._replace(**changes)` is the state after that token.

    The probabilities sum to 1. Outcomes may write the same token and leave different
    states: a song's first syllable comes with each length of tune, and only the tune coming
    round tells which, so `next_token_distributions` adds up every state a text could have
    left. Only the outcome taken is turned into a state, which keeps sampling 20,000 lines
    fast.
    """
    phase = state.phase
    if phase == "start":
        return [
            (1 / len(SUBJECTS), s, dict(phase="prep", subject=s, nouns=(_noun(s)[0],)))
            for s in SUBJECTS
        ]
    if phase == "noun":
        preposition = state.preposition
        bound = dict(state.bound)
        nouns = (bound[preposition],) if preposition in bound else NOUNS
        return [
            (1 / len(nouns), n, dict(phase="more", distractors=state.distractors + 1,
                                        nouns=(*state.nouns, _noun(n)[0]), preposition="", last=n,
                                        bound=tuple({**bound, preposition: n}.items())))
            for n in nouns
        ]  # fmt: skip
    if phase in ("prep", "more"):
        another = 1.0 if phase == "prep" else 0.5 if state.distractors < MAX_DISTRACTORS else 0.0
        out = [(another / len(PREPOSITIONS), p, dict(phase="noun", preposition=p))
               for p in PREPOSITIONS] if another else []  # fmt: skip
        if phase == "prep":
            return out
        kind, number = _noun(state.subject)
        verbs = CAN[KINDS[kind]]
        for verb in verbs:
            after = "object" if verb in TAKES_OBJECT else "song" if verb == "sings" else "aside"
            form = VERB_FORMS[verb] if number else verb
            out.append(((1 - another) / len(verbs), form, dict(phase=after)))
        return out
    if phase == "object":
        (subject_kind, subject_number), (kind, number) = _noun(state.subject), _noun(state.last)
        noun = NOUN_FORMS[(subject_kind + kind) % len(KINDS)][subject_number ^ number]
        return [(1.0, noun, dict(phase="aside", nouns=(*state.nouns, _noun(noun)[0])))]
    if phase == "song":
        if not state.song:  # the first word, and a hidden choice: how many words repeat
            return [
                (1 / len(SYLLABLES) / len(TUNE_LENGTHS), s,
                 dict(song=(s,), sung=1, tune=k))
                for s in SYLLABLES for k in TUNE_LENGTHS
            ]  # fmt: skip
        rounds = SONG_ROUNDS[_noun(state.subject)[1]]
        after = "aside" if state.sung + 1 == state.tune * rounds else "song"
        if state.sung < state.tune:
            new = [s for s in SYLLABLES if s not in state.song]
            return [(1 / len(new), s, dict(phase=after, song=(*state.song, s),
                                           sung=state.sung + 1)) for s in new]  # fmt: skip
        word = state.song[state.sung % state.tune]
        return [(1.0, word, dict(phase=after, sung=state.sung + 1))]
    if phase == "aside":
        return [(1 / len(OPENERS), o, dict(phase="anoun", stack=(o,))) for o in OPENERS]
    if phase == "anoun":
        return [
            (1 / len(NOUNS), n, dict(phase="nest", nouns=(*state.nouns, _noun(n)[0])))
            for n in NOUNS
        ]
    if phase in ("nest", "close"):
        deeper = 0.5 if phase == "nest" and len(state.stack) < MAX_DEPTH else 0.0
        out = [(deeper / len(OPENERS), o, dict(phase="anoun", stack=(*state.stack, o)))
               for o in OPENERS] if deeper else []  # fmt: skip
        rest = state.stack[:-1]
        closed = dict(phase="close" if rest else "mark", stack=rest)
        return [*out, (1 - deeper, OPENERS[state.stack[-1]], closed)]
    if phase == "mark":
        mark = "." + "".join(INITIALS[kind] for kind in state.nouns[-3:])
        return [(1.0, mark, _NEW_SENTENCE)]
    raise ValueError(f"state: unknown phase {phase!r}")


# ---------------------------------------------------------------- writing text


def sample_line(rng: random.Random, length: int) -> tuple[list[str], float]:
    """One line of `length` tokens, and the log-probability of the choices that wrote it."""
    state, tokens, log_p = State(), [], 0.0
    while len(tokens) < length:
        outcomes = step(state)
        u, total = rng.random(), 0.0
        for p, token, changes in outcomes:  # noqa: B007 (the loop leaves the drawn outcome)
            total += p
            if u < total:
                break
        tokens.append(token)
        log_p += math.log(p)
        state = state._replace(**changes)
    return tokens, log_p


# ---------------------------------------------------------------- the exact floor


def _skill(before: dict, token: str, tokens: list[str], t: int) -> str:
    """The skill the prediction of `token` from position t asks for (see the module doc)."""
    phases = {state.phase for state in before}
    (phase,) = phases
    if phase == "noun":
        seen = {preposition for state in before for preposition, _ in state.bound}
        return "induction" if tokens[t] in seen else "other"
    if phase == "more" and token not in PREPOSITIONS:
        return "subject"
    if phase == "object":
        return "object"
    if phase == "song" and any(state.tune and state.sung >= state.tune for state in before):
        return "song"  # the tune may have come round: the next word may be a copy
    if phase in ("nest", "close") and token in OPENERS.values():
        return "bracket"
    return "mark" if phase == "mark" else "other"


def next_token_distributions(tokens) -> tuple[list[dict[str, float]], list[str]]:
    """For a line of tokens (from its start), the exact distribution of each next token
    (lesson 01a_language_and_tokens).

    Returns (dists, skills): dists[t] maps every token the generator may write after
    tokens[:t + 1] to its probability, and skills[t] names the skill that predicting
    tokens[t + 1] asks for; both have len(tokens) - 1 entries.
    Raises ValueError at the first token the generator could not have written.
    """
    tokens = list(tokens)
    beliefs = {}  # state -> probability given the tokens so far
    for p, token, changes in step(State()):
        if token == tokens[0]:
            after = State()._replace(**changes)
            beliefs[after] = beliefs.get(after, 0.0) + p
    dists, skills = [], []
    for t in range(len(tokens) - 1):
        if not beliefs:
            raise ValueError(f"tokens: {tokens[t]!r} at position {t} cannot follow {tokens[:t]}")
        total = sum(beliefs.values())
        dist: dict[str, float] = {}
        updated: dict[State, float] = {}
        for state, weight in beliefs.items():
            for p, token, changes in step(state):
                dist[token] = dist.get(token, 0.0) + weight * p / total
                if token == tokens[t + 1]:
                    after = state._replace(**changes)
                    updated[after] = updated.get(after, 0.0) + weight * p / total
        dists.append(dist)
        skills.append(_skill(beliefs, tokens[t + 1], tokens, t))
        beliefs = updated
    if not beliefs:
        raise ValueError(f"tokens: {tokens[-1]!r} at the end cannot follow {tokens[:-1]}")
    return dists, skills


def floor_losses(lines) -> tuple[torch.Tensor, list[list[str]]]:
    """The loss floor of each prediction in `lines` (token lists, each from a line's start).

    Returns (floor, skills): floor (N, T - 1) holds -log p of each true next token under the
    generator itself, the least loss any model can expect there; skills[n][t] names the
    skill that predicting lines[n][t + 1] asks for (lesson 01b).
    """
    rows, skills = [], []
    for tokens in lines:
        dists, labels = next_token_distributions(tokens)
        rows.append([-math.log(dist[tokens[t + 1]]) for t, dist in enumerate(dists)])
        skills.append(labels)
    return torch.tensor(rows, dtype=torch.float64), skills


def first_of_each_skill(tokens) -> dict[str, int]:
    """For each skill a line asks for, the first position t whose prediction (of tokens[t + 1])
    asks for it, in the order of SKILLS (lesson 01a_language_and_tokens)."""
    _, skills = next_token_distributions(tokens)
    return {skill: skills.index(skill) for skill in SKILLS if skill in skills}


def copy_pairs(tokens) -> list[tuple[int, int]]:
    """(query, key) for every preposition a line uses again: the preposition, where the model
    must predict its noun, and the noun that followed the preposition's first use, the one
    that comes again: where an induction head looks (lesson 12)."""
    first, pairs = {}, []
    for t, token in enumerate(list(tokens)[:-1]):
        if token in PREPOSITIONS:
            if token in first:
                pairs.append((t, first[token]))
            else:
                first[token] = t + 1
    return pairs


def excess_by_skill(
    losses: torch.Tensor, floor: torch.Tensor, skills, start: int = 0, stop: int | None = None
) -> dict[str, float]:
    """Mean loss minus floor, over all predictions and over each skill's own (lesson 01b).

    losses and floor: (N, T - 1), a model's loss and the floor at each prediction; skills:
    the labels floor_losses gave. Only predictions made at positions start..stop - 1 count.
    A skill with no prediction in the range is left out.
    """
    if losses.shape != floor.shape:
        raise ValueError(
            f"losses: expected the floor's shape {tuple(floor.shape)}, got {tuple(losses.shape)}"
        )
    gap = (losses.double() - floor)[:, start:stop]  # (N, T')
    labels = [row[start:stop] for row in skills]
    out = {"all": float(gap.mean())}
    for skill in SKILLS:
        mask = torch.tensor([[label == skill for label in row] for row in labels])
        if mask.any():
            out[skill] = float(gap[mask].mean())
    return out
