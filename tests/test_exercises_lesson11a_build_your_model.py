"""Lesson 11a's MyTransformer: learner-style mistakes get their hint.

The learner-style code below is written the way a learner would write it, not taken from the
bug list: each test names the hint it expects.
"""

import ast
import functools
import math
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_lib import corpus, variants
from course_lib.checks import check_my_transformer
from course_lib.exercises import by_name
from course_lib.exercises.core import PASSED
from course_lib.exercises.lesson11a_build_your_model import MY_TRANSFORMER, model_logits, run_model
from course_lib.model import TinyTransformer
from helpers import verdict

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "11a_build_your_model.ipynb"
EARLIER = ("token_embedding", "output_layer", "make_causal_mask", "multihead", "rope_heads",
           "feed_forward", "prenorm_block", "layer_norm")  # fmt: skip


def course_functions() -> SimpleNamespace:
    """What `earlier_work` hands a learner who skipped lessons 01-09: the course's functions."""
    return SimpleNamespace(**{name: by_name(name).reference for name in EARLIER})


def hand_written_functions() -> SimpleNamespace:
    """Lessons 01-09's functions as a learner writes them: softmax and layer norm by hand,
    no fused kernels (the course's references may call torch's)."""

    def attention(q, k, v, mask=None):
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(dim=-1)
        return weights @ v, weights

    def multihead(x, qkv, out, num_heads, mask=None, rope=None):
        B, T, D = x.shape
        q, k, v = (t.view(B, T, num_heads, -1).transpose(1, 2) for t in qkv(x).chunk(3, -1))
        if rope is not None:
            q, k = rope(q), rope(k)
        y, _ = attention(q, k, v, mask)
        return out(y.transpose(1, 2).reshape(B, T, D))

    def layer_norm(x, weight, bias, eps=1e-5):
        mean, var = x.mean(-1, keepdim=True), x.var(-1, unbiased=False, keepdim=True)
        return (x - mean) / torch.sqrt(var + eps) * weight + bias

    def token_embedding(idx, weight):
        return weight[idx]

    def output_layer(x, weight):
        return x @ weight.T

    def make_causal_mask(T):
        return torch.ones(T, T).tril().bool()

    def feed_forward(x, lin1, lin2):
        return lin2(F.gelu(lin1(x)))

    return SimpleNamespace(
        token_embedding=token_embedding,
        output_layer=output_layer,
        make_causal_mask=make_causal_mask,
        multihead=multihead,
        rope_heads=by_name("rope_heads").reference,
        feed_forward=feed_forward,
        prenorm_block=by_name("prenorm_block").reference,
        layer_norm=layer_norm,
    )


def notebook_solutions(mine=None) -> SimpleNamespace:
    """MyTransformer as lesson 11a's exercise cell defines it, on `mine` (default: the course's
    functions from the earlier lessons)."""
    namespace = {"torch": torch, "nn": nn, "F": F, "math": math, "partial": partial,
                 "mine": mine or course_functions()}  # fmt: skip
    found = []
    for cell in nbformat.read(NOTEBOOK, as_version=4).cells:
        if cell.metadata.get("nbgrader", {}).get("solution"):
            exec(compile(ast.parse(cell.source), str(NOTEBOOK), "exec"), namespace)
            found.append(cell.metadata["nbgrader"]["grade_id"])
    assert found == ["MyTransformer"], found
    return SimpleNamespace(MyTransformer=namespace["MyTransformer"])


SOLVED = notebook_solutions()
mine = course_functions()  # the learner-style code below calls mine.*, as the notebook does


def _markdown() -> str:
    cells = nbformat.read(NOTEBOOK, as_version=4).cells
    return "\n".join(c.source for c in cells if c.cell_type == "markdown")


# ---------------------------------------------------------------- the solution, the stubs


def test_the_lessons_solution_on_the_courses_earlier_functions_passes(capsys):
    # on the lessons' own earlier functions, as a learner's copy gets them, it is
    # tests/test_every_exercise.py's
    assert verdict(check_my_transformer, SOLVED.MyTransformer, capsys).startswith("PASS")


def test_the_solution_on_hand_written_functions_passes():
    assert run_model(notebook_solutions(mine=hand_written_functions()).MyTransformer).passed


def test_right_functions_written_another_way_pass(measure):
    """Float32 arithmetic in another order drifts: RoPE's angles from exp and log, attention by
    einsum, layer norm with rsqrt still pass."""

    def rope_heads(x):
        T, d = x.shape[-2:]
        theta = torch.exp(-math.log(10000.0) * torch.arange(0, d, 2) / d)  # (d/2,)
        angle = torch.arange(T)[:, None] * theta  # (T, d/2)
        even, odd = x[..., 0::2], x[..., 1::2]
        turned = (even * angle.cos() - odd * angle.sin(), even * angle.sin() + odd * angle.cos())
        return torch.stack(turned, dim=-1).flatten(-2)

    def multihead(x, qkv, out, num_heads, mask=None, rope=None):
        B, T, D = x.shape
        q, k, v = (t.reshape(B, T, num_heads, -1).permute(0, 2, 1, 3) for t in qkv(x).split(D, -1))
        if rope is not None:
            q, k = rope(q), rope(k)
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
        if mask is not None:
            scores = torch.where(mask, scores, float("-inf"))
        y = torch.einsum("bhqk,bhkd->bhqd", scores.softmax(-1), v)
        return out(y.permute(0, 2, 1, 3).reshape(B, T, D))

    def layer_norm(x, weight, bias, eps=1e-5):
        centred = x - x.mean(-1, keepdim=True)
        return centred * torch.rsqrt(centred.pow(2).mean(-1, keepdim=True) + eps) * weight + bias

    mine = hand_written_functions()
    mine.rope_heads, mine.multihead, mine.layer_norm = rope_heads, multihead, layer_norm
    solved = notebook_solutions(mine=mine).MyTransformer
    assert run_model(solved).passed
    # the reason for a tolerance of 1e-4 * (1 + |logit|): this right model drifts by more than
    # 1e-5 * (1 + |logit|) on the check's cases (1.9e-05 AVX-512, 2.2e-05 generic)
    drift = 0.0
    for case in MY_TRANSFORMER.case_list():
        expected = MY_TRANSFORMER.reference(*case.args)
        gap = (model_logits(solved)(*case.args) - expected).abs()
        drift = max(drift, float((gap / (1 + expected.abs())).max()))
    assert 1e-5 < measure("written another way: largest |difference| / (1 + |logit|)", drift)
    assert drift < MY_TRANSFORMER.atol == MY_TRANSFORMER.rtol


def test_a_model_whose_forward_is_still_a_stub_is_not_implemented_yet(capsys):
    # a class of stubs, as the learner's copy first holds it, is tests/test_every_exercise.py's
    class HalfWritten(SOLVED.MyTransformer):  # __init__ written, forward not yet
        def forward(self, idx):
            raise NotImplementedError("Exercise forward: write your code here")

    out = verdict(check_my_transformer, HalfWritten, capsys)
    assert out.startswith("TRY AGAIN") and "not implemented yet" in out, out


def test_the_last_hint_points_to_a_section_the_lesson_has():
    text = _markdown()
    assert "## Your model" in text and "### Exercise: `MyTransformer`" in text
    assert 'print(f"{name:26s}' in "".join(
        c.source for c in nbformat.read(NOTEBOOK, as_version=4).cells
    )  # the cell that prints the base model's state_dict, named by the last hint
    assert by_name("MyTransformer").idea.split("'")[1] in text


# ---------------------------------------------------------------- MyTransformer


class Written(nn.Module):
    """A learner's MyTransformer with plain submodules; subclasses change one thing."""

    layers_of = None  # a fixed number of layers, when a learner hard-codes it

    def __init__(self, vocab_size, d_model, num_heads, d_ff, num_layers):
        super().__init__()
        self.heads = num_heads
        self.embed = nn.Embedding(vocab_size, d_model)
        self.blocks = nn.ModuleList(
            self.make_block(d_model, d_ff) for _ in range(self.layers_of or num_layers)
        )
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)

    def make_block(self, d_model, d_ff):
        block = nn.Module()
        block.attn = nn.Module()
        block.attn.qkv = nn.Linear(d_model, 3 * d_model)
        block.attn.out = nn.Linear(d_model, d_model)
        block.norm1, block.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        block.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        return block

    def attention(self, b, h, mask):
        return mine.multihead(h, b.attn.qkv, b.attn.out, self.heads, mask, mine.rope_heads)

    def forward(self, idx):
        mask = mine.make_causal_mask(idx.shape[1])
        x = self.embed(idx)
        for b in self.blocks:
            x = mine.prenorm_block(
                x,
                lambda h: self.attention(b, h, mask),  # noqa: B023 (called at once)
                b.ff,
                b.norm1,
                b.norm2,
            )
        return self.head(self.norm(x))


def test_plain_modules_in_place_of_your_functions_are_refused_with_their_names():
    """torch's own Embedding, LayerNorm, Sequential and Linear called as modules compute the right
    logits, but the contract makes every computation one of the learner's functions."""
    result = run_model(Written)
    assert not result.passed and result.bug == "not_your_functions", result.message
    assert "never calls token_embedding, feed_forward, layer_norm, output_layer" in result.message
    assert result.steps[0].startswith("Call mine.token_embedding where your forward")
    assert result.steps[-1] == f"See {MY_TRANSFORMER.idea}."


def test_your_functions_through_lambdas_pass():
    """The same class with every step one of the learner's functions, some through lambdas."""

    class Yours(Written):
        def forward(self, idx):
            mask = mine.make_causal_mask(idx.shape[1])
            x = mine.token_embedding(idx, self.embed.weight)
            for b in self.blocks:
                x = mine.prenorm_block(
                    x,
                    lambda h: self.attention(b, h, mask),  # noqa: B023 (called at once)
                    lambda h: mine.feed_forward(h, b.ff[0], b.ff[2]),  # noqa: B023
                    lambda h: mine.layer_norm(h, b.norm1.weight, b.norm1.bias),  # noqa: B023
                    lambda h: mine.layer_norm(h, b.norm2.weight, b.norm2.bias),  # noqa: B023
                )
            x = mine.layer_norm(x, self.norm.weight, self.norm.bias)
            return mine.output_layer(x, self.head.weight)

    assert run_model(Yours).status == PASSED


def _state_dict_verdict(cls):
    result = run_model(cls)
    assert not result.passed and result.bug == "state_dict", result.message
    return result


def test_wrong_names_are_listed_not_raised():
    class NamedFeedForward(Written):
        def make_block(self, d_model, d_ff):
            block = super().make_block(d_model, d_ff)
            block.ff = nn.ModuleDict({"lin1": block.ff[0], "lin2": block.ff[2]})
            return block

    result = _state_dict_verdict(NamedFeedForward)
    assert "missing from yours: blocks.0.ff.0.weight" in result.message
    assert "checkpoint lacks: blocks.0.ff.lin1.weight" in result.message
    assert "case: the shipped base model" in result.message
    assert "path of attribute names" in result.steps[0]
    assert result.steps[-1].startswith("See the section 'Your model'")


def test_a_head_with_a_bias_and_a_saved_mask_buffer_are_names_too():
    class HeadBias(Written):
        def __init__(self, **arguments):
            super().__init__(**arguments)
            self.head = nn.Linear(self.head.in_features, self.head.out_features)

    assert "checkpoint lacks: head.bias" in _state_dict_verdict(HeadBias).message

    class MaskBuffer(Written):
        def __init__(self, **arguments):
            super().__init__(**arguments)
            self.register_buffer("mask", torch.ones(128, 128).tril().bool())

    result = _state_dict_verdict(MaskBuffer)
    assert "checkpoint lacks: mask" in result.message
    assert "persistent=False" in result.steps[0]


def test_a_transposed_weight_is_a_shape_problem():
    class Transposed(Written):
        def __init__(self, vocab_size, d_model, **arguments):
            super().__init__(vocab_size, d_model, **arguments)
            self.head = nn.Linear(vocab_size, d_model, bias=False)  # (D, V), not (V, D)

    result = _state_dict_verdict(Transposed)
    assert "shapes differ: head.weight is (64, 104), expected (104, 64)" in result.message


def test_hard_coded_sizes_fail_in_the_case_that_varies_them():
    class TwoLayers(Written):
        layers_of = 2

    result = _state_dict_verdict(TwoLayers)
    assert "1 layer, 1 head" in result.message and "blocks.1.attn.qkv.weight" in result.message

    class FixedWidth(Written):
        def make_block(self, d_model, d_ff):
            return super().make_block(d_model, 256)

    result = _state_dict_verdict(FixedWidth)
    assert (
        "1 layer, 1 head" in result.message
        and "blocks.0.ff.0.weight is (256, 64)" in result.message
    )

    class FourHeads(Written):
        def attention(self, b, h, mask):
            return mine.multihead(h, b.attn.qkv, b.attn.out, 4, mask, mine.rope_heads)

    result = run_model(FourHeads)
    assert result.bug == "four_heads" and "2 heads of width 32" in result.message
    assert "store it on self" in result.steps[0]


@pytest.mark.parametrize(
    "change, bug",
    [
        ("no mask", "no_mask"),
        ("no rope", "no_rope"),
        ("rope on embeddings", "rope_on_embeddings"),
        ("post-norm", "post_norm"),
        ("no residual", "no_residual"),
        ("norm1 twice", "norm1_twice"),
        ("no final norm", "no_final_norm"),
        ("scaled embedding", "embedding_scaled"),
        ("relu", "relu"),
        ("tanh gelu", "gelu_tanh"),
        ("one block repeated", "one_block_twice"),
    ],
)
def test_learner_style_forward_mistakes_get_their_hint(change, bug):
    class Mistaken(Written):
        def make_block(self, d_model, d_ff):
            block = super().make_block(d_model, d_ff)
            if change == "relu":
                block.ff[1] = nn.ReLU()
            if change == "tanh gelu":
                block.ff[1] = nn.GELU(approximate="tanh")
            return block

        def __init__(self, vocab_size, d_model, num_heads, d_ff, num_layers):
            super().__init__(vocab_size, d_model, num_heads, d_ff, num_layers)
            if change == "one block repeated":
                self.blocks = nn.ModuleList([self.make_block(d_model, d_ff)] * num_layers)

        def forward(self, idx):
            T = idx.shape[1]
            mask = None if change == "no mask" else mine.make_causal_mask(T)
            rope = None if change in ("no rope", "rope on embeddings") else mine.rope_heads
            x = self.embed(idx)
            if change == "scaled embedding":
                x = x * math.sqrt(x.shape[-1])
            if change == "rope on embeddings":
                x = mine.rope_heads(x)
            for b in self.blocks:
                attn = partial(mine.multihead, qkv=b.attn.qkv, out=b.attn.out,
                               num_heads=self.heads, mask=mask, rope=rope)  # fmt: skip
                norm2 = b.norm1 if change == "norm1 twice" else b.norm2
                if change == "post-norm":
                    x = b.norm1(x + attn(x))
                    x = norm2(x + b.ff(x))
                elif change == "no residual":
                    x = b.ff(norm2(attn(b.norm1(x))))
                else:
                    x = mine.prenorm_block(x, attn, b.ff, b.norm1, norm2)
            return self.head(x if change == "no final norm" else self.norm(x))

    result = run_model(Mistaken)
    assert not result.passed and result.bug == bug, result.message


def test_head_before_the_final_norm_is_reported_as_the_crash_it_is():
    class HeadFirst(Written):
        def forward(self, idx):
            mask = mine.make_causal_mask(idx.shape[1])
            x = self.embed(idx)
            for b in self.blocks:
                x = mine.prenorm_block(
                    x,
                    lambda h: self.attention(b, h, mask),  # noqa: B023 (called at once)
                    b.ff,
                    b.norm1,
                    b.norm2,
                )
            return self.norm(self.head(x))  # LayerNorm(D) on V logits

    result = run_model(HeadFirst)
    assert "raised RuntimeError" in result.message
    assert any("the head turns them into V logits, last" in s for s in result.steps)


def test_float64_logits_and_an_instance_are_named(capsys):
    class Doubles(Written):
        def forward(self, idx):
            return super().forward(idx).double()

    result = run_model(Doubles)
    assert "expected dtype torch.float32, got torch.float64" in result.message
    out = verdict(check_my_transformer, Written(104, 64, 4, 256, 2), capsys)
    assert "expected the class itself, got an instance of Written" in out


# ---------------------------------------------------------------- the cells after the exercise


def _your_model(cls):
    """What lessons 11a and 11b build from the learner's class: (model, whose), the class only
    once it has passed its check (the lesson's `passed = run_model(MyTransformer).passed`)."""
    from course_lib import capstone

    weights = variants.load_trained("base", 0).state_dict()
    return capstone.your_model(cls, run_model(cls).passed, weights)


class _HalfWritten(nn.Module):
    def __init__(self, vocab_size, d_model, num_heads, d_ff, num_layers):
        super().__init__()
        raise NotImplementedError("Exercise MyTransformer: write your code here")


class _NoMask(Written):
    """Loads and runs, but attends to the future: it fails its check."""

    def forward(self, idx):
        x = mine.token_embedding(idx, self.embed.weight)
        for b in self.blocks:
            attn = partial(mine.multihead, qkv=b.attn.qkv, out=b.attn.out, num_heads=self.heads)
            x = mine.prenorm_block(x, attn, b.ff, b.norm1, b.norm2)
        return mine.output_layer(self.norm(x), self.head.weight)


@pytest.mark.parametrize("cls", [_HalfWritten, _NoMask], ids=["stub", "runs but fails"])
def test_the_course_stands_in_until_your_class_passes_its_check(cls):
    model, whose = _your_model(cls)
    assert type(model) is TinyTransformer
    assert whose == "the course's TinyTransformer (your MyTransformer has not passed its check)"


def test_a_class_that_passed_is_used():
    model, whose = _your_model(SOLVED.MyTransformer)
    assert type(model) is SOLVED.MyTransformer and whose == "your MyTransformer"
    shipped = variants.load_trained("base", 0)
    ids = corpus.load_split("valid")[:4]
    with torch.no_grad():
        assert (model.eval()(ids) - shipped(ids)).abs().max() < 1e-4


def test_a_subclass_of_the_courses_model_is_refused():
    class MyTransformer(TinyTransformer):  # a learner's shortcut: the course's model renamed
        def __init__(self, vocab_size, d_model, num_heads, d_ff, num_layers):
            super().__init__(vocab_size, d_model, num_heads, d_ff, num_layers, max_len=128)

    verdict = run_model(MyTransformer)
    assert not verdict.passed and verdict.bug == "subclass"
    assert "built on the course's TinyTransformer" in verdict.message


def _refused(cls, called):
    result = run_model(cls)
    assert not result.passed and result.bug == "forbidden", result.message
    assert f"calls {called}" in result.message
    assert result.steps[0] == MY_TRANSFORMER.forbidden_hint
    return result


def test_a_module_that_borrows_a_tiny_transformers_parts_and_forward_is_refused():
    """Not a subclass: it builds the course's model, takes its modules, runs its forward."""

    class MyTransformer(nn.Module):
        def __init__(self, vocab_size, d_model, num_heads, d_ff, num_layers):
            super().__init__()
            inner = TinyTransformer(vocab_size, d_model, num_heads, d_ff, num_layers, 128)
            self.embed, self.blocks, self.norm, self.head = (inner.embed, inner.blocks,
                                                             inner.norm, inner.head)  # fmt: skip
            self.register_buffer("causal", inner.causal, persistent=False)
            self.config = inner.config

        def forward(self, idx):
            return TinyTransformer.forward(self, idx)

    _refused(MyTransformer, "TinyTransformer.__init__")


def test_a_module_that_runs_the_courses_blocks_is_refused():
    """Its own embedding, norm and head, but the course's TransformerBlock for every layer:
    the names fit, the blocks' forward is the course's."""
    from course_lib.block import TransformerBlock
    from course_lib.positional import RotaryEmbedding

    class MyTransformer(nn.Module):
        def __init__(self, vocab_size, d_model, num_heads, d_ff, num_layers):
            super().__init__()
            rope = RotaryEmbedding(d_model // num_heads, max_len=128)
            self.embed = nn.Embedding(vocab_size, d_model)
            self.blocks = nn.ModuleList(
                TransformerBlock(d_model, num_heads, d_ff, rope=rope) for _ in range(num_layers)
            )
            self.norm = nn.LayerNorm(d_model)
            self.head = nn.Linear(d_model, vocab_size, bias=False)

        def forward(self, idx):
            mask = mine.make_causal_mask(idx.shape[1])
            x = mine.token_embedding(idx, self.embed.weight)
            for block in self.blocks:
                x = block(x, mask)
            x = mine.layer_norm(x, self.norm.weight, self.norm.bias)
            return mine.output_layer(x, self.head.weight)

    _refused(MyTransformer, "TransformerBlock.__init__")


def _for_show():
    """The eight names, each a function a learner could call once on a dummy tensor beside a
    forward that computes its logits another way."""

    def token_embedding(i, w):
        return w[i]

    def make_causal_mask(T):
        return torch.ones(T, T, dtype=torch.bool).tril()

    def multihead(x, *a, **k):
        return x.clone()

    def rope_heads(x):
        return x.clone()

    def feed_forward(x, *a):
        return x.clone()

    def prenorm_block(x, *a):
        return x.clone()

    def layer_norm(x, *a, **k):
        return x.clone()

    def output_layer(x, w):
        return x @ w.T

    return SimpleNamespace(**{n: f for n, f in locals().items()})


def _call_all_for_show(shown, idx, embed, head):
    z = torch.zeros(1, 1, embed.shape[1])
    for f in (shown.multihead, shown.rope_heads, shown.feed_forward, shown.prenorm_block,
              shown.layer_norm):  # fmt: skip
        f(z)
    shown.token_embedding(idx[:1, :1], embed)
    shown.make_causal_mask(2)
    shown.output_layer(z, head)


def test_a_forward_of_another_lesson_behind_calls_for_show_is_refused():
    """The course's blocks built, lesson 15b's windowed_logits as the forward, and each of the
    eight names called once for show."""
    from course_lib import sliding_window
    from course_lib.model import ModelConfig

    shown = _for_show()

    class MyTransformer(Written):
        def __init__(self, vocab_size, d_model, num_heads, d_ff, num_layers):
            super().__init__(vocab_size, d_model, num_heads, d_ff, num_layers)
            self.config = ModelConfig(vocab_size=vocab_size, d_model=d_model,
                                      num_heads=num_heads, d_ff=d_ff, num_layers=num_layers,
                                      max_len=128)  # fmt: skip

        def forward(self, idx):
            _call_all_for_show(shown, idx, self.embed.weight, self.head.weight)
            return sliding_window.windowed_logits(self, idx)

    _refused(MyTransformer, "course_lib.sliding_window.windowed_logits")


class TorchOwn(Written):
    """A right forward from torch's modules, apply_rope and scaled_dot_product_attention."""

    def forward(self, idx):
        from course_lib.positional import apply_rope

        x = self.embed(idx)
        B, T, D = x.shape
        H = self.heads
        for b in self.blocks:
            q, k, v = b.attn.qkv(b.norm1(x)).split(D, -1)
            q, k, v = (t.view(B, T, H, D // H).transpose(1, 2) for t in (q, k, v))
            pos = torch.arange(T)
            q, k = apply_rope(q, pos), apply_rope(k, pos)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + b.attn.out(y.transpose(1, 2).reshape(B, T, D))
            x = x + b.ff(b.norm2(x))
        return self.head(self.norm(x))


def test_torchs_own_forward_behind_calls_for_show_is_refused_with_the_idle_names():
    """Each of the eight names called once on a dummy tensor, the logits from torch: the calls
    happen, their results reach nothing."""
    shown = _for_show()

    class MyTransformer(TorchOwn):
        def forward(self, idx):
            _call_all_for_show(shown, idx, self.embed.weight, self.head.weight)
            return super().forward(idx)

    result = run_model(MyTransformer)
    assert not result.passed and result.bug == "results_unused", result.message
    idle = "token_embedding, make_causal_mask, multihead, rope_heads, feed_forward, "
    assert f"do not depend on what {idle}prenorm_block, layer_norm, output_layer" in result.message
    assert result.steps[0].startswith("Use what mine.token_embedding returns")
    assert result.steps[-1] == f"See {MY_TRANSFORMER.idea}."


def test_your_functions_added_in_at_zero_weight_are_refused():
    """The learner's own functions run on the real tensors, but their results enter the logits
    multiplied by 0: the logits are torch's."""

    class MyTransformer(TorchOwn):
        def forward(self, idx):
            logits = super().forward(idx)
            mask = mine.make_causal_mask(idx.shape[1])
            x = mine.token_embedding(idx, self.embed.weight)
            for b in self.blocks:
                x = mine.prenorm_block(
                    x,
                    lambda h: self.attention(b, h, mask),  # noqa: B023 (called at once)
                    lambda h: mine.feed_forward(h, b.ff[0], b.ff[2]),  # noqa: B023
                    lambda h: mine.layer_norm(h, b.norm1.weight, b.norm1.bias),  # noqa: B023
                    lambda h: mine.layer_norm(h, b.norm2.weight, b.norm2.bias),  # noqa: B023
                )
            x = mine.layer_norm(x, self.norm.weight, self.norm.bias)
            return logits + 0 * mine.output_layer(x, self.head.weight)

    result = run_model(MyTransformer)
    assert not result.passed and result.bug == "results_unused", result.message
    assert "do not depend on what token_embedding, make_causal_mask, multihead" in result.message


def test_a_mask_made_once_and_sliced_is_yours():
    """make_causal_mask called in __init__ for the longest T, kept as a buffer that is not
    saved, and sliced for each T: its result reaches the logits."""

    class MyTransformer(Written):
        def __init__(self, **arguments):
            super().__init__(**arguments)
            self.register_buffer("causal", mine.make_causal_mask(128), persistent=False)

        def forward(self, idx):
            T = idx.shape[1]
            mask = self.causal[:T, :T]
            x = mine.token_embedding(idx, self.embed.weight)
            for b in self.blocks:
                x = mine.prenorm_block(
                    x,
                    lambda h: self.attention(b, h, mask),  # noqa: B023 (called at once)
                    lambda h: mine.feed_forward(h, b.ff[0], b.ff[2]),  # noqa: B023
                    lambda h: mine.layer_norm(h, b.norm1.weight, b.norm1.bias),  # noqa: B023
                    lambda h: mine.layer_norm(h, b.norm2.weight, b.norm2.bias),  # noqa: B023
                )
            x = mine.layer_norm(x, self.norm.weight, self.norm.bias)
            return mine.output_layer(x, self.head.weight)

    assert run_model(MyTransformer).status == PASSED


def test_the_cases_leave_the_random_state():
    state = torch.random.get_rng_state()
    for _ in range(2):
        MY_TRANSFORMER.case_list()
    assert torch.equal(torch.random.get_rng_state(), state)


def test_a_cached_mask_is_the_same_after_the_check():
    """The check changes what each of your functions returns, in place, to see it reach the
    logits: a mask your make_causal_mask keeps (here an lru_cache) is put back afterwards."""
    calls = []

    @functools.lru_cache
    def cached_mask(T):
        calls.append(T)
        return mine.make_causal_mask(T)

    class MyTransformer(Written):
        def forward(self, idx):
            mask = cached_mask(idx.shape[1])
            x = mine.token_embedding(idx, self.embed.weight)
            for b in self.blocks:
                x = mine.prenorm_block(
                    x,
                    lambda h: self.attention(b, h, mask),  # noqa: B023 (called at once)
                    lambda h: mine.feed_forward(h, b.ff[0], b.ff[2]),  # noqa: B023
                    lambda h: mine.layer_norm(h, b.norm1.weight, b.norm1.bias),  # noqa: B023
                    lambda h: mine.layer_norm(h, b.norm2.weight, b.norm2.bias),  # noqa: B023
                )
            x = mine.layer_norm(x, self.norm.weight, self.norm.bias)
            return mine.output_layer(x, self.head.weight)

    assert run_model(MyTransformer).passed
    assert calls, "the class ran"
    for T in set(calls):
        assert torch.equal(cached_mask(T), torch.ones(T, T, dtype=torch.bool).tril())
