"""Lesson 01b_loss_and_floor's first model: an embedding, then the output layer.

The model reads one token, the current one, and gives the logits of the next: a bigram model.
It is built from the learner's token_embedding and output_layer where they pass their checks
(the course's otherwise, and `yours_if_it_passes` says so), trained with course_lib.train's
AdamW loop on data/language/, and measured against the exact floor (course_lib.corpus).
Beside it, `count_bigram_losses`: the best any model that reads one token can do, from counting
which token follows which in the training split.
"""

from collections.abc import Callable

import torch
from torch import nn

from course_lib import corpus
from course_lib._validation import positive_int
from course_lib.exercises import by_name
from course_lib.exercises.core import NOT_IMPLEMENTED, run
from course_lib.runtime import one_thread
from course_lib.train import History, TrainConfig, train

D_MODEL = 64  # the width of the course's TinyTransformer
# 300 AdamW steps of 32 lines: about a second on one thread, and within 0.01 nats of the
# counted bigram's loss (tests/test_lesson01b_loss_and_floor.py)
RECIPE = TrainConfig(steps=300, lr=1e-2, warmup_steps=60, eval_every=25)


def yours_if_it_passes(name: str, fn) -> tuple[Callable, str]:
    """(function, whose): fn where it passes exercise `name`'s check, else the course's own
    function and why, in words (lesson 01b_loss_and_floor). The course's function itself, which
    earlier_work hands over for an exercise not written yet, is named the course's."""
    exercise = by_name(name)
    if fn is exercise.reference:
        return fn, "the course's"
    verdict = run(exercise, fn)
    if verdict.passed:
        return fn, "yours"
    why = "is not written yet" if verdict.status == NOT_IMPLEMENTED else "does not pass its check"
    return exercise.reference, f"the course's (yours {why})"


class Bigram(nn.Module):
    """Embedding, then output layer: the logits (B, T, V) of each next token from ids (B, T),
    each position from its own token alone (lesson 01b_loss_and_floor).

    `embedding(ids, weight)` and `output(h, weight)` compute the two layers from their (V, D)
    matrices, as the lesson's exercises do; the course's F.embedding and F.linear by default.
    """

    def __init__(
        self,
        vocab_size: int = len(corpus.VOCAB),
        d_model: int = D_MODEL,
        *,
        embedding: Callable | None = None,
        output: Callable | None = None,
    ):
        super().__init__()
        positive_int("vocab_size", vocab_size)
        positive_int("d_model", d_model)
        for name, fn in (("embedding", embedding), ("output", output)):
            if fn is not None and not callable(fn):
                raise TypeError(f"{name}: expected a function or None, got {type(fn).__name__}")
        self.embedding = embedding or by_name("token_embedding").reference
        self.output = output or by_name("output_layer").reference
        self.embed = nn.Embedding(vocab_size, d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        nn.init.normal_(self.embed.weight, std=0.1)  # as TinyTransformer's embedding starts
        # no blocks: course_lib.train reports one gradient norm per block, here none
        self.blocks = nn.ModuleList()

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.embedding(ids, self.embed.weight)  # (B, T) -> (B, T, D)
        return self.output(h, self.head.weight)  # (B, T, D) -> (B, T, V)


def train_bigram(model: Bigram, config: TrainConfig = RECIPE) -> History:
    """Train `model` on the training split with course_lib.train's loop, on one thread, seeded
    by config.seed; validated on the validation split every config.eval_every steps (lesson
    01b_loss_and_floor)."""
    if not isinstance(model, Bigram):
        raise TypeError(f"model: expected a Bigram, got {type(model).__name__}")
    train_ids, valid_ids = corpus.load_split("train"), corpus.load_split("valid")
    with one_thread():
        return train(model, train_ids, valid_ids, config, progress=False)


def counted_probabilities() -> torch.Tensor:
    """(V, V) float64: row a holds how often each token follows token a in the training split,
    as a share of a's successors (0 where a never comes before another token) (lesson
    01b_loss_and_floor)."""
    train_ids = corpus.load_split("train")
    V = len(corpus.VOCAB)
    counts = torch.zeros(V, V, dtype=torch.float64)
    pairs = train_ids[:, :-1].flatten(), train_ids[:, 1:].flatten()
    counts.index_put_(pairs, torch.ones(pairs[0].numel(), dtype=torch.float64), accumulate=True)
    return counts / counts.sum(dim=1, keepdim=True).clamp(min=1)  # (V, V): row = current token


def count_bigram_losses(split: str = "valid") -> torch.Tensor:
    """(N, T - 1): the loss of every prediction of a split under the counted bigram
    (counted_probabilities), float64. Every pair of tokens in the validation split occurs in
    the training split too, so no prediction there has probability 0 (lesson
    01b_loss_and_floor)."""
    ids = corpus.load_split(split)
    return -counted_probabilities()[ids[:, :-1], ids[:, 1:]].log()  # (N, T - 1)
