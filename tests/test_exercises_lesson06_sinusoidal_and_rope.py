"""Lesson 06's exercises: learner-style mistakes get their hint.

Every wrong function here is written the way a learner would write it (loops, math.cos,
complex numbers, hard-coded axes, a course function wrapped), not taken from the bug list in
course_lib/exercises/lesson06_sinusoidal_and_rope/. RoPE for every head, rope_heads, is
lesson 07a's (tests/test_exercises_lesson07a_rope_in_a_model.py).
"""

import math
import re
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch

from course_lib import position_demos, positional
from course_lib.checks import check_rope_score, check_rotate_pair, check_sinusoidal_encoding
from course_lib.exercises.core import DTYPE_HINT, run
from course_lib.exercises.lesson06_sinusoidal_and_rope import (
    EXERCISES,
    ROPE_SCORE,
    ROTATE_PAIR,
    SINUSOIDAL_ENCODING,
)
from course_lib.position_demos import rope_scores as COURSE_SCORES
from course_lib.position_demos import rotate_pair as COURSE_ROTATE
from course_lib.position_demos import sinusoidal_at as COURSE_AT
from course_lib.positional import sinusoidal_encoding as COURSE_TABLE
from helpers import failed_with_hint as _check
from helpers import lesson_cells, lesson_code, notebook_functions
from helpers import refused_as_forbidden as _forbidden

# the course's functions as a learner who imported them by name before the check would hold
# them: out of reach of the check's watch on the modules' attributes, not of its profile hook

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "06_sinusoidal_and_rope.ipynb"


def _markdown() -> str:
    return "\n".join(c.source for c in lesson_cells(NOTEBOOK) if c.cell_type == "markdown")


# ---------------------------------------------------------------- every exercise


def test_each_last_hint_points_to_a_section_the_lesson_has():
    text = _markdown()
    for exercise in EXERCISES:
        headings = re.findall(r"'([^']+)'", exercise.idea)
        assert headings, exercise.idea
        for heading in headings:
            assert re.search(rf"^#+ {re.escape(heading)}$", text, re.M), heading


def test_the_worked_examples_are_what_the_course_computes():
    text = _markdown()
    pe = SINUSOIDAL_ENCODING.reference(3, 2)
    rows = ", ".join(f"[{a:.2f}, {b:.2f}]" for a, b in pe.tolist())
    assert f"`sinusoidal_encoding(3, 2)` is `[{rows}]`" in text
    turned = ROTATE_PAIR.reference(torch.tensor([[2.0, 0.0], [0.0, 3.0]]), torch.pi / 2)
    torch.testing.assert_close(turned, torch.tensor([[0.0, 2.0], [-3.0, 0.0]]))
    assert "gives\n`[[0.0, 2.0], [-3.0, 0.0]]`" in text
    one = torch.tensor([1.0, 0.0])
    score = ROPE_SCORE.reference(one, one, 1, 0)
    assert f"\\cos 1 \\approx {score:.3f}$" in text


def test_each_exercise_says_what_its_check_compares_with():
    """The lesson imports `positional` and `position_demos`, whose functions meet every
    contract: each exercise's text says the check compares with the course's, and that
    calling the course's fails it."""
    cells = lesson_cells(NOTEBOOK)
    for name in ("sinusoidal_encoding", "rotate_pair", "rope_score"):
        at = next(i for i, c in enumerate(cells) if f"def {name}(" in c.source)
        text = " ".join(next(c.source for c in reversed(cells[:at]) if c.cell_type == "markdown")
                        .split())  # fmt: skip
        assert f"Write `{name}(" in text, name
        assert re.search(r"The check compares yours with|is what the check compares with", text)
        assert re.search(r"fails it|may not call", text), name


def test_the_lessons_rope_score_keeps_float64_precision():
    # its speeds were once made in float32 whatever q's dtype: 1.3e-8 off on the float64 case
    case = ROPE_SCORE.case_list()[-1]
    assert case.args[0].dtype == torch.float64
    got = notebook_functions(*(e.name for e in EXERCISES))["rope_score"](*case.args)
    assert got.dtype == torch.float64
    assert (got - ROPE_SCORE.reference(*case.args)).abs() < 1e-12


def test_no_exercise_text_above_it_holds_its_solution():
    """The rotation's formula appears only after exercise 2 (the picture above it writes no
    coordinates), and the course's RoPE (a few lines from rope_score) first runs in a cell the
    learner can see only as rope_scores, which the check refuses."""
    cells = lesson_cells(NOTEBOOK)
    where = next(i for i, c in enumerate(cells) if "def rotate_pair(" in c.source)
    above = "\n".join(c.source for c in cells[:where])
    for formula in ("-\\sin a", "-sin a", "(-sin", "pmatrix"):  # the second column of R(a)
        assert formula not in above, formula
    assert "turned_basis_figure" in above  # the picture of (1, 0) and (0, 1) turned
    assert "apply_rope" not in "\n".join(c.source for c in cells if c.cell_type == "code")
    assert "rope_heads" not in "\n".join(c.source for c in cells if c.cell_type == "code")


def test_every_course_function_the_lesson_shows_is_forbidden_where_it_is_an_answer():
    """Each course function a lesson cell calls that computes an exercise's answer is in that
    exercise's `forbidden`: a learner who wraps it is told so."""
    names = {(m.__name__, a) for e in EXERCISES for m, a in e.forbidden if hasattr(m, "__name__")}
    code = lesson_code(NOTEBOOK)
    for module, attr in (("course_lib.positional", "sinusoidal_encoding"),
                         ("course_lib.position_demos", "rope_scores")):  # fmt: skip
        assert f"{module.rsplit('.', 1)[1]}.{attr}(" in code
        assert (module, attr) in names
    assert ("course_lib.position_demos", "rotate_pair") in names
    assert ("course_lib.position_demos", "sinusoidal_at") in names


def test_no_hint_holds_code():
    for exercise in EXERCISES:
        texts = [b.symptom + " " + b.cause for b in exercise.bugs] + list(exercise.hints)
        for text in texts:
            for code in ("torch.stack", "torch.cat", "arange", "[:, None]", "reshape", ".cos()",
                         "unflatten", "return torch", "def "):  # fmt: skip
                assert code not in text, (code, text)


# ---------------------------------------------------------------- sinusoidal_encoding


def sinusoidal_loops(seq_len, d_model, *, swap=False, exponent="2i", halves=False,
                     multiply=False, first=0):  # fmt: skip
    pe = torch.zeros(seq_len, d_model)
    for p in range(first, first + seq_len):
        for i in range(d_model // 2):
            power = {"2i": 2 * i, "i": i}[exponent] / d_model
            angle = p * 10000**power if multiply else p / 10000**power
            a, b = (
                (math.cos(angle), math.sin(angle)) if swap else (math.sin(angle), math.cos(angle))
            )
            row = p - first
            if halves:
                pe[row, i], pe[row, d_model // 2 + i] = a, b
            else:
                pe[row, 2 * i], pe[row, 2 * i + 1] = a, b
    return pe


def sinusoidal_by_column(seq_len, d_model):  # each column j gets its own exponent j / D
    pe = torch.zeros(seq_len, d_model)
    for p in range(seq_len):
        for j in range(d_model):
            angle = p / 10000 ** (j / d_model)
            pe[p, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return pe


def sinusoidal_numpy(seq_len, d_model):  # right numbers, numpy's float64
    p = np.arange(seq_len)[:, None]
    angles = p / 10000 ** (np.arange(0, d_model, 2) / d_model)
    pe = np.zeros((seq_len, d_model))
    pe[:, 0::2], pe[:, 1::2] = np.sin(angles), np.cos(angles)
    return torch.from_numpy(pe)


def test_right_sinusoidal_encodings_written_other_ways_pass():
    assert run(SINUSOIDAL_ENCODING, sinusoidal_loops).passed


def sinusoidal_from_course_angles(seq_len, d_model):  # the angles from the course, the rest own
    angles = positional.rope_angles(torch.arange(seq_len), d_model)  # (T, D/2)
    pe = torch.zeros(seq_len, d_model)
    pe[:, 0::2], pe[:, 1::2] = angles.sin(), angles.cos()
    return pe


def test_sinusoidal_encodings_that_wrap_the_courses_are_told_so():
    _forbidden(SINUSOIDAL_ENCODING, lambda T, D: positional.sinusoidal_encoding(T, D),
               "course_lib.positional.sinusoidal_encoding")  # fmt: skip
    _forbidden(SINUSOIDAL_ENCODING,
               lambda T, D: position_demos.sinusoidal_at(torch.arange(T), D),
               "course_lib.position_demos.sinusoidal_at")  # fmt: skip
    _forbidden(SINUSOIDAL_ENCODING, sinusoidal_from_course_angles,
               "course_lib.positional.rope_angles")  # fmt: skip
    _forbidden(
        SINUSOIDAL_ENCODING,
        lambda T, D: COURSE_TABLE(T, D),
        "course_lib.positional.sinusoidal_encoding",
    )
    _forbidden(
        SINUSOIDAL_ENCODING,
        lambda T, D: COURSE_AT(torch.arange(T), D),
        "course_lib.position_demos.sinusoidal_at",
    )


def sinusoidal_from_rotary_tables(seq_len, d_model):  # a RotaryEmbedding's sin and cos tables
    rotary = positional.RotaryEmbedding(d_model, max_len=seq_len)
    return torch.stack((rotary.sin, rotary.cos), dim=-1).flatten(1)  # (T, D/2, 2) -> (T, D)


def sinusoidal_from_rotated_units(seq_len, d_model):  # (0, 1) pairs turned by apply_rope
    units = torch.tensor([0.0, 1.0]).repeat(seq_len, d_model // 2)  # (T, D)
    turned = positional.apply_rope(units, torch.arange(seq_len))  # pairs (-sin, cos)
    return turned * torch.tensor([-1.0, 1.0]).repeat(d_model // 2)  # (sin, cos)


def sinusoidal_from_rotate_half(seq_len, d_model):  # the same with lesson 07a's layout
    units = torch.cat((torch.zeros(seq_len, d_model // 2), torch.ones(seq_len, d_model // 2)), 1)
    turned = positional.apply_rope_half(units, torch.arange(seq_len))  # (-sin..., cos...)
    return torch.stack((-turned[:, : d_model // 2], turned[:, d_model // 2 :]), -1).flatten(1)


def sinusoidal_from_private_angles(seq_len, d_model):
    angles = positional._angle_table(torch.arange(seq_len), d_model, 10000.0, torch.float32)
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(1)


def test_sinusoidal_encodings_from_the_courses_rope_are_told_so():
    """The routes through RoPE's tables (same angles as the table): refused, not passed."""
    for fn in (sinusoidal_from_rotary_tables, sinusoidal_from_rotated_units,
               sinusoidal_from_rotate_half, sinusoidal_from_private_angles):  # fmt: skip
        assert torch.allclose(fn(12, 8), COURSE_TABLE(12, 8), atol=1e-6), fn.__name__
    _forbidden(SINUSOIDAL_ENCODING, sinusoidal_from_rotary_tables, "RotaryEmbedding.__init__")
    _forbidden(SINUSOIDAL_ENCODING, sinusoidal_from_rotated_units,
               "course_lib.positional.apply_rope")  # fmt: skip
    _forbidden(SINUSOIDAL_ENCODING, sinusoidal_from_rotate_half,
               "course_lib.positional.apply_rope_half")  # fmt: skip
    _forbidden(SINUSOIDAL_ENCODING, sinusoidal_from_private_angles,
               "course_lib.positional._angle_table")  # fmt: skip


def test_a_wrong_table_built_on_the_courses_is_told_not_to_call_it():
    def swapped_columns(seq_len, d_model):  # the course's table with sin and cos traded
        pe = COURSE_TABLE(seq_len, d_model)
        return pe.reshape(seq_len, -1, 2).flip(-1).reshape(seq_len, d_model)

    _forbidden(SINUSOIDAL_ENCODING, swapped_columns, "course_lib.positional.sinusoidal_encoding")


@pytest.mark.parametrize(
    "fn, bug, words",
    [
        (lambda T, D: sinusoidal_loops(T, D, swap=True), "swapped", ["even columns hold cos"]),
        (lambda T, D: sinusoidal_loops(T, D, exponent="i"), "i_over_d", ["too gently"]),
        (sinusoidal_by_column, "column_exponent", ["odd ones are not"]),
        (lambda T, D: sinusoidal_loops(T, D, halves=True), "halves", ["only sines"]),
        (lambda T, D: sinusoidal_loops(T, D, multiply=True), "multiply", ["faster"]),
        (lambda T, D: sinusoidal_loops(T, D, first=1), "from_one", ["first row"]),
    ],
)
def test_sinusoidal_mistakes_get_their_hint(fn, bug, words):
    _check(SINUSOIDAL_ENCODING, fn, bug, words)


def sinusoidal_row_of_positions(seq_len, d_model):  # positions as a row: (T,) / (D/2,)
    positions = torch.arange(seq_len)
    speeds = 10000 ** (torch.arange(0, d_model, 2) / d_model)
    angles = positions / speeds
    pe = torch.zeros(seq_len, d_model)
    pe[:, 0::2], pe[:, 1::2] = angles.sin(), angles.cos()
    return pe


def test_positions_as_a_row_are_told_to_make_a_column():
    _check(SINUSOIDAL_ENCODING, sinusoidal_row_of_positions, "row_of_positions",
           ["raised RuntimeError", "(T, D/2) table"])  # fmt: skip


def test_a_float64_table_fails_on_its_dtype():
    result = _check(SINUSOIDAL_ENCODING, sinusoidal_numpy, words=["expected dtype torch.float32"])
    assert result.steps[0] == DTYPE_HINT


def test_a_transposed_table_fails_on_its_shape():
    _check(SINUSOIDAL_ENCODING, lambda T, D: sinusoidal_loops(T, D).T, words=["expected shape"])


# ---------------------------------------------------------------- rotate_pair


def rotate_learner(pair, angle, *, clockwise=False, overwrite=False, swap=False, minus=True):
    angle = torch.as_tensor(angle)
    if clockwise:
        angle = -angle
    c, s = (angle.sin(), angle.cos()) if swap else (angle.cos(), angle.sin())
    out = pair.clone()
    sign = -1 if minus else 1
    out[..., 0] = pair[..., 0] * c + sign * pair[..., 1] * s
    source = out if overwrite else pair
    out[..., 1] = source[..., 0] * s + pair[..., 1] * c
    return out


def rotate_complex(pair, angle):  # pairs as complex numbers, turned by e^(i angle)
    z = torch.view_as_complex(pair.contiguous())
    return torch.view_as_real(z * torch.exp(1j * torch.as_tensor(angle, dtype=pair.dtype)))


def rotate_matrix(pair, angle):  # a (..., 2, 2) rotation matrix for every angle
    angle = torch.as_tensor(angle, dtype=pair.dtype)
    c, s = angle.cos(), angle.sin()
    matrix = torch.stack((torch.stack((c, -s), -1), torch.stack((s, c), -1)), -2)  # (..., 2, 2)
    return (matrix @ pair[..., None])[..., 0]


def rotate_math(pair, angle):  # math.cos: fine for a number, not for a tensor of angles
    x, y = pair[..., 0], pair[..., 1]
    c, s = math.cos(angle), math.sin(angle)
    return torch.stack((x * c - y * s, x * s + y * c), dim=-1)


def rotate_tensor_only(pair, angle):  # angle.cos(): fine for a tensor, not for a number
    x, y = pair[..., 0], pair[..., 1]
    return torch.stack(
        (x * angle.cos() - y * angle.sin(), x * angle.sin() + y * angle.cos()), dim=-1
    )


def rotate_on_last_axis(pair, angle):  # cos and sin meet (x, y), not the pairs
    angle = torch.as_tensor(angle)
    quarter = torch.stack((-pair[..., 1], pair[..., 0]), dim=-1)
    return pair * angle.cos() + quarter * angle.sin()


def rotate_in_place(pair, angle):
    angle = torch.as_tensor(angle)
    x, y = pair[..., 0].clone(), pair[..., 1].clone()
    pair[..., 0] = x * angle.cos() - y * angle.sin()
    pair[..., 1] = x * angle.sin() + y * angle.cos()
    return pair


def rotate_into_zeros(pair, angle):  # torch.zeros makes float32 whatever pair's dtype
    angle = torch.as_tensor(angle)
    out = torch.zeros(pair.shape)
    out[..., 0] = pair[..., 0] * angle.cos() - pair[..., 1] * angle.sin()
    out[..., 1] = pair[..., 0] * angle.sin() + pair[..., 1] * angle.cos()
    return out


def test_right_rotations_written_other_ways_pass():
    for fn in (rotate_learner, rotate_complex, rotate_matrix):
        assert run(ROTATE_PAIR, fn).passed, fn.__name__


def test_rotations_that_wrap_the_courses_are_told_so():
    _forbidden(ROTATE_PAIR, lambda pair, angle: position_demos.rotate_pair(pair, angle),
               "course_lib.position_demos.rotate_pair")  # fmt: skip
    _forbidden(
        ROTATE_PAIR, COURSE_ROTATE, "course_lib.position_demos.rotate_pair"
    )  # handed over as it is
    _forbidden(
        ROTATE_PAIR,
        lambda pair, angle: COURSE_ROTATE(pair.clone(), angle),
        "course_lib.position_demos.rotate_pair",
    )
    # clockwise around the course's: told not to call it, whatever it got wrong
    _forbidden(ROTATE_PAIR, lambda pair, angle: COURSE_ROTATE(pair, -torch.as_tensor(angle)),
               "course_lib.position_demos.rotate_pair")  # fmt: skip


def rotate_by_private_interleaved(pair, angle):  # the rotation inside the course's RoPE
    angle = torch.as_tensor(angle, dtype=pair.dtype)
    cos, sin = angle.cos()[..., None], angle.sin()[..., None]  # (..., 1)
    return positional._rotate_interleaved(pair, cos, sin)


def rotate_by_private_half(pair, angle):  # its rotate-half twin: a width of 2 is one pair too
    angle = torch.as_tensor(angle, dtype=pair.dtype)
    return positional._rotate_half(pair, angle.cos()[..., None], angle.sin()[..., None])


def test_rotations_by_the_courses_private_rope_are_told_so():
    pair = torch.randn(5, 2)
    for fn in (rotate_by_private_interleaved, rotate_by_private_half):
        assert torch.allclose(fn(pair, 0.7), COURSE_ROTATE(pair, 0.7), atol=1e-6), fn.__name__
    _forbidden(ROTATE_PAIR, rotate_by_private_interleaved,
               "course_lib.positional._rotate_interleaved")  # fmt: skip
    _forbidden(ROTATE_PAIR, rotate_by_private_half, "course_lib.positional._rotate_half")


@pytest.mark.parametrize(
    "fn, bug, words",
    [
        (lambda p, a: rotate_learner(p, a, clockwise=True), "clockwise", ["to (0, -1)"]),
        (lambda p, a: rotate_learner(p, a, overwrite=True), "overwrite", ["new y is not"]),
        (lambda p, a: rotate_learner(p, a, swap=True), "swapped", ["minus the angle"]),
        (lambda p, a: rotate_learner(p, a, minus=False), "no_minus", ["(0, 1) does not"]),
        (lambda p, a: rotate_learner(p, a).flip(-1), "order", ["(new y, new x)"]),
        (rotate_on_last_axis, "angle_on_last_axis", ["two pairs, an angle for each"]),
    ],
)
def test_rotate_pair_mistakes_get_their_hint(fn, bug, words):
    _check(ROTATE_PAIR, fn, bug, words)


def test_numbers_and_tensors_as_angles_are_both_tried_and_named():
    _check(ROTATE_PAIR, rotate_math, "math_on_tensor",
           ["raised ValueError", "math.cos", "two pairs, an angle for each"])  # fmt: skip
    _check(ROTATE_PAIR, rotate_tensor_only, "method_on_number",
           ["raised AttributeError", "Python number", "(1, 0)"])  # fmt: skip


def test_angles_broadcast_down_a_grid_of_pairs():
    def one_angle_per_row(pair, angle):  # angle[..., None]: one angle per row, not per column
        angle = torch.as_tensor(angle, dtype=pair.dtype)
        angle = angle[..., None] if angle.dim() == 1 and pair.dim() == 3 else angle
        return rotate_learner(pair, angle)

    _check(ROTATE_PAIR, one_angle_per_row, words=["one per column, shared down the rows"])


def test_rotating_the_argument_in_place_is_caught():
    result = _check(ROTATE_PAIR, rotate_in_place, words=["changed its argument `pair` in place"])
    assert result.bug == "in place"


def test_float64_pairs_must_give_float64_pairs():
    result = _check(ROTATE_PAIR, rotate_into_zeros, words=["expected dtype torch.float64"])
    assert "float64 pairs" in result.message and result.steps[0] == DTYPE_HINT


# ---------------------------------------------------------------- rope_score


def score_loops(q, k, m, n, *, layout="pairs", exponent="2i", q_at=None, k_at=None,
                clockwise=False, one_speed=False):  # fmt: skip
    d = q.shape[0]
    q_at = m if q_at is None else q_at
    k_at = n if k_at is None else k_at
    total = torch.zeros((), dtype=q.dtype)
    for i in range(d // 2):
        a, b = (2 * i, 2 * i + 1) if layout == "pairs" else (i, i + d // 2)
        theta = 1.0 if one_speed else 10000 ** (-{"2i": 2 * i, "i": i}[exponent] / d)
        turn_q, turn_k = q_at * theta, k_at * theta
        if clockwise:
            turn_q, turn_k = -turn_q, -turn_k
        qx = q[a] * math.cos(turn_q) - q[b] * math.sin(turn_q)
        qy = q[a] * math.sin(turn_q) + q[b] * math.cos(turn_q)
        kx = k[a] * math.cos(turn_k) - k[b] * math.sin(turn_k)
        ky = k[a] * math.sin(turn_k) + k[b] * math.cos(turn_k)
        total = total + qx * kx + qy * ky
    return total


def score_complex(q, k, m, n):  # independent: q . k = Re(sum z_q conj(z_k))
    d = q.shape[0]
    theta = 10000 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    zq = torch.view_as_complex(q.double().reshape(-1, 2).contiguous()) * torch.exp(1j * m * theta)
    zk = torch.view_as_complex(k.double().reshape(-1, 2).contiguous()) * torch.exp(1j * n * theta)
    return (zq * zk.conj()).real.sum().to(q.dtype)


def test_right_scores_written_other_ways_pass():
    assert run(ROPE_SCORE, score_loops).passed
    assert run(ROPE_SCORE, score_complex).passed


def score_by_apply_rope(q, k, m, n):  # the course's rotation of whole vectors
    q_m = positional.apply_rope(q[None], torch.tensor([m]))[0]
    k_n = positional.apply_rope(k[None], torch.tensor([n]))[0]
    return (q_m * k_n).sum()


def score_by_rotary_layer(q, k, m, n):  # RotaryEmbedding turns rows 0..T-1: pick rows m and n
    length = max(m, n) + 1
    rotary = positional.RotaryEmbedding(q.shape[0], max_len=length)
    q_rows, k_rows = rotary(q.expand(length, -1)), rotary(k.expand(length, -1))  # (T, d) each
    return (q_rows[m] * k_rows[n]).sum()


def score_by_rotate_half(q, k, m, n):  # lesson 07a's layout on q and k reordered for it
    order = positional.half_layout_order(q.shape[0])
    q_m = positional.apply_rope_half(q[order][None], torch.tensor([m]))[0]
    k_n = positional.apply_rope_half(k[order][None], torch.tensor([n]))[0]
    return (q_m * k_n).sum()


def score_by_private_tables(q, k, m, n):  # the course's private cos and sin, turned by hand
    d = q.shape[0]
    cos, sin = positional._cos_sin(torch.tensor([m, n]), d, 10000.0, q.dtype)  # (2, d/2) each
    q_m = COURSE_ROTATE(q.reshape(-1, 2), torch.atan2(sin[0], cos[0]))
    k_n = COURSE_ROTATE(k.reshape(-1, 2), torch.atan2(sin[1], cos[1]))
    return (q_m * k_n).sum()


def test_rope_scores_through_the_other_layout_or_private_tables_are_told_so():
    q, k = torch.randn(8), torch.randn(8)
    for fn in (score_by_rotate_half, score_by_private_tables):
        assert torch.allclose(fn(q, k, 5, 2), COURSE_SCORES(q, k, 5, 2)[0], atol=1e-5)
    _forbidden(ROPE_SCORE, score_by_rotate_half, "course_lib.positional.apply_rope_half")
    _forbidden(ROPE_SCORE, score_by_private_tables, "course_lib.positional._cos_sin")


def test_rope_scores_that_wrap_the_courses_are_told_so():
    _forbidden(ROPE_SCORE, lambda q, k, m, n: position_demos.rope_scores(q, k, m, n)[0],
               "course_lib.position_demos.rope_scores")  # fmt: skip
    _forbidden(ROPE_SCORE, score_by_apply_rope, "course_lib.positional.apply_rope")
    _forbidden(ROPE_SCORE, score_by_rotary_layer, "RotaryEmbedding.__init__")
    _forbidden(
        ROPE_SCORE,
        lambda q, k, m, n: COURSE_SCORES(q, k, m, n)[0],
        "course_lib.position_demos.rope_scores",
    )
    # the two positions swapped around the course's scores: told not to call it
    _forbidden(ROPE_SCORE, lambda q, k, m, n: COURSE_SCORES(q, k, n, m)[0],
               "course_lib.position_demos.rope_scores")  # fmt: skip


@pytest.mark.parametrize(
    "fn, bug, words",
    [
        (lambda q, k, m, n: score_loops(q, k, m, n, k_at=m), "both_by_m", ["plain q . k"]),
        (lambda q, k, m, n: (q * k).sum(), "both_by_m", ["unturned vectors"]),
        (lambda q, k, m, n: score_loops(q, k, n, m), "swapped", ["m and n swapped"]),
        (lambda q, k, m, n: score_loops(q, k, m, n, clockwise=True), "swapped", ["swapped"]),
        (lambda q, k, m, n: score_loops(q, k, m, n, k_at=0), "only_q", ["not with n"]),
        (lambda q, k, m, n: score_loops(q, k, m, n, q_at=0), "only_k", ["not with m"]),
        (lambda q, k, m, n: score_loops(q, k, m, n, layout="half"), "rotate_half", ["single"]),
        (lambda q, k, m, n: score_loops(q, k, m, n, exponent="i"), "i_over_d", ["too fast"]),
        (lambda q, k, m, n: score_loops(q, k, m, n, one_speed=True), "one_speed", ["one speed"]),
    ],
)
def test_rope_score_mistakes_get_their_hint(fn, bug, words):
    _check(ROPE_SCORE, fn, bug, words)


def test_both_turned_by_m_is_told_its_real_cause():
    result = run(ROPE_SCORE, lambda q, k, m, n: score_loops(q, k, m, n, k_at=m))
    assert "both by m" in result.steps[0] and "never changes their dot product" in result.steps[0]


def test_a_python_float_or_a_float32_score_from_float64_vectors_fails():
    _check(ROPE_SCORE, lambda q, k, m, n: score_loops(q, k, m, n).item(),
           words=["expected a torch.Tensor"])  # fmt: skip
    result = _check(ROPE_SCORE, lambda q, k, m, n: score_loops(q.float(), k.float(), m, n),
                    words=["expected dtype torch.float64", "float64 q and k"])  # fmt: skip
    assert result.steps[0] == DTYPE_HINT


# ---------------------------------------------------------------- a workspace from before


def _workspace_lesson(path, *sources):
    notebook = nbformat.v4.new_notebook()
    for source in sources:
        cell = nbformat.v4.new_code_cell(source)
        cell.metadata["nbgrader"] = {"solution": True, "grade": False, "grade_id": "x",
                                     "locked": False, "schema_version": 3}  # fmt: skip
        notebook.cells.append(cell)
    nbformat.write(notebook, path)


def test_a_workspace_keeps_finding_your_rope_in_04_positional_encoding(tmp_path):
    """A learner who wrote rope_heads in the lesson this one replaced, and has lesson 06 with
    its stubs beside it (an earlier copy of lesson 06 held rope_heads), gets their own: FORMER
    maps both new lessons to the old file."""
    from course_lib.exercises import FORMER, former_files
    from course_lib.mywork import collect

    assert FORMER["06_sinusoidal_and_rope"] == ("04_positional_encoding",)
    assert "04_positional_encoding" in FORMER["07a_rope_in_a_model"]  # where rope_heads is now
    _workspace_lesson(tmp_path / "04_positional_encoding.ipynb",
                      "def rope_heads(x):\n    return 'mine, from 04'")  # fmt: skip
    _workspace_lesson(
        tmp_path / "06_sinusoidal_and_rope.ipynb",
        "def rope_heads(x):\n    raise NotImplementedError('Exercise rope_heads: write ...')",
        "def rotate_pair(pair, angle):\n    return 'mine, in 06'",
    )
    assert [p.name for p in former_files(tmp_path, "06_sinusoidal_and_rope")] == [
        "04_positional_encoding.ipynb"
    ]
    work = collect(["rope_heads", "rotate_pair", "to_rotate_half"], tmp_path)
    assert work.origin == {
        "rope_heads": "lesson 07a: yours in 04_positional_encoding.ipynb",
        "rotate_pair": "lesson 06: yours",
        "to_rotate_half": "lesson 07a: the course's (no definition of yours found in this folder)",
    }
    assert work.functions["rope_heads"](None) == "mine, from 04"


def score_by_private_angles(q, k, m, n):  # the course's private angle table, turned by hand
    angles = positional._angle_table(torch.tensor([m, n]), q.shape[0], 10000.0, q.dtype)
    q_m = COURSE_ROTATE(q.reshape(-1, 2), angles[0])  # (d/2, 2)
    k_n = COURSE_ROTATE(k.reshape(-1, 2), angles[1])
    return (q_m * k_n).sum()


def score_by_private_rotation(q, k, m, n):  # the course's private rotation, the angles own
    d = q.shape[0]
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=q.dtype) / d)  # (d/2,)
    q_m = positional._rotate_interleaved(q, (m * theta).cos(), (m * theta).sin())  # (d,)
    k_n = positional._rotate_interleaved(k, (n * theta).cos(), (n * theta).sin())
    return (q_m * k_n).sum()


def test_rope_scores_through_the_private_angles_or_rotation_are_told_so():
    q, k = torch.randn(8), torch.randn(8)
    for fn in (score_by_private_angles, score_by_private_rotation):
        assert torch.allclose(fn(q, k, 5, 2), COURSE_SCORES(q, k, 5, 2)[0], atol=1e-5)
    _forbidden(ROPE_SCORE, score_by_private_angles, "course_lib.positional._angle_table")
    _forbidden(ROPE_SCORE, score_by_private_rotation, "course_lib.positional._rotate_interleaved")


def score_by_course_table(q, k, m, n):  # the fresh read's route: RoPE's angles from the table
    table = positional.sinusoidal_encoding(max(m, n) + 1, q.shape[0])  # row p: sin, cos of p*theta
    turned = []
    for v, p in ((q, m), (k, n)):
        sin, cos = table[p, 0::2].to(v.dtype), table[p, 1::2].to(v.dtype)  # (d/2,) each
        a, b = v[0::2], v[1::2]
        turned.append(torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten())
    return (turned[0] * turned[1]).sum()


def test_rope_score_through_the_courses_sinusoidal_table_is_told_so():
    q, k = torch.randn(8), torch.randn(8)
    assert torch.allclose(
        score_by_course_table(q, k, 5, 2), COURSE_SCORES(q, k, 5, 2)[0], atol=1e-5
    )
    _forbidden(ROPE_SCORE, score_by_course_table, "course_lib.positional.sinusoidal_encoding")
