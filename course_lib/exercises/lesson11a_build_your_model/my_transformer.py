"""Lesson 11a's MyTransformer: a trained model's weights in your class, logits compared."""

import functools
import math

import torch
import torch.nn.functional as F

from course_lib import corpus, sliding_window
from course_lib.attention import causal_mask
from course_lib.block import TransformerBlock
from course_lib.exercises.core import FAILED, Bug, Case, Exercise, Verdict, run
from course_lib.exercises.lesson11a_build_your_model.stand_in import ARGUMENTS, MAX_LEN, StandIn
from course_lib.exercises.lesson11a_build_your_model.your_functions import unused_functions
from course_lib.exercises.stub import attempt, not_written
from course_lib.model import TinyTransformer
from course_lib.multihead import MultiHeadAttention
from course_lib.positional import apply_rope


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

    def built_and_run(config, weights, idx):
        model = cls(**config)
        model.load_state_dict(weights)
        with torch.no_grad():
            return model.eval()(idx)  # (B, T, V)

    def logits(config, weights, idx):
        tried = attempt("MyTransformer", built_and_run, config, weights, idx)
        if tried.missing is not None:  # a stub in __init__ or forward: the class's own
            raise not_written("MyTransformer")
        if tried.error is not None:
            raise tried.error
        return tried.value

    return logits


class _Written:
    """The base model's forward written out from the state_dict's tensors. Each bug below changes
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


@functools.cache
def _shipped():
    """The base model of seed 0 (lesson 11a's 'Your class from here on'), loaded once per
    process with the random state left as it was."""
    from course_lib.variants import load_trained

    with torch.random.fork_rng(devices=[]):
        return load_trained("base", 0)


def _model_cases() -> list[Case]:
    shipped = _shipped()
    valid, long = corpus.load_split("valid"), corpus.load_split("long")
    base = contract_of(shipped)
    cases = [
        Case((base, shipped.state_dict(), idx), label=label)
        for idx, label in (
            (valid[:8], "the shipped base model's weights, 8 validation lines of 32 tokens"),
            (valid[8:11, :1], "the base model, one token each (T = 1)"),
            (long[:2], "the base model, 2 lines of 128 tokens (its max_len)"),
            (valid[11:12, :19], "the base model, one line of 19 tokens"),
        )
    ]
    V = len(corpus.VOCAB)
    g = torch.Generator().manual_seed(6)
    for seed, config, label in (
        (6, dict(vocab_size=V, d_model=64, num_heads=2, d_ff=256, num_layers=2),
         "random weights: 2 heads of width 32"),
        (7, dict(vocab_size=69, d_model=64, num_heads=1, d_ff=128, num_layers=1),
         "random weights: 1 layer, 1 head, d_ff 128, a vocabulary of 69"),
        (8, dict(vocab_size=V, d_model=32, num_heads=4, d_ff=48, num_layers=3),
         "random weights: d_model 32, 4 heads of width 8, d_ff 48, 3 layers"),
    ):  # fmt: skip
        idx = torch.randint(config["vocab_size"], (2, 24), generator=g)
        cases.append(Case((config, _random_weights(config, seed), idx), label=label))
    return cases


MY_TRANSFORMER = Exercise(
    name="MyTransformer",
    lesson="11a_build_your_model",
    reference=transformer_logits,
    stand_in=StandIn,
    cases=_model_cases,
    idea="the section 'Your model': the cell that prints the base model's state_dict and "
    "the exercise's contract below it",
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
            "rope function and applies it to q and k; lesson 07a's rope_heads is that function.",
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
            "block). The base model is pre-norm: each sub-layer reads a normalised copy and its "
            "output is added to the stream unnormalised, which is what your prenorm_block does.",
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
            "feed_forward does.",
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
            "your logits match the base model's but not a model with another number of heads",
            "the number of heads is fixed at 4 somewhere in your model: use the num_heads "
            "your __init__ was given (store it on self).",
        ),
    ),
    hints=(
        "Go in the order the names of the state_dict suggest: embed, then each block "
        "(norm1, attn, norm2, ff), then norm, then head. The final norm works on D-wide "
        "vectors, the head turns them into V logits, last.",
        "Test one piece at a time against `shipped` (the course's model with the same "
        "weights): its embed, its blocks[0](x, mask) and its norm and head are there to "
        "compare with your steps.",
    ),
    # the course's model and its blocks: a class that builds a TinyTransformer or its blocks (to
    # borrow their modules) or runs the course's forward passes (the model's, a block's, lesson
    # 15's windowed one) computes the course's numbers, not yours
    forbidden=(
        (TinyTransformer, "__init__"),
        (TinyTransformer, "forward"),
        (TransformerBlock, "forward"),
        (MultiHeadAttention, "forward"),
        (TransformerBlock, "__init__"),
        (MultiHeadAttention, "__init__"),
        (sliding_window, "windowed_logits"),
    ),
    forbidden_hint="Your class builds or runs the course's model (a TinyTransformer, its "
    "TransformerBlock or MultiHeadAttention, or a forward of another lesson's such as "
    "sliding_window.windowed_logits): its logits are then the course's, not yours. Make "
    "the submodules yourself (nn.Embedding, nn.Linear, nn.LayerNorm, nn.ModuleList, ...), to "
    "hold the weights, and compute the forward pass with your functions in mine.",
    # 1e-4: right models written another way (RoPE's angles from exp and log, an einsum
    # attention, layer norm with rsqrt) drift from the course's by 1.9e-5 to 2.2e-5 times
    # (1 + |logit|) on these cases, by kernel path (tests/test_exercises_lesson11a_*.py);
    # every bug here is told apart from the reference at this tolerance (no bug is dead)
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
    verdict = run(MY_TRANSFORMER, model_logits(cls))
    if not verdict.passed:
        return verdict
    never, idle = unused_functions(cls, MY_TRANSFORMER.case_list()[-1])
    if never:
        listed = ", ".join(never)
        return Verdict(
            False,
            f"MyTransformer: your logits are right, but building and running your class never "
            f"calls {listed}: the contract makes every computation one of your functions in "
            "mine.",
            (
                f"Call mine.{never[0]} where your forward now computes that step another way "
                "(a module called directly, such as self.embed(idx), or a torch function): "
                "the modules only hold the weights. Functions that want a function of one "
                "tensor take a partial or a lambda around yours.",
                f"See {MY_TRANSFORMER.idea}.",
            ),
            FAILED,
            "not_your_functions",
        )
    if idle:
        listed = ", ".join(idle)
        return Verdict(
            False,
            f"MyTransformer: your logits are right, but they do not depend on what {listed} "
            "return: the check changed those results as they were returned and your logits "
            "stayed the same. Your class calls them, then computes its logits another way; the "
            "contract makes every computation one of your functions in mine.",
            (
                f"Use what mine.{idle[0]} returns as the input of the next step, the way the "
                "table of calls chains them: embedding, blocks, final norm, output layer. The "
                "modules only hold the weights.",
                f"See {MY_TRANSFORMER.idea}.",
            ),
            FAILED,
            "results_unused",
        )
    return verdict
