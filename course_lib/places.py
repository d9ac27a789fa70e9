"""A task where one position needs three places at once: several heads beat one (lesson 03).

Every sentence is three words and a question mark, and the answer after the "?" is a token that
names the three words in order:

    dog fish dog ? dog-fish-dog cat cat bird ? cat-cat-bird ...

The "?" itself says nothing, so the query there must fetch the words 3, 2 and 1 back, all at
once, and keep them apart: "dog-fish-dog" and "dog-dog-fish" are different answers. One head
hands on a single weighted average of the three words and leaves the untangling to the
feed-forward layer; H heads hand on H averages, each with its own weights. The words, the "?"
and the answers are the whole vocabulary; the words are random, so only the "?" and the
answers can be predicted.
"""

import itertools
import random

import torch
import torch.nn.functional as F

from course_lib._validation import positive_int
from course_lib.runtime import evaluating

WORDS = ("dog", "cat", "bird", "fish")
K = 3  # the "?" needs the K words before it
QUESTION = "?"
ANSWERS = tuple("-".join(words) for words in itertools.product(WORDS, repeat=K))
VOCAB: tuple[str, ...] = (*WORDS, QUESTION, *ANSWERS)
TOKEN_ID = {token: i for i, token in enumerate(VOCAB)}
SEQ_LEN = 32  # eight sentences of K + 2 = 5 tokens, the last one cut after its "?"
SPLITS = {"train": (4000, 1), "valid": (500, 2)}  # name -> (number of lines, seed)


def generate(num: int, seed: int) -> torch.Tensor:
    """`num` lines of SEQ_LEN token ids of the three-places task (lesson 03)."""
    positive_int("num", num)
    rng = random.Random(seed)
    lines = []
    for _ in range(num):
        line: list[int] = []
        while len(line) < SEQ_LEN:
            words = [rng.choice(WORDS) for _ in range(K)]
            line += [TOKEN_ID[w] for w in words]
            line += [TOKEN_ID[QUESTION], TOKEN_ID["-".join(words)]]
        lines.append(line[:SEQ_LEN])
    return torch.tensor(lines)  # (num, SEQ_LEN)


def load_split(name: str) -> torch.Tensor:
    """The task's "train" or "valid" split as ids (N, SEQ_LEN), regenerated from its seed."""
    if name not in SPLITS:
        raise ValueError(f"name: expected one of {tuple(SPLITS)}, got {name!r}")
    return generate(*SPLITS[name])


def question_positions(ids: torch.Tensor) -> torch.Tensor:
    """(N, T) bool: True at each "?" that has its answer inside the line (lesson 03)."""
    is_question = ids == TOKEN_ID[QUESTION]
    is_question[:, -1] = False  # its answer was cut off
    return is_question


@torch.no_grad()
def task_scores(model, ids: torch.Tensor) -> dict[str, float]:
    """Accuracy and mean loss of the model's answers after every "?" in ids (lesson 03)."""
    with evaluating(model):
        logits = model(ids)  # (N, T, V)
    asked = question_positions(ids)  # (N, T)
    answers = ids[:, 1:][asked[:, :-1]]  # (P,)
    at_questions = logits[asked]  # (P, V)
    return {
        "accuracy": float((at_questions.argmax(-1) == answers).float().mean()),
        "answer_loss": float(F.cross_entropy(at_questions, answers)),
    }


def place_scores(weights: list[torch.Tensor], ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """For each of the K places, (layers, H): mean attention mass from "?" to it (lesson 03)."""
    n, t = question_positions(ids).nonzero(as_tuple=True)  # each (P,)
    return {
        f"{back} back": torch.stack([w[n, :, t, t - back].mean(dim=0) for w in weights])
        for back in range(1, K + 1)
    }  # each (P, H) -> (layers, H)
