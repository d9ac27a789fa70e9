"""Lesson 01b_loss_and_floor's exercise: the next-token loss.

CONTRACT (fixed: later lessons and course_lib.mywork rely on it):
- next_token_cross_entropy(logits, ids) -> 0-d tensor in logits' dtype: logits (B, T, V)
  computed from ids (B, T); the mean, over the B * (T - 1) predictions, of
  -log softmax(logits[b, t])[ids[b, t + 1]] for t = 0 .. T - 2 (the last position predicts
  nothing here), as F.cross_entropy on those pairs; its gradient flows back to logits.

Every logits tensor in the cases requires a gradient, as a model's do, and the entry
`needs_grad`: a result computed under torch.no_grad() or detached fails
(course_lib.exercises.core).
"""

import torch
import torch.nn.functional as F

from course_lib.exercises.core import Bug, Case, Exercise
from course_lib.exercises.lesson01a_language_and_tokens import _leaf

LESSON = "01b_loss_and_floor"


def next_token_cross_entropy_reference(logits, ids):
    pairs = logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten()  # (B*(T-1), V), (B*(T-1),)
    return F.cross_entropy(*pairs)  # 0-d


# ---------------------------------------------------------------- next_token_cross_entropy


def _loss_cases() -> list[Case]:
    g = torch.Generator().manual_seed(2)

    def case(B, T, V, label, *, scale=2.0, dtype=torch.float32):
        return Case((_leaf(B, T, V, g=g, scale=scale, dtype=dtype),
                     torch.randint(V, (B, T), generator=g)), label=label)  # fmt: skip

    far = case(2, 5, 6, "logits 200 apart: most tokens' probabilities underflow to 0 in float32")
    logits, ids = far.args
    with torch.no_grad():
        logits[..., 0] += 200.0  # token 0 takes every prediction's probability ...
    ids.clamp_(min=1)  # ... and no prediction is of token 0
    return [
        case(2, 6, 5, "2 sequences of 6 tokens, 5 token ids"),
        case(1, 2, 4, "one sequence of 2 tokens: one prediction"),
        case(3, 5, 104, "the toy language's V = 104 tokens"),
        case(4, 8, 7, "T - 1 = V = 7: no shape error tells the positions from the tokens"),
        far,
        case(3, 4, 5, "float64 logits: the loss stays float64", dtype=torch.float64),
    ]


def _log_probs(logits, dim=-1):
    return logits - logits.logsumexp(dim, keepdim=True)  # (B, T, V)


def _scored(logp, targets):
    """-log p of each target: logp (B, T', V), targets (B, T') -> (B, T')."""
    return -logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)


NEXT_TOKEN_CROSS_ENTROPY = Exercise(
    name="next_token_cross_entropy",
    lesson=LESSON,
    reference=next_token_cross_entropy_reference,
    cases=_loss_cases,
    idea="the section 'The next-token loss': which position predicts which token, and the "
    "log-softmax worked by hand",
    bugs=(
        Bug(
            "not_shifted",
            lambda logits, ids: _scored(_log_probs(logits), ids).mean(),
            "your loss scores each position's logits on the token at that same position",
            "the targets are not shifted. The logits at position t predict the token at t + 1: "
            "T tokens make T - 1 predictions, and the last position's logits predict nothing "
            "here.",
        ),
        Bug(
            "targets_not_shifted",
            lambda logits, ids: _scored(_log_probs(logits[:, :-1]), ids[:, :-1]).mean(),
            "your loss scores the logits at t on the token at t: the logits are trimmed, the "
            "targets are not shifted",
            "you drop the last position's logits, but the targets must move on by one as well: "
            "they are the tokens from position 1 on.",
        ),
        Bug(
            "shifted_backwards",
            lambda logits, ids: _scored(_log_probs(logits[:, 1:]), ids[:, :-1]).mean(),
            "your loss scores the logits at t on the token at t - 1",
            "the shift goes the wrong way: the logits at t predict what comes next, the token "
            "at t + 1. Keep the logits of positions 0 .. T - 2 and the tokens of 1 .. T - 1.",
        ),
        Bug(
            "kept_wrong_end",
            lambda logits, ids: _scored(_log_probs(logits[:, 1:]), ids[:, 1:]).mean(),
            "your loss drops the first position's logits and keeps the last one's",
            "the last position is the one with nothing to predict: its next token is not in "
            "ids. The first position's logits predict the token at 1.",
        ),
        Bug(
            "summed_over_T",
            lambda logits, ids: _scored(_log_probs(logits[:, :-1]), ids[:, 1:]).sum(1).mean(),
            "your loss is T - 1 times the course's: it adds up each sequence's predictions",
            "you sum over the positions and average only over the batch. The loss is the mean "
            "over every prediction, so a longer sequence does not make it larger.",
        ),
        Bug(
            "summed",
            lambda logits, ids: _scored(_log_probs(logits[:, :-1]), ids[:, 1:]).sum(),
            "your loss is B * (T - 1) times the course's: it is a sum",
            "you add the losses of every prediction instead of averaging them.",
        ),
        Bug(
            "positions_axis",
            lambda logits, ids: _scored(_log_probs(logits[:, :-1], dim=1), ids[:, 1:]).mean(),
            "your log-probabilities are normalised over the positions, not over the tokens",
            "the softmax runs over the wrong axis: each prediction is a distribution over the "
            "V tokens, the last axis of logits, not over the T positions.",
        ),
        Bug(
            "log_of_softmax",
            lambda logits, ids: _scored(torch.softmax(logits[:, :-1], -1).log(), ids[:, 1:]).mean(),
            "your loss is inf where a right token's logit lies far below the largest",
            "the softmax of a logit 200 below the largest is exp(-200), less than the smallest "
            "float32, so it rounds to 0, and log(0) = -inf. Take the log before anything "
            "underflows: log softmax(s)_i = s_i - m - log(sum_j exp(s_j - m)), m the largest "
            "score, lesson 00's shift once more. torch.logsumexp(s) computes "
            "m + log(sum_j exp(s_j - m)), the last two terms together, so log softmax(s) = "
            "s - logsumexp(s).",
        ),
        Bug(
            "max_twice",
            lambda logits, ids: _scored(
                _log_probs(logits[:, :-1]) - logits[:, :-1].amax(-1, keepdim=True), ids[:, 1:]
            ).mean(),
            "your loss is too large by the mean of each prediction's largest logit",
            "you subtract the largest score m twice. torch.logsumexp(s) is "
            "m + log(sum_j exp(s_j - m)): it holds m already, so log softmax(s) = "
            "s - logsumexp(s), with no m of your own. (Shifting s by m first and taking the "
            "logsumexp of the shifted scores is right too: the shift cancels.)",
        ),
        Bug(
            "sign",
            lambda logits, ids: -_scored(_log_probs(logits[:, :-1]), ids[:, 1:]).mean(),
            "your loss is negative: a cross-entropy never is",
            "the loss is minus the log-probability of each right token. Without the minus, "
            "training would push the right tokens' probabilities down.",
        ),
        Bug(
            "python_number",
            lambda logits, ids: next_token_cross_entropy_reference(logits, ids).item(),
            "your loss is a Python number, not a tensor",
            "return the 0-d tensor itself: .item() and float() cut the loss off from autograd, "
            "and training calls backward on it.",
        ),
    ),
    hints=(
        "The result is one number, a 0-d tensor: the mean of B * (T - 1) losses, one per "
        "prediction, each minus the log-probability of the right next token.",
    ),
    needs_grad=True,
    # F.cross_entropy is the reference; F.nll_loss on a log-softmax, nn.CrossEntropyLoss and
    # nn.NLLLoss (which call them), and the course's own per-token losses (train.token_losses,
    # built on F.cross_entropy) compute it too
    forbidden=(
        (F, "cross_entropy"),
        (F, "nll_loss"),
        *((torch._C._nn, name) for name in ("cross_entropy_loss", "nll_loss", "nll_loss_nd")),
        (torch._C._nn, "nll_loss2d"),
    ),
    forbidden_hint="The check compares with torch's cross-entropy, so calling it (F.cross_entropy, "
    "nn.CrossEntropyLoss, or F.nll_loss on a log-softmax) proves nothing. Take each right "
    "token's log-probability yourself, as the example worked by hand does.",
)

EXERCISES = (NEXT_TOKEN_CROSS_ENTROPY,)
