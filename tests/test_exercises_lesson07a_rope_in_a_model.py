"""Lesson 07a's exercises: learner-style mistakes get their hint.

Every wrong function here is written the way a learner would write it (loops over heads,
views and transposes, index lists, complex numbers, hard-coded axes, a course function
wrapped), not taken from the bug lists in course_lib/exercises/lesson07a_rope_in_a_model/.
"""

import math
import re
from pathlib import Path

import pytest
import torch

from course_lib import positional, variants
from course_lib.checks import check_rope_heads, check_to_rotate_half
from course_lib.exercises.core import DTYPE_HINT, run
from course_lib.exercises.lesson07a_rope_in_a_model import (
    EXERCISES,
    ROPE_HEADS,
    TO_ROTATE_HALF,
)
from course_lib.position_demos import rotate_pair as COURSE_ROTATE
from course_lib.positional import apply_rope as COURSE_APPLY_ROPE
from course_lib.positional import half_layout_order as COURSE_ORDER
from course_lib.positional import to_rotate_half as COURSE_TO_ROTATE_HALF
from helpers import failed_with_hint, lesson_cells
from helpers import refused_as_forbidden as _forbidden

# course functions as a learner who imported them by name would hold them (see _forbidden);
# lesson 06's rotate_pair (COURSE_ROTATE) stays allowed: rope_heads builds on it

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "07a_rope_in_a_model.ipynb"


def _check(*args, **kwargs):
    """_check(fn, ...) for to_rotate_half, _check(ROPE_HEADS, fn, ...) for rope_heads."""
    if args and args[0] is ROPE_HEADS:
        return failed_with_hint(*args, **kwargs)
    return failed_with_hint(TO_ROTATE_HALF, *args, **kwargs)


def test_each_last_hint_points_to_sections_and_worked_examples_the_lesson_has():
    text = "\n".join(c.source for c in lesson_cells(NOTEBOOK) if c.cell_type == "markdown")
    for exercise in EXERCISES:
        headings = re.findall(r"'([^']+)'", exercise.idea)
        assert headings, exercise.idea
        for heading in headings:
            assert re.search(rf"^#+ {re.escape(heading)}$", text, re.M), heading
    assert "$(a, c, b, e)$" in text  # to_rotate_half's worked example: one vector of width 4
    heads = ROPE_HEADS.reference(torch.tensor([[1.0, 0.0]] * 3))  # rope_heads' worked example
    rows = ", ".join(f"[{a:.2f}, {b:.2f}]" for a, b in heads.tolist())
    assert f"`[{rows}]`" in text


def test_each_exercise_says_what_its_check_compares_with_and_refuses():
    cells = lesson_cells(NOTEBOOK)
    for name in ("rope_heads", "to_rotate_half"):
        at = next(i for i, c in enumerate(cells) if f"def {name}(" in c.source)
        text = " ".join(next(c.source for c in reversed(cells[:at]) if c.cell_type == "markdown")
                        .split())  # fmt: skip
        assert f"Write `{name}(" in text and "The check compares yours with" in text, name
        assert "fails it" in text or "fails the check" in text, name


def test_no_cell_above_to_rotate_half_names_or_prints_its_order():
    """The order inside one head is the exercise's answer: nothing above its check prints it,
    calls half_layout_order or shows Hugging Face's permute."""
    cells = lesson_cells(NOTEBOOK)
    at = next(i for i, c in enumerate(cells) if "def to_rotate_half(" in c.source)
    above = "\n".join(c.source for c in cells[:at])
    outputs = "\n".join(o.get("text", "") for c in cells[:at] if c.cell_type == "code"
                        for o in c.get("outputs", []))  # fmt: skip
    for leak in ("half_layout_order", "evens first", "even dimensions first", "transpose",
                 "positional.to_rotate_half", "[0, 2, 4"):  # fmt: skip
        assert leak not in above, leak
        assert leak not in outputs, leak
    assert "def to_rotate_half(" in cells[at].source


def test_every_course_function_that_gives_an_answer_is_forbidden():
    names = {(getattr(m, "__name__", m), a) for e in EXERCISES for m, a in e.forbidden}
    for pair in (("course_lib.positional", "apply_rope"), ("RotaryEmbedding", "forward"),
                 ("course_lib.positional", "to_rotate_half"),
                 ("course_lib.positional", "half_layout_order"),
                 ("course_lib.position_demos", "hf_permute"),
                 ("course_lib.positional", "sinusoidal_encoding"),
                 ("course_lib.position_demos", "sinusoidal_at"),
                 ("course_lib.rope_scaling", "angles_of")):  # fmt: skip
        assert pair in names, pair


def test_no_cell_but_the_solutions_spells_out_the_reordering():
    """Exercise 2's answer is in no cell a learner's copy keeps whole: Hugging Face's permute
    is printed by a course function once the check passes, and the check-yourself answer
    names the reordering without its order."""
    for cell in lesson_cells(NOTEBOOK):
        if cell.get("metadata", {}).get("nbgrader", {}).get("solution"):
            continue
        for leak in ("0, 2, ..", "evens", "even rows", "transpose(1, 2)", "d // 2, 2, "):
            assert leak not in cell.source, (leak, cell.source[:80])


def test_the_reference_makes_rotate_half_give_the_interleaved_scores():
    """The property the exercise asks for, checked on the course's two RoPE functions."""
    g = torch.Generator().manual_seed(0)
    H, d, D, T = 3, 8, 10, 6
    w, b, x = torch.randn(H * d, D, generator=g), torch.randn(H * d, generator=g), torch.randn(T, D)
    where = torch.arange(T)

    def scores(weight, bias, rotate):
        q = (x @ weight.T + bias).view(T, H, d).transpose(0, 1)  # (H, T, d)
        turned = rotate(q, where)
        return turned @ turned.transpose(-1, -2)  # (H, T, T)

    interleaved = scores(w, b, positional.apply_rope)
    ported = scores(TO_ROTATE_HALF.reference(w, H), TO_ROTATE_HALF.reference(b, H),
                    positional.apply_rope_half)  # fmt: skip
    torch.testing.assert_close(ported, interleaved)
    torch.testing.assert_close(TO_ROTATE_HALF.reference(w, H), positional.to_rotate_half(w, H))


# ---------------------------------------------------------------- learner-style versions


def by_head_loop(weight, num_heads):  # each head's even rows, then its odd rows
    d = weight.shape[0] // num_heads
    blocks = []
    for h in range(num_heads):
        head = weight[h * d : (h + 1) * d]
        blocks += [head[0::2], head[1::2]]
    return torch.cat(blocks)


def by_index_list(weight, num_heads):
    d = weight.shape[0] // num_heads
    rows = [h * d + j for h in range(num_heads) for j in [*range(0, d, 2), *range(1, d, 2)]]
    return weight[rows]


def test_right_answers_written_other_ways_pass():
    for fn in (by_head_loop, by_index_list):
        assert run(TO_ROTATE_HALF, fn).passed, fn.__name__


def by_course_order(weight, num_heads):  # the order of one head from the course, the rest own
    d = weight.shape[0] // num_heads
    return weight[torch.cat([h * d + positional.half_layout_order(d) for h in range(num_heads)])]


def test_reorderings_that_wrap_the_courses_are_told_so():
    _forbidden(TO_ROTATE_HALF, lambda w, h: positional.to_rotate_half(w, h),
               "course_lib.positional.to_rotate_half")  # fmt: skip
    _forbidden(TO_ROTATE_HALF, by_course_order, "course_lib.positional.half_layout_order")
    _forbidden(TO_ROTATE_HALF, COURSE_TO_ROTATE_HALF, "course_lib.positional.to_rotate_half")
    _forbidden(
        TO_ROTATE_HALF,
        lambda w, h: COURSE_TO_ROTATE_HALF(w.clone(), h),
        "course_lib.positional.to_rotate_half",
    )
    # the course's order of one head applied across the whole width: told not to call it
    _forbidden(TO_ROTATE_HALF, lambda w, h: w[COURSE_ORDER(w.shape[0])],
               "course_lib.positional.half_layout_order")  # fmt: skip


def by_private_order(weight, num_heads):  # the private order behind half_layout_order
    d = weight.shape[0] // num_heads
    return weight[torch.cat([h * d + positional._evens_then_odds(d) for h in range(num_heads)])]


def test_a_reordering_through_hugging_faces_permute_is_told_so():
    from course_lib import position_demos

    _forbidden(TO_ROTATE_HALF, lambda w, h: position_demos.hf_permute(w, h),
               "course_lib.position_demos.hf_permute")  # fmt: skip


def test_a_reordering_on_the_courses_private_order_is_told_so():
    w = torch.randn(16, 5)
    assert torch.equal(by_private_order(w, 2), COURSE_TO_ROTATE_HALF(w, 2))
    _forbidden(TO_ROTATE_HALF, by_private_order, "course_lib.positional._evens_then_odds")


def whole_width(weight, num_heads):  # every even row of the weight, then every odd one
    return torch.cat((weight[0::2], weight[1::2]))


def the_other_way(weight, num_heads):  # halves of each head interleaved: rotate-half -> pairs
    d = weight.shape[0] // num_heads
    return weight.reshape(num_heads, 2, d // 2, -1).transpose(1, 2).reshape(weight.shape)


def the_other_way_row_by_row(weight, num_heads):  # row 2i gets row i, row 2i + 1 row i + d/2
    d = weight.shape[0] // num_heads
    out = weight.clone()
    for h in range(num_heads):
        for i in range(d // 2):
            out[h * d + 2 * i] = weight[h * d + i]
            out[h * d + 2 * i + 1] = weight[h * d + d // 2 + i]
    return out


def test_the_worked_example_says_width_4_cannot_tell_the_order_from_its_reverse():
    """At d = 4 the right order and its reverse are one permutation, so the worked example
    leaves a learner a coin toss; the lesson says so and points to the d = 8 table, where
    they differ (the `inverse` bug's hint names the mistake)."""
    from course_lib.exercises.lesson07a_rope_in_a_model.to_rotate_half import (
        to_rotate_half_reference,
    )

    for d, same in ((4, True), (8, False)):
        rows = torch.arange(float(d))
        right = to_rotate_half_reference(rows, 1)
        assert torch.equal(the_other_way(rows, 1), right) is same
        assert torch.equal(the_other_way_row_by_row(rows, 1), right) is same
    cells = lesson_cells(NOTEBOOK)
    at = next(i for i, c in enumerate(cells) if "def to_rotate_half(" in c.source)
    text = " ".join(cells[at - 1].source.split())
    assert "$(a, c, b, e)$" in text and "its own reverse" in text
    assert "on the $d = 8$ table of the section 'Two layouts, one rotation'" in text
    assert re.search(r"^## Two layouts, one rotation$", _markdown_text(), re.M)
    assert "\nrotate-half      " in "".join(
        o.get("text", "") for c in cells[:at] if c.cell_type == "code" for o in c.outputs
    )  # the d = 8 table is printed above the exercise


def _markdown_text():
    return "\n".join(c.source for c in lesson_cells(NOTEBOOK) if c.cell_type == "markdown")


def odds_first(weight, num_heads):
    d = weight.shape[0] // num_heads
    blocks = []
    for h in range(num_heads):
        head = weight[h * d : (h + 1) * d]
        blocks += [head[1::2], head[0::2]]
    return torch.cat(blocks)


def columns(weight, num_heads):  # the order is right, the axis is not
    d = weight.shape[0] // num_heads
    order = [h * d + j for h in range(num_heads) for j in [*range(0, d, 2), *range(1, d, 2)]]
    return weight[:, order]


@pytest.mark.parametrize(
    "fn, bug, words",
    [
        (whole_width, "whole_width", ["cross from one head"]),
        (the_other_way, "inverse", ["other way round"]),
        (the_other_way_row_by_row, "inverse", ["other way round", "back to the interleaved"]),
        (odds_first, "odds_first", ["swapped"]),
        (columns, "columns", ["raised IndexError", "columns"]),
    ],
)
def test_mistakes_get_their_hint(fn, bug, words):
    _check(fn, bug, words)


def test_a_view_that_forgets_the_bias_fails_on_the_bias():
    def two_axes_only(weight, num_heads):  # weight.view(H, d // 2, 2, D): a weight, never a bias
        H, D = num_heads, weight.shape[1]
        d = weight.shape[0] // H
        return weight.view(H, d // 2, 2, D).transpose(1, 2).reshape(H * d, D)

    _check(two_axes_only, words=["raised IndexError", "a bias (64,)"])


def test_no_hint_holds_code():
    texts = [b.symptom + " " + b.cause for b in TO_ROTATE_HALF.bugs] + list(TO_ROTATE_HALF.hints)
    for text in texts:
        for code in ("torch.", "arange", "[:, None]", "reshape", "view(", "transpose", "def "):
            assert code not in text, (code, text)


# ---------------------------------------------------------------- rope_heads


def heads_learner(x, *, first=0, layout="pairs", exponent=2, sign=1, one_speed=False):
    """RoPE as a learner writes it from the contract, with one knob per mistake."""
    T, d = x.shape[-2], x.shape[-1]
    i = torch.arange(d // 2, dtype=torch.float64)
    theta = torch.ones_like(i) if one_speed else 10000 ** (-exponent * i / d)  # (d/2,)
    t = torch.arange(first, first + T, dtype=torch.float64)
    angles = sign * t[:, None] * theta  # (T, d/2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    if layout == "pairs":
        a, b = x[..., 0::2], x[..., 1::2]
    else:
        a, b = x[..., : d // 2], x[..., d // 2 :]
    new_a, new_b = a * cos - b * sin, a * sin + b * cos
    if layout == "pairs":
        return torch.stack((new_a, new_b), dim=-1).flatten(-2)
    return torch.cat((new_a, new_b), dim=-1)


def heads_complex(x):  # independent: every pair a complex number, turned by e^(i t theta)
    T, d = x.shape[-2:]
    theta = 10000 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = torch.arange(T, dtype=torch.float64)[:, None] * theta  # (T, d/2)
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], d // 2, 2).contiguous())
    return (
        torch.view_as_real(z * torch.polar(torch.ones_like(angles), angles)).flatten(-2).to(x.dtype)
    )


def heads_by_head_index(x):  # written for (B, H, T, d): x.shape[1] taken as the positions
    d = x.shape[-1]
    theta = 10000 ** (-torch.arange(0, d, 2) / d)
    angles = torch.arange(x.shape[1])[:, None, None] * theta  # (H, 1, d/2): meant (T, d/2)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * angles.cos() - b * angles.sin(),
                        a * angles.sin() + b * angles.cos()), dim=-1).flatten(-2)  # fmt: skip


def heads_angles_transposed(x):  # the angle table built (d/2, T): fits only when T = d/2
    T, d = x.shape[-2:]
    theta = 10000 ** (-torch.arange(0, d, 2) / d)
    angles = theta[:, None] * torch.arange(T)[None, :]  # (d/2, T)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * angles.cos() - b * angles.sin(),
                        a * angles.sin() + b * angles.cos()), dim=-1).flatten(-2)  # fmt: skip


def heads_four_axes_only(x):  # B, H, T, d = x.shape: a hard-coded 4-D input
    B, H, T, d = x.shape
    return heads_learner(x)


def heads_in_place(x):
    rotated = heads_learner(x)
    x[...] = rotated
    return x


def heads_into_empty(x):  # torch.empty(x.shape) is float32 whatever x's dtype
    out = torch.empty(x.shape)
    out[...] = heads_learner(x)
    return out


def test_right_rope_heads_written_other_ways_pass():
    assert run(ROPE_HEADS, heads_learner).passed
    assert run(ROPE_HEADS, heads_complex).passed
    # built on lesson 06's rotate_pair, the course's where the learner skipped it
    assert run(ROPE_HEADS, heads_on_rotate_pair).passed


def heads_on_rotate_pair(x):  # the lesson's route: a (T, d/2) table, pairs on a last axis
    T, d = x.shape[-2:]
    theta = 10000 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = (torch.arange(T, dtype=torch.float64)[:, None] * theta).to(x.dtype)  # (T, d/2)
    return COURSE_ROTATE(x.reshape(*x.shape[:-1], d // 2, 2), angles).reshape(x.shape)


def heads_by_rotary_layer(x):  # the course's layer, as a learner who found it might call it
    return positional.RotaryEmbedding(x.shape[-1])(x)


def heads_by_apply_rope(x):
    return positional.apply_rope(x, torch.arange(x.shape[-2]))


def heads_on_course_angles(x):  # the angle table from the course, the turning the learner's
    T, d = x.shape[-2:]
    angles = positional.rope_angles(torch.arange(T), d, dtype=x.dtype)  # (T, d/2)
    return COURSE_ROTATE(x.reshape(*x.shape[:-1], d // 2, 2), angles).reshape(x.shape)


def test_rope_heads_that_wrap_the_courses_are_told_so():
    _forbidden(ROPE_HEADS, heads_by_rotary_layer, "RotaryEmbedding.__init__")
    _forbidden(ROPE_HEADS, heads_by_apply_rope, "course_lib.positional.apply_rope")
    _forbidden(ROPE_HEADS, heads_on_course_angles, "course_lib.positional.rope_angles")
    _forbidden(
        ROPE_HEADS,
        lambda x: COURSE_APPLY_ROPE(x, torch.arange(x.shape[-2])),
        "course_lib.positional.apply_rope",
    )
    # a layer taken from the trained model, called by its forward
    rotary = variants.load_trained("base", 0).blocks[0].attn.rope
    _forbidden(ROPE_HEADS, lambda x: rotary(x) if x.shape[-1] == 16 else heads_learner(x),
               "RotaryEmbedding.forward")  # fmt: skip
    # positions from 1 around the course's rotation: told not to call it
    _forbidden(ROPE_HEADS, lambda x: COURSE_APPLY_ROPE(x, torch.arange(1, x.shape[-2] + 1)),
               "course_lib.positional.apply_rope")  # fmt: skip


def heads_by_rotate_half(x):  # lesson 07a's other layout, around a reordering and back
    order = positional.half_layout_order(x.shape[-1])
    turned = positional.apply_rope_half(x[..., order], torch.arange(x.shape[-2]))
    return turned[..., order.argsort()]


def heads_on_private_angles(x):  # the private angle table behind rope_angles
    T, d = x.shape[-2:]
    angles = positional._angle_table(torch.arange(T), d, 10000.0, x.dtype)  # (T, d/2)
    return COURSE_ROTATE(x.reshape(*x.shape[:-1], d // 2, 2), angles).reshape(x.shape)


def test_rope_heads_through_the_other_layout_or_private_angles_are_told_so():
    x = torch.randn(2, 3, 5, 8)
    for fn in (heads_by_rotate_half, heads_on_private_angles):
        assert torch.allclose(fn(x), COURSE_APPLY_ROPE(x, torch.arange(5)), atol=1e-5)
    _forbidden(ROPE_HEADS, heads_by_rotate_half, "course_lib.positional.apply_rope_half")
    _forbidden(ROPE_HEADS, heads_on_private_angles, "course_lib.positional._angle_table")


@pytest.mark.parametrize(
    "fn, bug, words",
    [
        (lambda x: heads_learner(x, first=1), "from_one", ["p = 0"]),
        (lambda x: heads_learner(x, layout="half"), "rotate_half", ["position 0"]),
        (heads_by_head_index, "by_head", ["head to head"]),
        (heads_angles_transposed, "transposed", ["pair 0 never turns"]),
        (lambda x: heads_learner(x, exponent=1), "i_over_d", ["too fast"]),
        (lambda x: heads_learner(x, sign=-1), "clockwise", ["clockwise"]),
        (lambda x: heads_learner(x, one_speed=True), "one_speed", ["one speed"]),
    ],
)
def test_rope_heads_mistakes_get_their_hint(fn, bug, words):
    _check(ROPE_HEADS, fn, bug, words)


def test_a_hard_coded_four_axis_input_fails_on_fewer_axes():
    _check(ROPE_HEADS, heads_four_axes_only, "four_axes",
           ["raised ValueError", "exactly four axes", "a 3-D x (H, T, d)"])  # fmt: skip


def test_rope_heads_changing_x_in_place_is_caught():
    result = _check(ROPE_HEADS, heads_in_place, words=["changed its argument `x` in place"])
    assert result.bug == "in place"


def test_rope_heads_float64_must_stay_float64():
    result = _check(ROPE_HEADS, heads_into_empty, words=["expected dtype torch.float64"])
    assert result.steps[0] == DTYPE_HINT


def test_rope_heads_reference_is_torchs_own_rotation_matrix_per_position():
    """Independent of apply_rope: position t, pair i turned by the 2x2 matrix of t * theta_i."""
    x = torch.randn(2, 3, 5, 6, dtype=torch.float64)
    expected = torch.empty_like(x)
    for t in range(5):
        for i in range(3):
            angle = t * 10000 ** (-2 * i / 6)
            c, s = math.cos(angle), math.sin(angle)
            matrix = torch.tensor([[c, -s], [s, c]], dtype=torch.float64)
            expected[..., t, 2 * i : 2 * i + 2] = x[..., t, 2 * i : 2 * i + 2] @ matrix.T
    torch.testing.assert_close(ROPE_HEADS.reference(x), expected)


def heads_on_sinusoidal_table(x):  # lesson 06's table holds sin and cos of RoPE's angles
    T, d = x.shape[-2:]
    pe = positional.sinusoidal_encoding(T, d).to(x.dtype)  # (T, d): sin in 2i, cos in 2i+1
    sin, cos = pe[:, 0::2], pe[:, 1::2]  # (T, d/2) each
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)


def heads_on_sinusoidal_at(x):
    from course_lib import position_demos

    T, d = x.shape[-2:]
    pe = position_demos.sinusoidal_at(torch.arange(T), d).to(x.dtype)  # (T, d)
    pairs = x.unflatten(-1, (d // 2, 2))
    angles = torch.atan2(pe[:, 0::2], pe[:, 1::2])  # (T, d/2): t * theta_i, wrapped
    return COURSE_ROTATE(pairs, angles).flatten(-2)


def heads_on_lesson16_angles(x):
    from course_lib import rope_scaling

    T, d = x.shape[-2:]
    angles = rope_scaling.angles_of(rope_scaling.frequencies(d), T).to(x.dtype)  # (T, d/2)
    return COURSE_ROTATE(x.unflatten(-1, (d // 2, 2)), angles).flatten(-2)


def heads_by_lesson13(x):
    from course_lib.exercises.lesson13a_what_generation_recomputes import rope_from

    return rope_from.rope_from_reference(x, 0)


def test_rope_heads_on_the_courses_sinusoids_or_later_lessons_angles_are_told_so():
    """The route a fresh reader found: lesson 06's sinusoidal table gives the cosines and sines
    of exactly RoPE's angles, and passed the check before it was refused."""
    x = torch.randn(2, 3, 5, 8)
    for fn in (heads_on_sinusoidal_table, heads_on_sinusoidal_at, heads_on_lesson16_angles,
               heads_by_lesson13):  # fmt: skip
        assert torch.allclose(fn(x), COURSE_APPLY_ROPE(x, torch.arange(5)), atol=1e-5), fn
    _forbidden(ROPE_HEADS, heads_on_sinusoidal_table, "course_lib.positional.sinusoidal_encoding")
    _forbidden(ROPE_HEADS, heads_on_sinusoidal_at, "course_lib.position_demos.sinusoidal_at")
    _forbidden(ROPE_HEADS, heads_on_lesson16_angles, "course_lib.rope_scaling.angles_of")
    _forbidden(
        ROPE_HEADS,
        heads_by_lesson13,
        "course_lib.exercises.lesson13a_what_generation_recomputes.rope_from.rope_from_reference",
    )
    # lesson 06's checker reference for sinusoidal_encoding, which earlier_work hands back to a
    # learner who skipped that exercise, calls the course's table: refused the same way
    from course_lib.exercises.lesson06_sinusoidal_and_rope.sinusoidal_encoding import (
        sinusoidal_reference,
    )

    def heads_on_handed_back_table(x):
        T, d = x.shape[-2:]
        pe = sinusoidal_reference(T, d).to(x.dtype)
        sin, cos = pe[:, 0::2], pe[:, 1::2]
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)

    _forbidden(ROPE_HEADS, heads_on_handed_back_table, "course_lib.positional.sinusoidal_encoding")


def heads_by_private_rotation(x):  # the course's private rotation, the angle table own
    T, d = x.shape[-2:]
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)  # (d/2,)
    angles = torch.arange(T, dtype=x.dtype)[:, None] * theta  # (T, d/2)
    return positional._rotate_interleaved(x, angles.cos(), angles.sin())


def test_rope_heads_through_the_private_rotation_are_told_so():
    x = torch.randn(2, 3, 5, 8)
    assert torch.allclose(heads_by_private_rotation(x), ROPE_HEADS.reference(x), atol=1e-6)
    _forbidden(ROPE_HEADS, heads_by_private_rotation, "course_lib.positional._rotate_interleaved")
