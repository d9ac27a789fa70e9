"""Lesson 05's exercises: the notebook's solutions pass, learner-style mistakes get their hint.

Every wrong function here is written the way a learner would write it (hand-made GELUs,
reshapes that assume three axes, statistics with a hard-coded axis), not taken from the bug
list in course_lib/exercises/lesson05.py.
"""

import math
import re
from pathlib import Path

import nbformat
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_lib.checks import check_feed_forward, check_layer_norm, check_prenorm_block
from course_lib.exercises.core import DTYPE_HINT, run
from course_lib.exercises.lesson05 import (
    EXERCISES,
    FEED_FORWARD,
    LAYER_NORM,
    PRENORM_BLOCK,
    layer_norm_reference,
)
from course_lib.workspace import stub_solutions
from helpers import notebook_functions, solution_cells, stub, verdict

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "05_transformer_block.ipynb"


def _lesson():
    return nbformat.read(NOTEBOOK, as_version=4)


def _solutions(source=lambda s: s) -> dict:
    """The lesson's three exercise functions as its cells define them (through `source`)."""
    return solution_cells(NOTEBOOK, {"torch": torch, "F": F, "nn": nn}, source)


def _check(exercise, fn, bug=None, words=()):
    result = run(exercise, fn)
    assert not result.passed, result.message
    if bug is not None:
        assert result.bug == bug, result.message
        causes = [b.cause for b in exercise.bugs if b.name == bug]
        assert causes == [] if bug == "in place" else result.steps[0] == causes[0]
    for word in words:
        assert word in result.message, result.message
    assert result.steps[-1] == f"See {exercise.idea}."
    return result


# ---------------------------------------------------------------- every exercise


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.name)
def test_the_lessons_solution_passes(exercise):
    assert run(exercise, notebook_functions(exercise.name)[exercise.name]).passed


@pytest.mark.parametrize("check", [check_feed_forward, check_prenorm_block, check_layer_norm])
def test_a_stub_is_not_implemented_yet(check, capsys):
    assert "not implemented yet" in verdict(check, stub, capsys)


def test_the_workspace_stubs_are_not_implemented_yet(capsys):
    stubs = _solutions(stub_solutions)
    assert {"feed_forward", "prenorm_block", "layer_norm"} <= set(stubs)
    for check in (check_feed_forward, check_prenorm_block, check_layer_norm):
        name = check.__name__.removeprefix("check_")
        assert "not implemented yet" in verdict(check, stubs[name], capsys)


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.name)
def test_every_bug_runs_on_every_case(exercise):
    # the checker calls the bugs on whichever case a learner's function fails: one that
    # raised there would crash the check cell instead of giving a hint
    for case in exercise.case_list():
        for bug in exercise.bugs:
            bug.wrong(*case.args, **case.kwargs)


def test_no_cell_above_an_exercise_uses_its_name():
    # re-running an earlier cell must not meet the learner's function under an old name
    # (issue 14: the padding cells once called a module `layer_norm`)
    seen = []
    for cell in _lesson().cells:
        if cell.cell_type != "code":
            continue
        for name in ("feed_forward", "prenorm_block", "layer_norm"):
            if f"def {name}(" in cell.source:
                seen.append(name)
            elif name not in seen:
                assert not re.search(rf"(?<![\w.]){name}\b", cell.source), cell.source
    assert sorted(seen) == ["feed_forward", "layer_norm", "prenorm_block"]


def test_the_exercise_texts_warn_off_the_ready_made_functions():
    """F.layer_norm and nn.LayerNorm meet layer_norm's contract: the exercise says so."""
    cells = _lesson().cells
    at = next(i for i, c in enumerate(cells) if "def layer_norm(" in c.source)
    text = " ".join("\n".join(c.source for c in cells[at - 3 : at]).split())
    assert "`F.layer_norm` and `nn.LayerNorm` compute exactly this" in text
    assert "would pass the check and teach nothing" in text


# ---------------------------------------------------------------- feed_forward


def _markdown() -> str:
    return " ".join(
        "\n".join(c.source for c in _lesson().cells if c.cell_type == "markdown").split()
    )


def test_the_worked_example_is_what_the_course_computes():
    """D = 1, d_ff = 2, worked by hand in the lesson: every number it prints, recomputed."""
    lin1, lin2 = nn.Linear(1, 2, dtype=torch.float64), nn.Linear(2, 1, dtype=torch.float64)
    with torch.no_grad():
        lin1.weight.copy_(torch.tensor([[1.0], [-1.0]]))
        lin1.bias.copy_(torch.tensor([0.0, 0.5]))
        lin2.weight.copy_(torch.tensor([[2.0, 1.0]]))
        lin2.bias.copy_(torch.tensor([0.1]))
        x = torch.tensor([1.0], dtype=torch.float64)  # (D,) = (1,): one token
        hidden = lin1(x)  # (d_ff,) = (2,)
        phi = 0.5 * (1 + torch.erf(hidden / math.sqrt(2)))  # (2,)
        exact, tanh = F.gelu(hidden), F.gelu(hidden, approximate="tanh")
        out = FEED_FORWARD.reference(x, lin1, lin2)
        out_tanh = lin2(tanh)
    text = _markdown()
    assert hidden.tolist() == [1.0, -0.5] and "= (1.0, -0.5)$" in text
    assert f"\\Phi(1.0) = 1.0 \\cdot {phi[0]:.5f} = {exact[0]:.5f}$" in text
    assert f"\\Phi(-0.5) = -0.5 \\cdot {phi[1]:.5f} = {exact[1]:.5f}$" in text
    assert f"0.1 = {out.item():.4f}$" in text and f"into $({out.item():.4f})$" in text
    assert f"gives {tanh[0]:.5f} and {tanh[1]:.5f}, and the output {out_tanh.item():.4f}" in text
    assert f"{out.item():.4f}" != f"{out_tanh.item():.4f}"  # the example tells the two apart


def test_feed_forward_written_by_hand_with_the_exact_gelu_passes():
    def feed_forward(x, lin1, lin2):
        h = x @ lin1.weight.T + lin1.bias
        h = 0.5 * h * (1 + torch.erf(h / math.sqrt(2)))
        return h @ lin2.weight.T + lin2.bias

    assert run(FEED_FORWARD, feed_forward).passed


def test_feed_forward_with_relu_is_named():
    _check(FEED_FORWARD, lambda x, lin1, lin2: lin2(torch.relu(lin1(x))), "relu")


def test_feed_forward_with_the_tanh_approximation_of_gelu_is_told_apart():
    # the formula from the GELU paper, typed in by hand: off by up to 5e-4 per unit, which
    # every case shows (the approximation is not accepted: lesson 06 needs the exact one)
    def feed_forward(x, lin1, lin2):
        h = lin1(x)
        inner = math.sqrt(2 / math.pi) * (h + 0.044715 * h**3)
        return lin2(0.5 * h * (1 + torch.tanh(inner)))

    result = _check(FEED_FORWARD, feed_forward, "gelu_tanh")
    assert "exact" in result.steps[0]
    for case in FEED_FORWARD.case_list():
        ref = FEED_FORWARD.reference(*case.args)
        assert (feed_forward(*case.args) - ref).abs().max() > 10 * FEED_FORWARD.atol


def test_feed_forward_with_the_quick_sigmoid_gelu_is_named():
    def feed_forward(x, lin1, lin2):
        h = lin1(x)
        return lin2(h * torch.sigmoid(1.702 * h))

    _check(FEED_FORWARD, feed_forward, "sigmoid_gelu")


def test_feed_forward_with_a_gelu_after_each_layer_is_named():
    def feed_forward(x, lin1, lin2):
        for layer in (lin1, lin2):
            x = F.gelu(layer(x))
        return x

    _check(FEED_FORWARD, feed_forward, "extra_activation")


def test_feed_forward_without_a_bend_is_named():
    _check(FEED_FORWARD, lambda x, lin1, lin2: nn.Sequential(lin1, lin2)(x), "no_activation")


def test_feed_forward_that_adds_the_residual_is_named():
    def feed_forward(x, lin1, lin2):
        return x + lin2(nn.GELU()(lin1(x)))

    result = _check(FEED_FORWARD, feed_forward, "residual_inside")
    assert "block" in result.steps[0]


def test_feed_forward_with_the_layers_in_the_other_order_is_named_on_square_layers():
    def feed_forward(x, lin1, lin2):
        return lin1(F.gelu(lin2(x)))

    result = _check(FEED_FORWARD, feed_forward, "swapped", words=["square"])
    assert "wrong order" in result.steps[0]


def test_feed_forward_with_untransposed_weights_is_named():
    def feed_forward(x, lin1, lin2):
        return F.gelu(x @ lin1.weight + lin1.bias) @ lin2.weight + lin2.bias

    result = _check(FEED_FORWARD, feed_forward, "weight_not_transposed")
    assert "(out_features, in_features)" in result.steps[0]


def test_feed_forward_without_the_biases_is_named():
    def feed_forward(x, lin1, lin2):
        return F.gelu(x @ lin1.weight.T) @ lin2.weight.T

    _check(FEED_FORWARD, feed_forward, "no_bias")


def test_feed_forward_that_assumes_three_axes_fails_on_the_other_ranks():
    def feed_forward(x, lin1, lin2):
        B, T, D = x.shape
        flat = x.reshape(B * T, D)  # (B*T, D)
        return lin2(F.gelu(lin1(flat))).reshape(B, T, D)

    result = _check(FEED_FORWARD, feed_forward, words=["raised ValueError", "a 2-D x"])
    assert any("last axis of any tensor" in step for step in result.steps)


def test_feed_forward_that_returns_float32_is_told_about_the_dtype():
    def feed_forward(x, lin1, lin2):
        return lin2(F.gelu(lin1(x))).float()  # "float32, like the model"

    result = _check(FEED_FORWARD, feed_forward, words=["float64", "expected dtype torch.float64"])
    assert result.steps[0] == DTYPE_HINT


def test_feed_forward_that_changes_x_in_place_is_caught():
    def feed_forward(x, lin1, lin2):
        x.copy_(lin2(F.gelu(lin1(x))))  # "saves memory": the result goes into x's storage
        return x

    _check(FEED_FORWARD, feed_forward, "in place", words=["`x` in place"])


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

    _check(PRENORM_BLOCK, prenorm_block, "postnorm")


def test_prenorm_block_without_additions_is_named():
    def prenorm_block(x, attn, ff, norm1, norm2):
        for norm, layer in ((norm1, attn), (norm2, ff)):
            x = layer(norm(x))
        return x

    _check(PRENORM_BLOCK, prenorm_block, "no_residual")


def test_prenorm_block_that_adds_to_the_normalised_copy_is_named():
    def prenorm_block(x, attn, ff, norm1, norm2):
        x = norm1(x)
        x = x + attn(x)
        x = norm2(x)
        return x + ff(x)

    result = _check(PRENORM_BLOCK, prenorm_block, "residual_from_normed")
    assert "un-normalised" in result.steps[0]


def test_prenorm_block_that_reuses_norm1_is_named():
    def prenorm_block(x, attn, ff, norm1, norm2):
        h = x + attn(norm1(x))
        return h + ff(norm1(h))

    _check(PRENORM_BLOCK, prenorm_block, "same_norm")


def test_prenorm_block_with_the_norms_swapped_is_named():
    def prenorm_block(x, attn, ff, norm1, norm2):
        h = x + attn(norm2(x))
        return h + ff(norm1(h))

    _check(PRENORM_BLOCK, prenorm_block, "norms_swapped")


def test_prenorm_block_with_both_sub_layers_reading_x_is_named():
    def prenorm_block(x, attn, ff, norm1, norm2):  # GPT-J's parallel block, one norm each
        return x + attn(norm1(x)) + ff(norm2(x))

    _check(PRENORM_BLOCK, prenorm_block, "ff_sees_x")


def test_prenorm_block_with_one_addition_around_both_is_named():
    def prenorm_block(x, attn, ff, norm1, norm2):
        return x + ff(norm2(attn(norm1(x))))

    _check(PRENORM_BLOCK, prenorm_block, "one_residual")


def test_prenorm_block_that_adds_in_place_is_caught():
    def prenorm_block(x, attn, ff, norm1, norm2):
        x += attn(norm1(x))
        x += ff(norm2(x))
        return x

    _check(PRENORM_BLOCK, prenorm_block, "in place", words=["`x` in place"])


def test_prenorm_block_that_calls_attn_with_a_mask_of_its_own_fails_on_plain_functions():
    # the parts are any callables of one argument: a learner who passes the block's mask
    # along breaks on the case where attn is a plain function
    def prenorm_block(x, attn, ff, norm1, norm2):
        h = x + attn(norm1(x), None)
        return h + ff(norm2(h))

    _check(PRENORM_BLOCK, prenorm_block, words=["raised TypeError", "plain function"])


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

    result = _check(LAYER_NORM, layer_norm, "unbiased")
    assert "D - 1" in result.steps[0]


def test_layer_norm_with_eps_added_to_the_std_is_named():
    def layer_norm(x, weight, bias, eps=1e-5):
        centred = x - x.mean(-1, keepdim=True)
        return centred / (x.std(-1, unbiased=False, keepdim=True) + eps) * weight + bias

    result = _check(LAYER_NORM, layer_norm, "eps_outside")
    assert "inside the square root" in result.steps[0]


def test_layer_norm_that_ignores_its_eps_is_named_on_the_large_eps():
    def layer_norm(x, weight, bias, eps=1e-5):
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + 1e-5) * weight + bias

    _check(LAYER_NORM, layer_norm, "eps_fixed", words=["a large eps"])


def test_layer_norm_without_eps_is_named_on_the_tiny_variance():
    def layer_norm(x, weight, bias, eps=1e-5):
        mean = x.mean(-1, keepdim=True)
        return (x - mean) / x.std(-1, unbiased=False, keepdim=True) * weight + bias

    _check(LAYER_NORM, layer_norm, "no_eps", words=["variance (about 2e-6) is below eps"])


def test_layer_norm_over_the_batch_is_named_batch_norm():
    def layer_norm(x, weight, bias, eps=1e-5):
        flat = x.reshape(-1, x.shape[-1])  # (N, D): every token of the batch
        mean, var = flat.mean(0), flat.var(0, unbiased=False)
        return (x - mean) / torch.sqrt(var + eps) * weight + bias

    result = _check(LAYER_NORM, layer_norm, "per_feature")
    assert "batch norm" in result.steps[0]


def test_layer_norm_without_weight_and_bias_is_named():
    def layer_norm(x, weight, bias, eps=1e-5):
        return F.layer_norm(x, x.shape[-1:], eps=eps)

    _check(LAYER_NORM, layer_norm, "no_affine")


def test_layer_norm_that_shifts_before_scaling_is_named():
    def layer_norm(x, weight, bias, eps=1e-5):
        y = F.layer_norm(x, x.shape[-1:], eps=eps)
        return (y + bias) * weight

    _check(LAYER_NORM, layer_norm, "shift_first")


def test_layer_norm_without_centring_is_named():
    def layer_norm(x, weight, bias, eps=1e-5):
        return x / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps) * weight + bias

    _check(LAYER_NORM, layer_norm, "no_centre")


def test_layer_norm_with_a_hard_coded_axis_fails_with_the_last_axis_hint():
    def layer_norm(x, weight, bias, eps=1e-5):
        mean = x.mean(dim=2, keepdim=True)  # (B, T, 1) for the (B, T, D) of the lesson
        var = x.var(dim=2, unbiased=False, keepdim=True)
        return (x - mean) / torch.sqrt(var + eps) * weight + bias

    result = _check(LAYER_NORM, layer_norm, words=["raised IndexError"])
    assert any("last axis" in step for step in result.steps)


def test_layer_norm_computed_in_float64_is_told_about_the_dtype():
    def layer_norm(x, weight, bias, eps=1e-5):
        x = x.double()  # "more precise"
        mean = x.mean(-1, keepdim=True)
        var = x.var(-1, unbiased=False, keepdim=True)
        return (x - mean) / torch.sqrt(var + eps) * weight + bias

    result = _check(LAYER_NORM, layer_norm, words=["expected dtype torch.float32"])
    assert result.steps[0] == DTYPE_HINT


def test_layer_norm_that_centres_x_in_place_is_caught():
    def layer_norm(x, weight, bias, eps=1e-5):
        x -= x.mean(-1, keepdim=True)
        return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight + bias

    _check(LAYER_NORM, layer_norm, "in place", words=["`x` in place"])
