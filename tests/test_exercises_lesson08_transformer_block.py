"""Lesson 08's exercises: learner-style mistakes get their hint.

Every wrong function here is written the way a learner would write it (statistics with a
hard-coded axis, .std() with its default, a block that follows the wrong diagram), not taken
from the bug list in course_lib/exercises/lesson08_transformer_block.py.
"""

import ast
import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_lib.checks import check_layer_norm, check_prenorm_block
from course_lib.exercises.core import DTYPE_HINT, run
from course_lib.exercises.lesson08_transformer_block import (
    LAYER_NORM,
    PRENORM_BLOCK,
    layer_norm_reference,
)
from helpers import failed_with_hint, lesson_cells

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "08_transformer_block.ipynb"


# ---------------------------------------------------------------- every exercise


def test_no_cell_above_an_exercise_uses_its_name():
    # re-running an earlier cell must not meet the learner's function under an old name
    # (issue 14: the padding cells once called a module `layer_norm`)
    seen = []
    for cell in lesson_cells(NOTEBOOK):
        if cell.cell_type != "code":
            continue
        for name in ("prenorm_block", "layer_norm"):
            if f"def {name}(" in cell.source:
                seen.append(name)
            elif name not in seen:
                assert not re.search(rf"(?<![\w.]){name}\b", cell.source), cell.source
    assert sorted(seen) == ["layer_norm", "prenorm_block"]


def test_the_exercise_texts_warn_off_the_ready_made_functions():
    """F.layer_norm and nn.LayerNorm meet layer_norm's contract: the exercise says the check
    refuses them, and it does."""
    cells = lesson_cells(NOTEBOOK)
    at = next(i for i, c in enumerate(cells) if "def layer_norm(" in c.source)
    text = " ".join(cells[at - 1].source.split())
    assert "The check compares with `torch.nn.functional.layer_norm`" in text
    assert "another of torch's norms set up to do the same, fails" in text

    def calls_torch(x, weight, bias, eps=1e-5):
        return F.layer_norm(x, x.shape[-1:], weight, bias, eps)

    def calls_the_module(x, weight, bias, eps=1e-5):
        norm = nn.LayerNorm(x.shape[-1], eps=eps, dtype=x.dtype)
        with torch.no_grad():
            norm.weight.copy_(weight)
            norm.bias.copy_(bias)
        return norm(x)

    for fn in (calls_torch, calls_the_module):
        result = run(LAYER_NORM, fn)
        assert not result.passed and result.bug == "forbidden", result.message
        assert "calls torch.nn.functional.layer_norm" in result.message
        assert result.steps[0] == LAYER_NORM.forbidden_hint


def test_layer_norm_by_any_other_route_to_torchs_norms_is_refused():
    """The fresh read found torch.native_layer_norm, torch.ops.aten.layer_norm and a group
    norm of one group passing: every one of torch's normalisations that can be set to
    standardise each token is refused, as a learner would reach it."""

    def native(x, weight, bias, eps=1e-5):
        out, _mean, _rstd = torch.native_layer_norm(x, x.shape[-1:], weight, bias, eps)
        return out

    def aten(x, weight, bias, eps=1e-5):
        return torch.ops.aten.layer_norm(x, list(x.shape[-1:]), weight, bias, eps)

    def aten_overload(x, weight, bias, eps=1e-5):
        return torch.ops.aten.layer_norm.default(x, list(x.shape[-1:]), weight, bias, eps)

    def one_group(x, weight, bias, eps=1e-5):
        tokens = x.reshape(-1, 1, x.shape[-1])  # (N, 1, D): each token one group of D
        return F.group_norm(tokens, 1, eps=eps).reshape(x.shape) * weight + bias

    def instance(x, weight, bias, eps=1e-5):
        tokens = x.reshape(-1, 1, x.shape[-1])  # (N, 1, D): one channel, D positions
        return F.instance_norm(tokens, eps=eps).reshape(x.shape) * weight + bias

    def batch_of_features(x, weight, bias, eps=1e-5):
        columns = x.reshape(-1, x.shape[-1]).T  # (D, N): each token a channel
        out = F.batch_norm(columns, None, None, training=True, eps=eps)
        return out.T.reshape(x.shape) * weight + bias

    def rms_of_centred(x, weight, bias, eps=1e-5):
        centred = x - x.mean(-1, keepdim=True)
        return F.rms_norm(centred, x.shape[-1:], weight, eps) + bias

    routes = {
        native: "torch.native_layer_norm", aten: "torch.ops.aten.layer_norm",
        aten_overload: "torch.ops.aten.layer_norm.default", one_group: "torch.group_norm",
        instance: "torch.instance_norm", batch_of_features: "torch.batch_norm",
        rms_of_centred: "torch.rms_norm",
    }  # fmt: skip
    for fn, name in routes.items():
        result = run(LAYER_NORM, fn)
        assert not result.passed and result.bug == "forbidden", (fn.__name__, result.message)
        assert f"calls {name}," in result.message, result.message
        assert result.steps[0] == LAYER_NORM.forbidden_hint


def test_the_exercise_modules_own_layer_norm_is_refused():
    """The bugs' helper is a right layer norm with the right settings: a learner who finds it
    in course_lib.checks' imports cannot pass with it."""
    from course_lib.exercises import lesson08_transformer_block as module

    def through_the_helper(x, weight, bias, eps=1e-5):
        return module._layer_norm_wrong(**module.RIGHT)(x, weight, bias, eps)

    def through_the_variant(x, weight, bias, eps=1e-5):
        return module._norm_variant(x, weight, bias, eps, **module.RIGHT)

    for fn in (through_the_helper, through_the_variant):
        result = run(LAYER_NORM, fn)
        assert not result.passed and result.bug == "forbidden", result.message
        assert "lesson08_transformer_block._norm_variant" in result.message
    with pytest.raises(TypeError, match="name the setting that is wrong"):
        module._layer_norm_wrong()


def test_prenorm_block_through_the_course_block_is_refused():
    """The fresh read passed prenorm_block by calling TransformerBlock.forward on a namespace
    holding the four parts."""
    from types import SimpleNamespace

    from course_lib.block import TransformerBlock

    def prenorm_block(x, attn, ff, norm1, norm2):
        fake = SimpleNamespace(prenorm=True, attn=lambda h, mask, weights: attn(h), ff=ff,
                               norm1=norm1, norm2=norm2, drop=lambda t: t,
                               _add=lambda a, b: a + b)  # fmt: skip
        return TransformerBlock.forward(fake, x)

    result = run(PRENORM_BLOCK, prenorm_block)
    assert not result.passed and result.bug == "forbidden", result.message
    assert "calls TransformerBlock.forward" in result.message
    assert result.steps[0] == PRENORM_BLOCK.forbidden_hint


def test_prenorm_block_through_lesson_05s_course_decoder_layer_is_refused():
    """The second fresh read: the course's decoder layer of lesson 05 makes both additions,
    given attention and the feed-forward layer behind norms as its two sub-layers."""
    from course_lib.seq2seq import decoder_layer_reference

    def prenorm_block(x, attn, ff, norm1, norm2):
        return decoder_layer_reference(x, None, lambda y, mask=None: attn(norm1(y)),
                                       lambda h, memory, mm=None: ff(norm2(h)))  # fmt: skip

    result = run(PRENORM_BLOCK, prenorm_block)
    assert not result.passed and result.bug == "forbidden", result.message
    assert "calls course_lib.seq2seq.decoder_layer_reference" in result.message
    assert result.steps[0] == PRENORM_BLOCK.forbidden_hint


def test_no_help_above_the_prenorm_check_spells_the_block_out():
    """The diagram above the exercise is the post-norm one; the pre-norm diagram and nanoGPT's
    two lines come after the check, and the course block's docstring does not give the wiring."""
    from course_lib.block import TransformerBlock

    cells = lesson_cells(NOTEBOOK)
    check = next(i for i, c in enumerate(cells) if "check_prenorm_block(prenorm_block)" in c.source)
    above = "\n".join(c.source for c in cells[:check]
                      if not c.metadata.get("nbgrader", {}).get("solution"))  # fmt: skip
    assert "block_diagram(prenorm=False)" in above and "block_diagram(prenorm=True)" not in above
    assert "ln_2(x)" not in above and "attn(norm1(x))" not in above
    after = "\n".join(c.source for c in cells[check:])
    assert "block_diagram(prenorm=True)" in after and "self.mlp(self.ln_2(x))" in after
    assert "norm1(x)" not in TransformerBlock.__doc__ and "norm2(" not in TransformerBlock.__doc__


def test_no_worked_example_above_an_exercise_is_its_twin():
    """Issue 25: prenorm_block came right after a postnorm_block written in code, and
    layer_norm after an rms_norm; now no code cell above an exercise defines a function of
    the same arguments, and no other norm is written out."""
    cells = [c for c in lesson_cells(NOTEBOOK) if c.cell_type == "code"]
    at = next(i for i, c in enumerate(cells) if "def layer_norm(" in c.source)
    above = ast.parse("\n".join(c.source for c in cells[:at] if not c.source.startswith("%")))
    defined = {n.name: [a.arg for a in n.args.args] for n in ast.walk(above)
               if isinstance(n, ast.FunctionDef)}  # fmt: skip
    assert "postnorm_block" not in defined and "rms_norm" not in defined
    others = {name: args for name, args in defined.items() if name != "prenorm_block"}
    for args in others.values():  # none takes a block's parts or a norm's weight and bias
        assert args[:5] != ["x", "attn", "ff", "norm1", "norm2"], others
        assert args[1:3] != ["weight", "bias"], others


# ---------------------------------------------------------------- prenorm_block


def test_prenorm_block_written_in_one_line_passes():
    def prenorm_block(x, attn, ff, norm1, norm2):
        x = x + attn(norm1(x))
        x = x + ff(norm2(x))
        return x

    assert run(PRENORM_BLOCK, prenorm_block).passed


def test_prenorm_block_in_the_post_norm_order_is_named():
    def prenorm_block(x, attn, ff, norm1, norm2):
        x = norm1(x + attn(x))
        return norm2(x + ff(x))

    failed_with_hint(PRENORM_BLOCK, prenorm_block, "postnorm")


def test_prenorm_block_without_additions_is_named():
    def prenorm_block(x, attn, ff, norm1, norm2):
        for norm, layer in ((norm1, attn), (norm2, ff)):
            x = layer(norm(x))
        return x

    failed_with_hint(PRENORM_BLOCK, prenorm_block, "no_residual")


def test_prenorm_block_that_adds_to_the_normalised_copy_is_named():
    def prenorm_block(x, attn, ff, norm1, norm2):
        x = norm1(x)
        x = x + attn(x)
        x = norm2(x)
        return x + ff(x)

    result = failed_with_hint(PRENORM_BLOCK, prenorm_block, "residual_from_normed")
    assert "un-normalised" in result.steps[0]


def test_prenorm_block_that_reuses_norm1_is_named():
    def prenorm_block(x, attn, ff, norm1, norm2):
        h = x + attn(norm1(x))
        return h + ff(norm1(h))

    failed_with_hint(PRENORM_BLOCK, prenorm_block, "same_norm")


def test_prenorm_block_with_the_norms_swapped_is_named():
    def prenorm_block(x, attn, ff, norm1, norm2):
        h = x + attn(norm2(x))
        return h + ff(norm1(h))

    failed_with_hint(PRENORM_BLOCK, prenorm_block, "norms_swapped")


def test_prenorm_block_with_both_sub_layers_reading_x_is_named():
    def prenorm_block(x, attn, ff, norm1, norm2):  # GPT-J's parallel block, one norm each
        return x + attn(norm1(x)) + ff(norm2(x))

    failed_with_hint(PRENORM_BLOCK, prenorm_block, "ff_sees_x")


def test_prenorm_block_with_one_addition_around_both_is_named():
    def prenorm_block(x, attn, ff, norm1, norm2):
        return x + ff(norm2(attn(norm1(x))))

    failed_with_hint(PRENORM_BLOCK, prenorm_block, "one_residual")


def test_prenorm_block_that_adds_in_place_is_caught():
    def prenorm_block(x, attn, ff, norm1, norm2):
        x += attn(norm1(x))
        x += ff(norm2(x))
        return x

    failed_with_hint(PRENORM_BLOCK, prenorm_block, "in place", words=["`x` in place"])


def test_prenorm_block_that_calls_attn_with_a_mask_of_its_own_fails_on_plain_functions():
    # the parts are any callables of one argument: a learner who passes the block's mask
    # along breaks on the case where attn is a plain function
    def prenorm_block(x, attn, ff, norm1, norm2):
        h = x + attn(norm1(x), None)
        return h + ff(norm2(h))

    failed_with_hint(PRENORM_BLOCK, prenorm_block, words=["raised TypeError", "plain function"])


def test_prenorm_block_reference_is_torchs_pre_norm_encoder_layer():
    """An independent formulation: torch's nn.TransformerEncoderLayer with norm_first=True
    runs the same wiring by code of its own, and the checker's case built from its parts
    expects its output; so does the course's TransformerBlock on its own parts."""
    from course_lib.block import TransformerBlock
    from course_lib.exercises.lesson08_transformer_block import torch_layer_parts

    g = torch.Generator().manual_seed(7)
    x = torch.randn(3, 9, 16, generator=g) * 2 + 1  # (B, T, D)
    layer, *parts = torch_layer_parts(16, 4, seed=21)
    with torch.no_grad():
        torch.testing.assert_close(PRENORM_BLOCK.reference(x, *parts), layer(x))
    case = next(c for c in PRENORM_BLOCK.case_list() if "TransformerEncoderLayer" in c.label)
    layer, *_ = torch_layer_parts(16, 4, seed=14)
    with torch.no_grad():
        torch.testing.assert_close(PRENORM_BLOCK.reference(*case.args), layer(case.args[0]))
    block = TransformerBlock(16, 4, 64).eval()
    with torch.no_grad():
        parts = (block.attn, block.ff, block.norm1, block.norm2)
        torch.testing.assert_close(PRENORM_BLOCK.reference(x, *parts), block(x))


def test_prenorm_block_cases_cover_the_contract():
    cases = PRENORM_BLOCK.case_list()
    dtypes = {case.args[0].dtype for case in cases}
    assert dtypes == {torch.float32, torch.float64}
    assert any(not isinstance(case.args[1], nn.Module) for case in cases)  # a plain function
    assert any(case.args[0].shape[1] == 1 for case in cases)  # T = 1
    for case in cases:  # two distinct norms, so using one twice shows
        norm1, norm2 = case.args[3], case.args[4]
        assert not torch.equal(norm1.weight, norm2.weight)


# ---------------------------------------------------------------- layer_norm


def test_layer_norm_reference_is_torchs_layer_norm_on_every_case():
    for case in LAYER_NORM.case_list():
        x, weight, bias, *rest = case.args
        eps = rest[0] if rest else case.kwargs.get("eps", 1e-5)
        norm = nn.LayerNorm(x.shape[-1], eps=eps, dtype=x.dtype)
        with torch.no_grad():
            norm.weight.copy_(weight)
            norm.bias.copy_(bias)
            expected = norm(x)
        torch.testing.assert_close(layer_norm_reference(*case.args, **case.kwargs), expected)


def test_layer_norm_cases_vary_eps_rank_and_dtype():
    cases = LAYER_NORM.case_list()
    eps = set()
    for case in cases:
        rest = case.args[3:]
        eps.add(rest[0] if rest else case.kwargs.get("eps", "default"))
    assert "default" in eps and max(e for e in eps if e != "default") >= 0.5 and len(eps) >= 4
    assert {case.args[0].dim() for case in cases} == {1, 2, 3, 4}
    assert any(case.args[0].dtype == torch.float64 for case in cases)


def test_layer_norm_with_torchs_default_variance_is_named():
    def layer_norm(x, weight, bias, eps=1e-5):
        mean = x.mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt(x.var(-1, keepdim=True) + eps) * weight + bias

    result = failed_with_hint(LAYER_NORM, layer_norm, "unbiased")
    assert "D - 1" in result.steps[0]


def test_layer_norm_with_eps_added_to_the_std_is_named():
    def layer_norm(x, weight, bias, eps=1e-5):
        centred = x - x.mean(-1, keepdim=True)
        return centred / (x.std(-1, unbiased=False, keepdim=True) + eps) * weight + bias

    result = failed_with_hint(LAYER_NORM, layer_norm, "eps_outside")
    assert "inside the square root" in result.steps[0]


def test_layer_norm_that_ignores_its_eps_is_named_on_the_large_eps():
    def layer_norm(x, weight, bias, eps=1e-5):
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + 1e-5) * weight + bias

    failed_with_hint(LAYER_NORM, layer_norm, "eps_fixed", words=["a large eps"])


def test_layer_norm_without_eps_is_named_on_the_tiny_variance():
    def layer_norm(x, weight, bias, eps=1e-5):
        mean = x.mean(-1, keepdim=True)
        return (x - mean) / x.std(-1, unbiased=False, keepdim=True) * weight + bias

    failed_with_hint(LAYER_NORM, layer_norm, "no_eps", words=["variance (about 2e-6) is below eps"])


def test_layer_norm_over_the_batch_is_named_batch_norm():
    def layer_norm(x, weight, bias, eps=1e-5):
        flat = x.reshape(-1, x.shape[-1])  # (N, D): every token of the batch
        mean, var = flat.mean(0), flat.var(0, unbiased=False)
        return (x - mean) / torch.sqrt(var + eps) * weight + bias

    result = failed_with_hint(LAYER_NORM, layer_norm, "per_feature")
    assert "batch norm" in result.steps[0]


def standardised(x, eps):
    """Each token of x at mean 0 and variance 1, as a learner's first line would compute it."""
    mean = x.mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(((x - mean) ** 2).mean(-1, keepdim=True) + eps)


def test_layer_norm_without_weight_and_bias_is_named():
    def layer_norm(x, weight, bias, eps=1e-5):
        return standardised(x, eps)

    failed_with_hint(LAYER_NORM, layer_norm, "no_affine")


def test_layer_norm_that_shifts_before_scaling_is_named():
    def layer_norm(x, weight, bias, eps=1e-5):
        return (standardised(x, eps) + bias) * weight

    failed_with_hint(LAYER_NORM, layer_norm, "shift_first")


def test_layer_norm_with_weight_and_bias_swapped_is_named():
    # issue 25 section 4: this got only "numbers differ"
    def layer_norm(x, weight, bias, eps=1e-5):
        gain, shift = bias, weight  # "bias first, as in the signature of nn.Linear's output"
        return standardised(x, eps) * gain + shift

    result = failed_with_hint(LAYER_NORM, layer_norm, "weight_bias_swapped")
    assert "swapped" in result.steps[0]


def test_layer_norm_with_statistics_over_every_axis_is_named():
    # issue 25 section 4: .mean() and .var() without dim, biased or with torch's default
    def biased(x, weight, bias, eps=1e-5):
        mean, var = x.mean(), x.var(unbiased=False)
        return (x - mean) / torch.sqrt(var + eps) * weight + bias

    def with_std(x, weight, bias, eps=1e-5):
        return (x - x.mean()) / torch.sqrt(x.std() ** 2 + eps) * weight + bias

    for fn, bug in ((biased, "all_axes"), (with_std, "all_axes_unbiased")):
        result = failed_with_hint(LAYER_NORM, fn, bug, words=["the whole tensor"])
        assert "every axis" in result.steps[0]


def test_layer_norm_with_eps_added_to_torchs_std_is_named():
    # issue 25 section 4: x.std() + eps, torch's default std (dividing by D - 1) and eps
    # outside the root, got only "numbers differ"
    def layer_norm(x, weight, bias, eps=1e-5):
        centred = x - x.mean(dim=-1, keepdim=True)
        return centred / (x.std(dim=-1, keepdim=True) + eps) * weight + bias

    result = failed_with_hint(LAYER_NORM, layer_norm, "eps_outside_unbiased")
    assert "inside the square root" in result.steps[0] and "D - 1" in result.steps[0]


def test_layer_norm_with_eps_added_to_the_root_of_the_variance_is_named():
    def layer_norm(x, weight, bias, eps=1e-5):
        mean = x.mean(-1, keepdim=True)
        var = x.var(-1, unbiased=False, keepdim=True)
        return (x - mean) / (var**0.5 + eps) * weight + bias

    failed_with_hint(LAYER_NORM, layer_norm, "eps_outside")


def test_layer_norm_written_other_right_ways_passes():
    def with_rsqrt(x, weight, bias, eps=1e-5):
        centred = x - x.mean(-1, keepdim=True)
        return centred * torch.rsqrt(centred.pow(2).mean(-1, keepdim=True) + eps) * weight + bias

    def with_var_mean(x, weight, bias, eps=1e-5):
        var, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)
        return torch.addcmul(bias, (x - mean) / (var + eps).sqrt(), weight)

    for fn in (with_rsqrt, with_var_mean):
        assert run(LAYER_NORM, fn).passed, fn.__name__


def test_layer_norm_without_centring_is_named():
    def layer_norm(x, weight, bias, eps=1e-5):
        return x / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps) * weight + bias

    failed_with_hint(LAYER_NORM, layer_norm, "no_centre")


def test_layer_norm_with_a_hard_coded_axis_fails_with_the_last_axis_hint():
    def layer_norm(x, weight, bias, eps=1e-5):
        mean = x.mean(dim=2, keepdim=True)  # (B, T, 1) for the (B, T, D) of the lesson
        var = x.var(dim=2, unbiased=False, keepdim=True)
        return (x - mean) / torch.sqrt(var + eps) * weight + bias

    result = failed_with_hint(LAYER_NORM, layer_norm, words=["raised IndexError"])
    assert any("last axis" in step for step in result.steps)


def test_layer_norm_computed_in_float64_is_told_about_the_dtype():
    def layer_norm(x, weight, bias, eps=1e-5):
        x = x.double()  # "more precise"
        mean = x.mean(-1, keepdim=True)
        var = x.var(-1, unbiased=False, keepdim=True)
        return (x - mean) / torch.sqrt(var + eps) * weight + bias

    result = failed_with_hint(LAYER_NORM, layer_norm, words=["expected dtype torch.float32"])
    assert result.steps[0] == DTYPE_HINT


def test_layer_norm_that_centres_x_in_place_is_caught():
    def layer_norm(x, weight, bias, eps=1e-5):
        x -= x.mean(-1, keepdim=True)
        return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight + bias

    failed_with_hint(LAYER_NORM, layer_norm, "in place", words=["`x` in place"])


def test_the_batch_norm_worked_by_hand_is_what_torch_computes():
    """The worked example is batch norm on one feature, a column of four tokens: every number
    the lesson gives, from torch's own batch norm."""
    column = torch.tensor([[2.0], [4.0], [4.0], [6.0]], dtype=torch.float64)  # (N, C) = (4, 1)
    standard = F.batch_norm(column, None, None, training=True, eps=2.0)
    assert standard.flatten().tolist() == [-1.0, 0.0, 0.0, 1.0]
    weight, bias = (
        torch.tensor([2.0], dtype=torch.float64),
        torch.tensor([0.5], dtype=torch.float64),
    )
    out = F.batch_norm(column, None, None, weight, bias, training=True, eps=2.0)
    assert out.flatten().tolist() == [-1.5, 0.5, 0.5, 2.5]
    cells = lesson_cells(NOTEBOOK)
    text = " ".join(next(c.source for c in cells if "worked by hand on the *other* norm" in
                         c.source).split())  # fmt: skip
    assert "the variance is the mean of their squares, $(4 + 0 + 0 + 4) / 4 = 2$" in text
    assert "the standardised column is $(-1, 0, 0, 1)$" in text
    assert "the column becomes $(-1.5, 0.5, 0.5, 2.5)$" in text
