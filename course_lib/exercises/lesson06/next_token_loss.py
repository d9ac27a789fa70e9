"""Lesson 06's next_token_loss exercise."""

import torch
import torch.nn.functional as F

from course_lib.exercises.core import Bug, Case, Exercise
from course_lib.exercises.lesson06.inputs import case_inputs
from course_lib.train import lm_loss

# ---------------------------------------------------------------- next_token_loss


def next_token_loss_reference(model, ids):
    return lm_loss(model, ids)  # 0-d


class FixedLogits(torch.nn.Module):
    """A causal model whose logits the checker chooses: a table row for the token at t plus a
    row for the position t, in the table's dtype."""

    def __init__(self, vocab_size: int, length: int, seed: int, dtype=torch.float32):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.table = torch.nn.Parameter(3 * torch.randn(vocab_size, vocab_size, generator=g))
        self.position = torch.nn.Parameter(torch.randn(length, vocab_size, generator=g))
        self.to(dtype)

    def forward(self, idx):
        return self.table[idx] + self.position[: idx.shape[1]]  # (B, T, V)


def _loss_cases() -> list[Case]:
    given = case_inputs()
    valid, long, rope_h4 = given.valid, given.long, given.rope_h4
    g = torch.Generator().manual_seed(7)
    return [
        Case((rope_h4, valid[:8]), label="rope-h4, 8 validation sequences of 32 tokens"),
        Case((rope_h4, valid[8:11, :2]), label="rope-h4, 2 tokens each: one prediction"),
        Case((rope_h4, long[:1]), label="rope-h4, one sequence of 128 tokens"),
        Case(
            (FixedLogits(7, 12, seed=1), torch.randint(7, (5, 12), generator=g)),
            label="a small fixed model: 7 token ids, logits chosen by the checker",
        ),
        Case(
            (FixedLogits(5, 6, seed=2, dtype=torch.float64), torch.randint(5, (3, 6), generator=g)),
            label="a float64 model: the loss keeps the logits' dtype",
        ),
    ]  # fmt: skip


def _pairs(logits, targets):
    return logits.flatten(0, 1), targets.flatten()  # (B*T, V), (B*T,)


NEXT_TOKEN_LOSS = Exercise(
    name="next_token_loss",
    lesson="06_capstone_train_tiny_transformer",
    reference=next_token_loss_reference,
    cases=_loss_cases,
    idea="the section 'The next-token loss': which position predicts which token, and the "
    "uniform model's loss ln V",
    bugs=(
        Bug(
            "not_shifted",
            lambda model, ids: F.cross_entropy(*_pairs(model(ids), ids)),
            "your loss is far too high for a trained model",
            "each position is asked for the token it already holds: the targets are not "
            "shifted. The logits at position t predict the token at t + 1.",
        ),
        Bug(
            "shifted_backwards",
            lambda model, ids: F.cross_entropy(*_pairs(model(ids[:, 1:]), ids[:, :-1])),
            "your loss is far too high for a trained model",
            "the shift goes the wrong way: your logits at t are scored on the token at t - 1. "
            "The model reads the tokens before the last; the targets are the tokens after the "
            "first.",
        ),
        Bug(
            "kept_wrong_end",
            lambda model, ids: F.cross_entropy(*_pairs(model(ids)[:, 1:], ids[:, 1:])),
            "your loss is far too high for a trained model",
            "you trim the first position's logits and keep the last one's: the logits at t are "
            "then scored on the token at t itself. The last position is the one with nothing "
            "to predict.",
        ),
        Bug(
            "summed",
            lambda model, ids: F.cross_entropy(
                *_pairs(model(ids[:, :-1]), ids[:, 1:]), reduction="sum"
            ),
            "your loss grows with the batch size and the length",
            "you add the losses of every prediction instead of averaging them.",
        ),
        Bug(
            "softmax_first",
            lambda model, ids: F.cross_entropy(
                *_pairs(torch.softmax(model(ids[:, :-1]), dim=-1), ids[:, 1:])
            ),
            "your loss stays close to ln V whatever the model predicts",
            "you apply softmax before F.cross_entropy, which applies log-softmax itself: it "
            "expects the raw logits.",
        ),
        Bug(
            "no_log_softmax",
            lambda model, ids: F.nll_loss(*_pairs(model(ids[:, :-1]), ids[:, 1:])),
            "your loss can be negative",
            "F.nll_loss expects log-probabilities, and you hand it raw logits: it then "
            "returns minus the target's logit. F.cross_entropy takes the logits directly.",
        ),
        Bug(
            "mixed_order",
            lambda model, ids: F.cross_entropy(
                model(ids[:, :-1]).transpose(0, 1).flatten(0, 1), ids[:, 1:].flatten()
            ),
            "your loss is too high when the batch has more than one sequence",
            "the logits and the targets are flattened in different orders (one sequence by "
            "sequence, the other position by position), so most logits are scored on another "
            "sequence's token.",
        ),
    ),
    hints=(
        "F.cross_entropy wants the classes on axis 1: logits (N, V) with targets (N,), so "
        "flatten the batch and position axes of both the same way.",
        "Return the 0-d tensor itself, not a Python number: train_step calls backward on it.",
    ),
    atol=1e-5,
    rtol=1e-5,
    needs_grad=True,  # a loss under torch.no_grad() has the right number and cannot train
)
