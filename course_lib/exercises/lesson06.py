"""Lesson 06's exercises: your own model, the next-token loss, one training step.

CONTRACTS (fixed: the lesson and its checks rely on them):
- MyTransformer(vocab_size, d_model, num_heads, d_ff, num_layers), an nn.Module whose
  state_dict has exactly the names and shapes of a TinyTransformer's (rope-h4's, printed in
  the lesson); forward(idx (B, T) int64) -> logits (B, T, V): embedding, pre-norm blocks
  (causal multi-head attention with RoPE on q and k, feed-forward), final norm, head.
- next_token_loss(model, ids) -> 0-d tensor in the logits' dtype: the mean cross-entropy of
  predicting ids[:, t + 1] from ids[:, : t + 1], as course_lib.train.lm_loss.
- train_step(model, optimizer, ids, step, config) -> float: one step of course_lib.train.train
  (AdamW's lr set from the warm-up/cosine schedule at `step`, gradients of this batch only,
  global norm clipped to config.grad_clip unless None, optimizer.step); returns the loss.

A class is not a function of tensors, and a training step changes its arguments, so two
exercises are checked through an adapter that turns what the learner writes into a function
of tensors: `model_logits(MyTransformer)` builds the model, loads a checkpoint's weights and
returns its logits; `trajectory(train_step)` runs a few steps on a copy of a small model and
returns the losses, the parameters after the steps and the learning rates. The references
and the bugs are functions of the same arguments, so every entry stays data: reference,
cases, bugs.
"""

import copy
import math
from dataclasses import replace

import torch
import torch.nn.functional as F

from course_lib import data, places, train
from course_lib.attention import causal_mask
from course_lib.exercises.core import FAILED, Bug, Case, Exercise, Verdict, run
from course_lib.model import TinyTransformer, load_pretrained
from course_lib.positional import apply_rope
from course_lib.train import TrainConfig, learning_rate, lm_loss, train_step

ARGUMENTS = ("vocab_size", "d_model", "num_heads", "d_ff", "num_layers")
MAX_LEN = data.LONG_LEN  # the longest sequence a case feeds (rope-h4's max_len)

# ---------------------------------------------------------------- MyTransformer


def contract_of(model) -> dict:
    """A TinyTransformer's config as MyTransformer's keyword arguments."""
    return {name: getattr(model.config, name) for name in ARGUMENTS}


def transformer_logits(config, weights, idx):
    """The course's TinyTransformer built from config (MyTransformer's five arguments), with
    weights loaded, on ids idx (B, T): logits (B, T, V)."""
    model = TinyTransformer(**config, max_len=MAX_LEN)
    model.load_state_dict(weights)
    with torch.no_grad():
        return model.eval()(idx)  # (B, T, V)


def model_logits(cls):
    """The learner's class as a function of (config, weights, idx), like transformer_logits:
    build it with config's keyword arguments, load weights strictly, eval mode, logits."""

    def logits(config, weights, idx):
        try:
            model = cls(**config)
            model.load_state_dict(weights)
            with torch.no_grad():
                return model.eval()(idx)  # (B, T, V)
        except NotImplementedError as err:  # a stub in __init__ or forward: the class's own
            raise NotImplementedError("Exercise MyTransformer: write your code here") from err

    return logits


class _Written:
    """rope-h4's forward written out from the state_dict's tensors. Each bug below changes
    one step of it, the way a learner's forward might."""

    def __init__(self, config, weights):
        self.w, self.H = weights, config["num_heads"]
        self.layers = config["num_layers"]

    def __call__(self, idx):
        x = self.embed(idx)  # (B, T, D)
        mask = self.mask(idx.shape[1])
        for i in range(self.layers):
            x = self.block(i, x, mask)  # (B, T, D)
        return self.last(x)  # (B, T, V)

    def embed(self, idx):
        return self.w["embed.weight"][idx]  # (B, T, D)

    def mask(self, T):
        return causal_mask(T)  # (T, T)

    def rope(self, x):
        return apply_rope(x, torch.arange(x.shape[-2]))  # (B, H, T, d)

    def norm(self, name, x):
        return F.layer_norm(x, x.shape[-1:], self.w[f"{name}.weight"], self.w[f"{name}.bias"])

    def linear(self, name, x):
        return F.linear(x, self.w[f"{name}.weight"], self.w.get(f"{name}.bias"))

    def heads(self, x, prefix, mask):
        B, T, D = x.shape
        H, d = self.H, D // self.H
        q, k, v = self.linear(f"{prefix}.qkv", x).split(D, dim=-1)  # each (B, T, D)
        q, k, v = (t.view(B, T, H, d).transpose(1, 2) for t in (q, k, v))  # each (B, H, T, d)
        q, k = self.rope(q), self.rope(k)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d)  # (B, H, T, T)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        y = torch.softmax(scores, dim=-1) @ v  # (B, H, T, d)
        return self.linear(f"{prefix}.out", y.transpose(1, 2).reshape(B, T, D))  # (B, T, D)

    def activation(self, x):
        return F.gelu(x)

    def ff(self, prefix, x):
        hidden = self.activation(self.linear(f"{prefix}.0", x))  # (B, T, d_ff)
        return self.linear(f"{prefix}.2", hidden)  # (B, T, D)

    def block(self, i, x, mask):
        p = f"blocks.{i}"
        h = x + self.heads(self.norm(f"{p}.norm1", x), f"{p}.attn", mask)  # (B, T, D)
        return h + self.ff(f"{p}.ff", self.norm(f"{p}.norm2", h))  # (B, T, D)

    def last(self, x):
        return self.linear("head", self.norm("norm", x))  # (B, T, V)


class _NoMask(_Written):
    def mask(self, T):
        return None


class _NoRope(_Written):
    def rope(self, x):
        return x


class _RopeOnEmbeddings(_NoRope):
    def embed(self, idx):
        return apply_rope(super().embed(idx), torch.arange(idx.shape[1]))  # (B, T, D)


class _PostNorm(_Written):
    def block(self, i, x, mask):
        p = f"blocks.{i}"
        h = self.norm(f"{p}.norm1", x + self.heads(x, f"{p}.attn", mask))  # (B, T, D)
        return self.norm(f"{p}.norm2", h + self.ff(f"{p}.ff", h))  # (B, T, D)


class _NoResidual(_Written):
    def block(self, i, x, mask):
        p = f"blocks.{i}"
        h = self.heads(self.norm(f"{p}.norm1", x), f"{p}.attn", mask)  # (B, T, D)
        return self.ff(f"{p}.ff", self.norm(f"{p}.norm2", h))  # (B, T, D)


class _Norm1Twice(_Written):
    def norm(self, name, x):
        return super().norm(name.replace("norm2", "norm1"), x)


class _NoFinalNorm(_Written):
    def last(self, x):
        return self.linear("head", x)  # (B, T, V)


class _EmbeddingScaled(_Written):
    def embed(self, idx):
        return super().embed(idx) * math.sqrt(self.w["embed.weight"].shape[1])  # (B, T, D)


class _Relu(_Written):
    def activation(self, x):
        return F.relu(x)


class _GeluTanh(_Written):
    def activation(self, x):
        return F.gelu(x, approximate="tanh")


class _OneBlockTwice(_Written):
    """[block] * num_layers: one module in every slot, so loading leaves the last layer's
    weights in all of them."""

    def block(self, i, x, mask):
        return super().block(self.layers - 1, x, mask)


class _FourHeads(_Written):
    def __init__(self, config, weights):
        super().__init__(config, weights)
        self.H = 4


def _written(kind):
    def logits(config, weights, idx):
        with torch.no_grad():
            return kind(config, weights)(idx)  # (B, T, V)

    logits.__name__ = f"logits{kind.__name__}"
    return logits


def _random_weights(config, seed: int) -> dict:
    """A TinyTransformer's state_dict drawn from seed, norms drawn too (not 1 and 0), so that
    a forward that mixes up the norms shows it."""
    g = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        weights = TinyTransformer(**config, max_len=MAX_LEN).state_dict()
    for name, tensor in weights.items():
        if "norm" in name:
            base = 1.0 if name.endswith("weight") else 0.0
            tensor.copy_(base + 0.3 * torch.randn(tensor.shape, generator=g))
    return weights


def _model_cases() -> list[Case]:
    valid, long = data.load_split("valid"), data.load_split("long")
    cases = []
    for name, idx, label in (
        ("rope-h4", valid[:8], "rope-h4's weights, 8 validation sequences of 32 tokens"),
        ("rope-h4", valid[8:11, :1], "rope-h4, one token each (T = 1)"),
        ("rope-h4", long[:2], "rope-h4, 2 sequences of 128 tokens (its max_len)"),
        ("rope-h4", valid[11:12, :19], "rope-h4, one sequence of 19 tokens"),
        ("rope-h2", valid[:4], "rope-h2's weights: 2 heads"),
        ("places-h1", places.load_split("valid")[:4],
         "places-h1's weights: 1 layer, 1 head, d_ff 128, a vocabulary of 69"),
    ):  # fmt: skip
        model = load_pretrained(name)
        cases.append(Case((contract_of(model), model.state_dict(), idx), label=label))
    config = dict(vocab_size=len(data.VOCAB), d_model=32, num_heads=4, d_ff=48, num_layers=3)
    idx = torch.randint(len(data.VOCAB), (2, 24), generator=torch.Generator().manual_seed(6))
    cases.append(
        Case(
            (config, _random_weights(config, seed=6), idx),
            label="random weights: d_model 32, 4 heads of width 8, d_ff 48, 3 layers",
        )
    )
    return cases


MY_TRANSFORMER = Exercise(
    name="MyTransformer",
    lesson="06",
    reference=transformer_logits,
    cases=_model_cases,
    idea="the section 'Your model, from your own code': the cell that prints rope-h4's "
    "state_dict and the exercise's contract below it",
    bugs=(
        Bug(
            "no_mask",
            _written(_NoMask),
            "your logits differ at every position, even the first, which has no earlier token "
            "to look at",
            "position t sees the tokens after it: the attention runs without the causal mask. "
            "Make the mask for this T with your make_causal_mask and hand it to your multihead.",
        ),
        Bug(
            "no_rope",
            _written(_NoRope),
            "your logits match at the first position of each sequence and differ from the "
            "second on",
            "the attention never sees positions: RoPE is not applied. Your multihead takes a "
            "rope function and applies it to q and k; lesson 04's rope_heads is that function.",
        ),
        Bug(
            "rope_on_embeddings",
            _written(_RopeOnEmbeddings),
            "your logits match at the first position of each sequence and differ from the "
            "second on",
            "you rotate the token embeddings (B, T, D) once, as if RoPE were a position "
            "encoding added at the input. RoPE rotates each head's queries and keys "
            "(B, H, T, d) inside every attention layer: pass it to your multihead instead.",
        ),
        Bug(
            "post_norm",
            _written(_PostNorm),
            "your logits differ, though every weight loaded",
            "your blocks normalise after adding the residual (post-norm, the original 2017 "
            "block). rope-h4 is pre-norm: each sub-layer reads a normalised copy and its output "
            "is added to the stream unnormalised, which is what your prenorm_block does.",
        ),
        Bug(
            "no_residual",
            _written(_NoResidual),
            "your logits differ, though every weight loaded",
            "your blocks replace the stream with the sub-layers' outputs: the residual "
            "additions are missing. Your prenorm_block adds them; use it for every block.",
        ),
        Bug(
            "norm1_twice",
            _written(_Norm1Twice),
            "your logits differ a little, though every weight loaded",
            "both sub-layers of a block use norm1: the feed-forward's input should be "
            "normalised with norm2's weight and bias.",
        ),
        Bug(
            "no_final_norm",
            _written(_NoFinalNorm),
            "your logits differ, though every weight loaded",
            "the head reads the last block's output directly: the final layer norm "
            "(the weights named norm.weight and norm.bias) is skipped.",
        ),
        Bug(
            "embedding_scaled",
            _written(_EmbeddingScaled),
            "your logits differ, though every weight loaded",
            "you multiply the embeddings by sqrt(d_model), as the 2017 paper does. This model "
            "was trained with the embedding table used as it is.",
        ),
        Bug(
            "relu",
            _written(_Relu),
            "your logits differ, though every weight loaded",
            "the feed-forward uses ReLU; the course's uses GELU (the exact, erf one), as your "
            "feed_forward from lesson 05 does.",
        ),
        Bug(
            "gelu_tanh",
            _written(_GeluTanh),
            "your logits differ from the course's by a few thousandths",
            "the feed-forward uses GELU's tanh approximation; the model was trained with the "
            "exact (erf) GELU, torch's default.",
        ),
        Bug(
            "one_block_twice",
            _written(_OneBlockTwice),
            "your logits differ, though every weight loaded",
            "every layer holds the same block module (a list built by repeating one block), "
            "so loading the checkpoint writes each layer's weights into that one module and "
            "the last layer's win. Create a new block for each layer.",
        ),
        Bug(
            "four_heads",
            _written(_FourHeads),
            "your logits match rope-h4's but not a model with another number of heads",
            "the number of heads is fixed at 4 somewhere in your model: use the num_heads "
            "your __init__ was given (store it on self).",
        ),
    ),
    hints=(
        "Go in the order the names of the state_dict suggest: embed, then each block "
        "(norm1, attn, norm2, ff), then norm, then head. The final norm works on D-wide "
        "vectors, the head turns them into V logits, last.",
        "Test one piece at a time against rope_h4 (the course's model with the same "
        "weights): its embed, its blocks[0](x, mask) and its norm and head are there to "
        "compare with your steps.",
    ),
    # 1e-4: right models written another way (RoPE's angles from exp and log, an einsum
    # attention, layer norm with rsqrt) drift from the course's by 1.1e-5 to 1.3e-5 times
    # (1 + |logit|) on these cases, by kernel path (tests/test_exercises_lesson06.py); the
    # notebook's own solution stays below 1e-5 times that; the smallest bug here (tanh GELU)
    # is 3e-3 off
    atol=1e-4,
    rtol=1e-4,
)


def _listed(names, most: int = 6) -> str:
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def _fit_problem(cls, case: Case) -> str | None:
    """What keeps case's weights from loading into cls(**config), in words, or None (also
    when building the model fails: the check then reports that as a crash)."""
    config, weights, _ = case.args
    try:
        mine = cls(**config).state_dict()
    except Exception:  # a stub or a crash: run() reports it with the case
        return None
    missing = [n for n in weights if n not in mine]
    unexpected = [n for n in mine if n not in weights]
    wrong = [
        f"{n} is {tuple(mine[n].shape)}, expected {tuple(weights[n].shape)}"
        for n in weights
        if n in mine and mine[n].shape != weights[n].shape
    ]
    parts = []
    if missing:
        parts.append(f"missing from yours: {_listed(missing)}")
    if unexpected:
        parts.append(f"yours has names the checkpoint lacks: {_listed(unexpected)}")
    if wrong:
        parts.append(f"shapes differ: {_listed(wrong, 3)}")
    return "; ".join(parts) or None


def run_model(cls) -> Verdict:
    """Check a MyTransformer class: its state_dict's names and shapes first (for every case's
    checkpoint), then its logits against the course's model on every case."""
    if not isinstance(cls, type):
        kind = "an instance of" if isinstance(cls, torch.nn.Module) else "a"
        got = f"{kind} {type(cls).__name__}"
        return Verdict(
            False,
            f"MyTransformer: expected the class itself, got {got}. The check builds the model "
            "with each case's arguments: pass the class, check_my_transformer(MyTransformer).",
            (f"See {MY_TRANSFORMER.idea}.",),
            FAILED,
        )
    if issubclass(cls, TinyTransformer):
        return Verdict(
            False,
            "MyTransformer: your class is built on the course's TinyTransformer, so its numbers "
            "are the course's, not yours.",
            (
                "Derive it from torch.nn.Module and make every part from your own functions "
                "(earlier_work's list above): that model is the point of the exercise.",
                f"See {MY_TRANSFORMER.idea}.",
            ),
            FAILED,
            "subclass",
        )
    seen = set()
    for case in MY_TRANSFORMER.case_list():
        key = tuple(case.args[0].items())
        if key in seen:
            continue
        seen.add(key)
        problem = _fit_problem(cls, case)
        if problem:
            built = ", ".join(f"{k}={v}" for k, v in case.args[0].items())
            return Verdict(
                False,
                f"MyTransformer: the checkpoint's weights do not fit your model (case: "
                f"{case.label}; built with {built}): {problem}.",
                (
                    "A state_dict name is the path of attribute names from the model down to "
                    "one tensor, joined by dots; an nn.ModuleList or nn.Sequential names its "
                    "items 0, 1, 2, ... Make __init__ create exactly the names and shapes "
                    "printed above the exercise, no more: a tensor you register as a buffer "
                    "is saved too unless you pass persistent=False.",
                    "An nn.Linear(n_in, n_out) holds weight (n_out, n_in) and bias (n_out,); "
                    "bias=False leaves the bias out. The sizes come from the five arguments: "
                    "a fixed number somewhere shows up as a wrong shape or name in a case "
                    "with other arguments.",
                    f"See {MY_TRANSFORMER.idea}.",
                ),
                FAILED,
                "state_dict",
            )
    return run(MY_TRANSFORMER, model_logits(cls))


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
    valid, long = data.load_split("valid"), data.load_split("long")
    rope_h4 = load_pretrained("rope-h4")
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
    lesson="06",
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
)


# ---------------------------------------------------------------- train_step


def _set_lr(optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr


def course_step(model, optimizer, ids, step, config):
    """course_lib.train.train_step, returning only the loss, as the exercise's does."""
    return train_step(model, optimizer, ids, step, config).loss


def _step_with(*, lr=None, zero="before", clip="norm"):
    """course_step with one thing done differently (the bugs below)."""

    def step_fn(model, optimizer, ids, step, config):
        if lr is not None:
            _set_lr(optimizer, lr(step, config))
        loss = lm_loss(model, ids)
        if zero == "before":
            optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if zero == "after backward":
            optimizer.zero_grad(set_to_none=True)
        if config.grad_clip is not None and clip == "norm":
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        if config.grad_clip is not None and clip == "value":
            torch.nn.utils.clip_grad_value_(model.parameters(), config.grad_clip)
        optimizer.step()
        return loss.item()

    return step_fn


def _late_lr(model, optimizer, ids, step, config):
    loss = _step_with()(model, optimizer, ids, step, config)  # the optimizer's lr as it was
    _set_lr(optimizer, learning_rate(step, config))
    return loss


def _warmup_from_zero(step, config):
    if step < config.warmup_steps:
        return config.lr * step / config.warmup_steps
    return learning_rate(step, config)


def _recipe_numbers(step, config):
    return learning_rate(step, TrainConfig())  # the shipped recipe's steps, warm-up and peak


def _no_floor(step, config):
    if step < config.warmup_steps:
        return learning_rate(step, config)
    progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
    return config.lr * 0.5 * (1 + math.cos(math.pi * progress))


def _progress_from_zero(step, config):
    if step < config.warmup_steps:
        return learning_rate(step, config)
    return config.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / config.steps)))


def _trajectory(step_fn, model, batches, first_step, config):
    """Run step_fn on a copy of model with a fresh AdamW, one step per batch from first_step:
    (losses (n,) float64, every parameter after the last step (P,), lrs used (n,) float64)."""
    model = copy.deepcopy(model)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=config.lr, weight_decay=config.weight_decay
    )
    losses, lrs = [], []
    for i, ids in enumerate(batches):
        loss = step_fn(model, optimizer, ids, first_step + i, config)
        if not isinstance(loss, float):
            raise TypeError(
                "train_step should return the loss as a Python float (a tensor's .item()), "
                f"got {type(loss).__name__}"
            )
        losses.append(loss)
        lrs.append(optimizer.param_groups[0]["lr"])
    parameters = torch.cat([p.detach().flatten() for p in model.parameters()])  # (P,)
    return (
        torch.tensor(losses, dtype=torch.float64),
        parameters,
        torch.tensor(lrs, dtype=torch.float64),
    )


def trajectory(step_fn):
    """The learner's train_step as a function of (model, batches, first_step, config)."""

    def steps(model, batches, first_step, config):
        return _trajectory(step_fn, model, batches, first_step, config)

    return steps


def steps_reference(model, batches, first_step, config):
    return _trajectory(course_step, model, batches, first_step, config)


def _small_model():
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        return TinyTransformer(len(data.VOCAB), 16, 2, 32, 1, max_len=32)


def _step_cases() -> list[Case]:
    train_ids = data.load_split("train")
    drawn = train.batches(train_ids, 4, torch.Generator().manual_seed(8))

    def batches(n, length=17):
        return torch.stack([next(drawn) for _ in range(n)])[..., :length]  # (n, 4, length)

    model = _small_model()
    base = TrainConfig(steps=40, warmup_steps=10)  # the course's lr, weight decay, grad_clip 1
    tight = replace(base, grad_clip=0.05)
    hard = replace(base, lr=1e-2, weight_decay=0.1, grad_clip=0.02)
    never = replace(base, grad_clip=None)
    return [
        Case((model, batches(3), 0, tight), label="3 steps from step 0, in the warm-up, "
             "grad_clip 0.05"),
        Case((model, batches(2), 9, base), label="steps 9 and 10: the last of the warm-up, "
             "the first of the cosine"),
        Case((model, batches(3), 30, base), label="steps 30 to 32, late in the cosine"),
        Case((model, batches(3), 12, hard), label="grad_clip 0.02, lr 1e-2, weight_decay 0.1"),
        Case((model, batches(2), 5, never), label="grad_clip None: never clip"),
    ]  # fmt: skip


TRAIN_STEP = Exercise(
    name="train_step",
    lesson="06",
    reference=steps_reference,
    cases=_step_cases,
    idea="the section 'One training step': the schedule's formula and the cell that prints "
    "its values",
    bugs=(
        Bug(
            "no_zero_grad",
            trajectory(_step_with(lr=learning_rate, zero="never")),
            "your first step matches the course's, the second does not",
            "gradients from earlier steps are still there: backward adds to .grad, it does not "
            "overwrite it. Clear them every step, before backward (optimizer.zero_grad()).",
        ),
        Bug(
            "zeroed_after_backward",
            trajectory(_step_with(lr=learning_rate, zero="after backward")),
            "your parameters do not change at all",
            "you clear the gradients after backward and before optimizer.step(), so the step "
            "finds no gradients and skips every parameter.",
        ),
        Bug(
            "lr_not_set",
            trajectory(_step_with()),
            "your learning rate stays at config.lr",
            "the optimizer keeps the lr it was created with: set the schedule's value in each "
            "of optimizer.param_groups (a list of dicts with an 'lr' entry) before the step.",
        ),
        Bug(
            "lr_set_late",
            trajectory(_late_lr),
            "each step uses the learning rate of the step before",
            "you set the learning rate after optimizer.step(): the update has already used "
            "the old one. Set it first.",
        ),
        Bug(
            "warmup_from_zero",
            trajectory(_step_with(lr=_warmup_from_zero)),
            "your learning rate is one warm-up step behind (0 at step 0)",
            "the warm-up uses step / warmup_steps: step 0 then learns nothing. Steps count "
            "from 0, so the formula uses step + 1.",
        ),
        Bug(
            "recipe_numbers",
            trajectory(_step_with(lr=_recipe_numbers)),
            "your learning rate follows the shipped recipe's schedule, not this config's",
            "your schedule has fixed numbers in it (1000 steps, a warm-up of 100, a peak of "
            "0.003): take steps, warmup_steps and lr from config.",
        ),
        Bug(
            "no_floor",
            trajectory(_step_with(lr=_no_floor)),
            "your learning rate after the warm-up is too low, more so late in training",
            "your cosine decays to 0; the course's decays to lr / 10: 0.1 of the peak, plus "
            "0.9 of it times the cosine factor.",
        ),
        Bug(
            "cosine_from_step_0",
            trajectory(_step_with(lr=_progress_from_zero)),
            "your learning rate after the warm-up is too low",
            "your cosine's progress counts from step 0; it counts from the end of the warm-up: "
            "(step - warmup_steps) / (steps - warmup_steps).",
        ),
        Bug(
            "not_clipped",
            trajectory(_step_with(lr=learning_rate, clip=None)),
            "your parameters move differently once the gradient norm is above grad_clip",
            "optimizer.step() sees unclipped gradients: the clipping is missing, or it runs "
            "after the step, when the update is already made.",
        ),
        Bug(
            "clip_by_value",
            trajectory(_step_with(lr=learning_rate, clip="value")),
            "your parameters move differently once the gradients are large",
            "you clip each gradient entry to [-grad_clip, grad_clip]; the course scales all "
            "the gradients together so that their global norm is at most grad_clip "
            "(torch.nn.utils.clip_grad_norm_).",
        ),
    ),
    hints=(
        "Your step should do, in this order: set the lr, clear the gradients, compute the "
        "loss and backward, clip (unless grad_clip is None), optimizer.step().",
        "Compare your schedule with train.learning_rate(step, config) at a few steps, "
        "warm-up and cosine both.",
    ),
    atol=1e-6,
    rtol=1e-5,
)


def run_step(fn) -> Verdict:
    """Check a train_step: run it and the course's step from the same state on every case."""
    if not callable(fn):
        return run(TRAIN_STEP, fn)
    return run(TRAIN_STEP, trajectory(fn))


EXERCISES = (MY_TRANSFORMER, NEXT_TOKEN_LOSS, TRAIN_STEP)
