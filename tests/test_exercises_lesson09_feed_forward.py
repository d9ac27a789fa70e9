"""Lesson 09's exercise: learner-style mistakes get their hint.

Every wrong function here is written the way a learner would write it (GELU typed in by hand,
reshapes that assume three axes), not taken from the bug list in
course_lib/exercises/lesson09_feed_forward.py. torch's own GELU is what the check refuses, so
none of them calls it.
"""

import math
import re
from pathlib import Path

import nbformat
import torch
import torch.nn.functional as F
from torch import nn

from course_lib.checks import check_feed_forward
from course_lib.exercises.core import DTYPE_HINT, run
from course_lib.exercises.lesson09_feed_forward import FEED_FORWARD
from helpers import failed_with_hint, lesson_cells, lesson_markdown

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "09_feed_forward.ipynb"


def gelu(h):
    """GELU as a learner types it from the lesson's definition."""
    return h * 0.5 * (1 + torch.erf(h / math.sqrt(2)))


# ---------------------------------------------------------------- the lesson's own


def test_no_cell_above_the_exercise_spells_out_the_layer():
    """Issue 25: lesson 05's feed_forward came right after a cell that printed "Linear, GELU,
    Linear" of a block's layer; no code cell above the exercise shows its parts or calls it."""
    cells = lesson_cells(NOTEBOOK)
    at = next(i for i, c in enumerate(cells) if "def feed_forward(" in c.source)
    code = [c.source for c in cells[:at] if c.cell_type == "code"]
    assert "import" in code[0] and "course_lib.set_seed(0)" in code[0]  # the imports only
    above = "\n".join(code[1:])
    for word in ("gelu", "GELU", "Linear", "feed_forward(", ".ff"):
        assert word not in above, word
    assert not re.search(r"(?<![\w.])feed_forward\b", above)


def test_the_exercise_text_says_torchs_gelu_is_refused_and_it_is():
    text = lesson_markdown(NOTEBOOK)
    assert (
        "so a function that calls it in any form (`F.gelu`, `nn.GELU`, `torch.ops.aten.gelu`)"
        " fails" in text
    )

    def calls_f_gelu(x, lin1, lin2):
        return lin2(F.gelu(lin1(x)))

    def calls_the_module(x, lin1, lin2):
        return nn.Sequential(lin1, nn.GELU(), lin2)(x)

    for fn in (calls_f_gelu, calls_the_module):
        result = run(FEED_FORWARD, fn)
        assert not result.passed and result.bug == "forbidden", result.message
        assert "calls torch.nn.functional.gelu" in result.message
        assert result.steps[0] == FEED_FORWARD.forbidden_hint


def test_gelu_by_any_other_route_is_refused():
    """The fresh read passed feed_forward with the course's own GELU (course_lib.feedforward,
    which the lesson imports from) and with this exercise module's helpers; torch.ops.aten's
    gelu is torch's GELU by another name."""
    from course_lib import feedforward
    from course_lib.exercises import lesson09_feed_forward as module

    def aten(x, lin1, lin2):
        return lin2(torch.ops.aten.gelu(lin1(x)))

    def aten_overload(x, lin1, lin2):
        return lin2(torch.ops.aten.gelu.default(lin1(x)))

    def the_courses(x, lin1, lin2):
        return lin2(feedforward.gelu(lin1(x)))

    def by_activation(x, lin1, lin2):
        value, _slope = feedforward.activation("GELU", lin1(x))
        return lin2(value)

    def the_modules(x, lin1, lin2):
        return lin2(module._gelu(lin1(x)))

    def the_modules_phi(x, lin1, lin2):
        h = lin1(x)
        return lin2(h * module._phi(h))

    routes = {
        aten: "torch.ops.aten.gelu", aten_overload: "torch.ops.aten.gelu.default",
        the_courses: "course_lib.feedforward.gelu", by_activation: "course_lib.feedforward.gelu",
        the_modules: "lesson09_feed_forward._gelu", the_modules_phi: "lesson09_feed_forward._phi",
        module._with_bend(module._gelu): "lesson09_feed_forward._gelu",
    }  # fmt: skip
    for fn, name in routes.items():
        result = run(FEED_FORWARD, fn)
        assert not result.passed and result.bug == "forbidden", result.message
        assert f"{name}," in result.message, result.message


def test_no_helper_the_lesson_imports_shows_phi_before_the_check():
    """gelu_slope, imported at the top of the lesson, once held Phi written with erf; the
    lesson imports nothing from the exercise module, and the hints are steps, not the recipe."""
    import inspect

    from course_lib import feedforward

    source = inspect.getsource(feedforward)
    assert "erf" not in source
    cells = lesson_cells(NOTEBOOK)
    imports = cells[1].source
    assert (
        "exercises.lesson09_feed_forward" not in imports and "feed_forward_reference" not in imports
    )
    for hint in FEED_FORWARD.hints:
        assert "erf(x / sqrt(2))" not in hint and "sqrt(2)) / 2" not in hint


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
    text = lesson_markdown(NOTEBOOK)
    assert hidden.tolist() == [1.0, -0.5] and "= (1.0, -0.5)$" in text
    assert f"\\Phi(1.0) = 1.0 \\cdot {phi[0]:.5f} = {exact[0]:.5f}$" in text
    assert f"\\Phi(-0.5) = -0.5 \\cdot {phi[1]:.5f} = {exact[1]:.5f}$" in text
    assert f"0.1 = {out.item():.4f}$" in text and f"into $({out.item():.4f})$" in text
    assert f"gives {tanh[0]:.5f} and {tanh[1]:.5f}, and the output {out_tanh.item():.4f}" in text
    assert f"{out.item():.4f}" != f"{out_tanh.item():.4f}"  # the example tells the two apart


# ---------------------------------------------------------------- right answers, other ways


def test_feed_forward_written_other_right_ways_passes():
    def by_hand(x, lin1, lin2):
        h = x @ lin1.weight.T + lin1.bias
        return gelu(h) @ lin2.weight.T + lin2.bias

    def with_ndtr(x, lin1, lin2):  # Phi is the standard normal's CDF, which torch names ndtr
        h = lin1(x)
        return lin2(h * torch.special.ndtr(h))

    def with_erfc(x, lin1, lin2):  # 1 + erf(z) = 2 - erfc(z) = erfc(-z)
        h = lin1(x)
        return lin2(h * 0.5 * torch.erfc(-h / 2**0.5))

    for fn in (by_hand, with_ndtr, with_erfc):
        assert run(FEED_FORWARD, fn).passed, fn.__name__
    # the exercise's text says so: torch.special.ndtr is allowed, not only torch.erf
    cells = nbformat.read(NOTEBOOK, as_version=4).cells
    text = " ".join(" ".join(c.source for c in cells if c.cell_type == "markdown").split())
    assert "`torch.erf` (or `torch.special.ndtr`, $\\Phi$ itself, if you know it)" in text


# ---------------------------------------------------------------- mistakes, each named


def test_feed_forward_with_relu_is_named():
    failed_with_hint(FEED_FORWARD, lambda x, lin1, lin2: lin2(lin1(x).clamp(min=0)), "relu")


def test_feed_forward_with_erf_of_x_not_x_over_root_two_is_named():
    def feed_forward(x, lin1, lin2):
        h = lin1(x)
        return lin2(h * 0.5 * (1 + torch.erf(h)))  # "Phi(x) = (1 + erf(x)) / 2"

    result = failed_with_hint(FEED_FORWARD, feed_forward, "erf_without_sqrt2")
    assert "rescaled before erf" in result.steps[0]


def test_feed_forward_without_the_half_is_named():
    def feed_forward(x, lin1, lin2):
        h = lin1(x)
        return lin2(h * (1 + torch.erf(h / math.sqrt(2))))

    result = failed_with_hint(FEED_FORWARD, feed_forward, "no_half", words=["twice"])
    assert "from 0 to 2" in result.steps[0] and "erf(x / sqrt(2))" not in result.steps[0]


def test_feed_forward_that_bends_with_phi_alone_is_named():
    def feed_forward(x, lin1, lin2):
        return lin2(0.5 * (1 + torch.erf(lin1(x) / math.sqrt(2))))

    failed_with_hint(FEED_FORWARD, feed_forward, "phi_only", words=["between 0 and 1"])


def test_feed_forward_with_the_tanh_approximation_of_gelu_is_told_apart():
    # the formula from the GELU paper, typed in by hand: off by up to 5e-4 per unit, which
    # every case shows
    def feed_forward(x, lin1, lin2):
        h = lin1(x)
        inner = math.sqrt(2 / math.pi) * (h + 0.044715 * h**3)
        return lin2(0.5 * h * (1 + torch.tanh(inner)))

    result = failed_with_hint(FEED_FORWARD, feed_forward, "gelu_tanh")
    assert "exact" in result.steps[0]
    for case in FEED_FORWARD.case_list():
        ref = FEED_FORWARD.reference(*case.args)
        assert (feed_forward(*case.args) - ref).abs().max() > 10 * FEED_FORWARD.atol


def test_feed_forward_with_the_quick_sigmoid_gelu_is_named():
    def feed_forward(x, lin1, lin2):
        h = lin1(x)
        return lin2(h * torch.sigmoid(1.702 * h))

    failed_with_hint(FEED_FORWARD, feed_forward, "sigmoid_gelu")


def test_feed_forward_with_a_gelu_after_each_layer_is_named():
    def feed_forward(x, lin1, lin2):
        for layer in (lin1, lin2):
            x = gelu(layer(x))
        return x

    failed_with_hint(FEED_FORWARD, feed_forward, "extra_activation")


def test_feed_forward_without_a_bend_is_named():
    failed_with_hint(
        FEED_FORWARD, lambda x, lin1, lin2: nn.Sequential(lin1, lin2)(x), "no_activation"
    )


def test_feed_forward_that_adds_the_residual_is_named():
    def feed_forward(x, lin1, lin2):
        return x + lin2(gelu(lin1(x)))

    result = failed_with_hint(FEED_FORWARD, feed_forward, "residual_inside")
    assert "block" in result.steps[0]


def test_feed_forward_with_the_layers_in_the_other_order_is_named_on_square_layers():
    def feed_forward(x, lin1, lin2):
        return lin1(gelu(lin2(x)))

    result = failed_with_hint(FEED_FORWARD, feed_forward, "swapped", words=["square"])
    assert "wrong order" in result.steps[0]


def test_feed_forward_with_untransposed_weights_is_named():
    def feed_forward(x, lin1, lin2):
        return gelu(x @ lin1.weight + lin1.bias) @ lin2.weight + lin2.bias

    result = failed_with_hint(FEED_FORWARD, feed_forward, "weight_not_transposed")
    assert "(out_features, in_features)" in result.steps[0]


def test_feed_forward_without_the_biases_is_named():
    def feed_forward(x, lin1, lin2):
        return gelu(x @ lin1.weight.T) @ lin2.weight.T

    failed_with_hint(FEED_FORWARD, feed_forward, "no_bias")


def test_feed_forward_that_assumes_three_axes_fails_on_the_other_ranks():
    def feed_forward(x, lin1, lin2):
        B, T, D = x.shape
        flat = x.reshape(B * T, D)  # (B*T, D)
        return lin2(gelu(lin1(flat))).reshape(B, T, D)

    result = failed_with_hint(FEED_FORWARD, feed_forward, words=["raised ValueError", "a 2-D x"])
    assert any("last axis of any tensor" in step for step in result.steps)


def test_feed_forward_that_returns_float32_is_told_about_the_dtype():
    def feed_forward(x, lin1, lin2):
        return lin2(gelu(lin1(x))).float()  # "float32, like the model"

    result = failed_with_hint(
        FEED_FORWARD, feed_forward, words=["float64", "expected dtype torch.float64"]
    )
    assert result.steps[0] == DTYPE_HINT


def test_feed_forward_that_changes_x_in_place_is_caught():
    def feed_forward(x, lin1, lin2):
        x.copy_(lin2(gelu(lin1(x))))  # "saves memory": the result goes into x's storage
        return x

    failed_with_hint(FEED_FORWARD, feed_forward, "in place", words=["`x` in place"])


def test_the_tanh_approximation_is_off_by_up_to_5e_4_as_the_lesson_says():
    z = torch.linspace(-10, 10, 200_001, dtype=torch.float64)
    gap = (F.gelu(z) - F.gelu(z, approximate="tanh")).abs().max().item()
    assert 4e-4 < gap < 5e-4  # 4.7e-4
    assert "is off by up to 5e-4" in lesson_markdown(NOTEBOOK)
