"""Lesson 03a_why_scale's exercise: learner-style mistakes get their hint, right answers written
other ways pass.

Every wrong function here is written the way a learner would write it (the Jacobian built with
loops, eye, outer products or a softmax by hand), not taken from the bug list in
course_lib/exercises/lesson03a_why_scale.py.
"""

import math
import re
from pathlib import Path

import pytest
import torch

from course_lib.checks import check_softmax_jacobian
from course_lib.exercises.core import run
from course_lib.exercises.lesson03a_why_scale import SOFTMAX_JACOBIAN, softmax_jacobian_reference
from helpers import failed_with_hint as _check
from helpers import lesson_cells, lesson_markdown

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "03a_why_scale.ipynb"


def softmax_jacobian(scores):  # the derivation, written here independently of the lesson
    w = torch.softmax(scores, -1)
    return torch.diag_embed(w) - w.unsqueeze(-1) * w.unsqueeze(-2)


# ---------------------------------------------------------------- the exercise


def test_the_last_hint_points_to_a_section_the_lesson_has():
    text = lesson_markdown(NOTEBOOK)
    for heading in (
        "The variance of a score grows with $d_k$",
        "A saturated softmax passes almost no gradient",
        "Exercise 1: the softmax's Jacobian",
    ):
        assert f"# {heading}" in text, heading
    assert "'A saturated softmax passes almost no gradient'" in SOFTMAX_JACOBIAN.idea
    assert "torch.diag_embed" in SOFTMAX_JACOBIAN.idea and "torch.diag_embed(x)" in text


def test_no_cell_above_the_exercise_hands_the_learner_the_answer():
    """Above softmax_jacobian no code calls a Jacobian or diag_embed. The course's
    softmax_jacobian is never imported by the lesson (the explorer uses it inside)."""
    code = [c.source for c in lesson_cells(NOTEBOOK) if c.cell_type == "code"]
    at = next(i for i, source in enumerate(code) if "def softmax_jacobian(" in source)
    above = "\n".join(code[:at])
    assert not any(word in above for word in ("jacobian(", "diag_embed", "jacrev", "jacfwd"))
    imported = [s for s in code if "import" in s]
    assert not any(re.search(r"(?<!check_)\bsoftmax_jacobian\b", s) for s in imported)
    assert all("softmax_jacobian(" not in s or "def " in s for s in code[:at])
    assert "check_softmax_jacobian, hint" in code[0]


# ---------------------------------------------------------------- softmax_jacobian


def test_the_jacobian_reference_is_autograd_and_agrees_with_the_formula():
    for case in SOFTMAX_JACOBIAN.case_list():
        (scores,) = case.args
        got = softmax_jacobian_reference(scores)
        assert got.dtype == scores.dtype and got.shape == (*scores.shape, scores.shape[-1])
        torch.testing.assert_close(got, softmax_jacobian(scores), atol=1e-6, rtol=1e-5)
        rows = scores.reshape(-1, scores.shape[-1])
        one_by_one = [torch.autograd.functional.jacobian(lambda r: r.softmax(-1), r) for r in rows]
        torch.testing.assert_close(got.reshape(len(rows), *one_by_one[0].shape),
                                   torch.stack(one_by_one))  # fmt: skip
    with torch.no_grad():  # a caller under no_grad still gets autograd's numbers
        torch.testing.assert_close(softmax_jacobian_reference(torch.zeros(2)),
                                   torch.tensor([[0.25, -0.25], [-0.25, 0.25]]))  # fmt: skip


def loop_jacobian(scores):  # right, entry by entry, for any leading dimensions
    w = torch.softmax(scores, dim=-1)
    T = w.shape[-1]
    J = torch.zeros(*w.shape, T, dtype=w.dtype)
    for i in range(T):
        for j in range(T):
            J[..., i, j] = w[..., i] * ((1.0 if i == j else 0.0) - w[..., j])
    return J


def test_right_jacobians_written_other_ways_pass():
    def with_eye(scores):
        w = scores.softmax(-1)
        eye = torch.eye(w.shape[-1], dtype=w.dtype)
        return w.unsqueeze(-1) * eye - w.unsqueeze(-1) @ w.unsqueeze(-2)

    def with_einsum(scores):
        w = torch.softmax(scores, -1)
        return torch.diag_embed(w) - torch.einsum("...i,...j->...ij", w, w)

    def stable_by_hand(scores):
        e = torch.exp(scores - scores.max(dim=-1, keepdim=True).values)
        w = e / e.sum(dim=-1, keepdim=True)
        return torch.diag_embed(w) - w[..., :, None] * w[..., None, :]

    for fn in (loop_jacobian, with_eye, with_einsum, stable_by_hand):
        assert run(SOFTMAX_JACOBIAN, fn).passed, fn.__name__


def test_jacobian_mistakes_get_their_hint():
    def outer_only(scores):
        w = torch.softmax(scores, -1)
        return -torch.einsum("...i,...j->...ij", w, w)

    def diagonal_only(scores):
        return torch.diag_embed(torch.softmax(scores, -1))

    def flipped(scores):
        w = torch.softmax(scores, -1)
        return w[..., :, None] * w[..., None, :] - torch.diag_embed(w)

    def same_formula_everywhere(scores):
        w = torch.softmax(scores, -1)
        return w.unsqueeze(-1) * (1 - w.unsqueeze(-2))

    def scores_not_weights(scores):
        return torch.diag_embed(scores) - scores.unsqueeze(-1) * scores.unsqueeze(-2)

    def no_keepdim(scores):  # a softmax by hand whose sum loses its axis
        e = torch.exp(scores - scores.max(dim=-1, keepdim=True).values)
        w = e / e.sum(dim=-1)
        return torch.diag_embed(w) - w[..., :, None] * w[..., None, :]

    def softmax_down_the_columns(scores):
        w = torch.softmax(scores, dim=0)
        return torch.diag_embed(w) - w[..., :, None] * w[..., None, :]

    def with_diag(scores):  # torch.diag works on one row
        w = torch.softmax(scores, -1)
        return (
            torch.diag(w) - torch.outer(w, w)
            if w.dim() == 1
            else torch.diag(w) - (w[..., :, None] * w[..., None, :])
        )

    def unstable(scores):
        e = scores.exp()
        w = e / e.sum(-1, keepdim=True)
        return torch.diag_embed(w) - w[..., :, None] * w[..., None, :]

    expected = {
        outer_only: ("outer_only", "diagonal entries are negative"),
        diagonal_only: ("diagonal_only", "off-diagonal entries are all 0"),
        flipped: ("sign", "minus the course's"),
        same_formula_everywhere: ("diagonal_formula_everywhere", "entries are positive"),
        scores_not_weights: ("scores_for_weights", "from the scores, not from the weights"),
        no_keepdim: ("sum_without_keepdim", "do not sum to 1"),
        softmax_down_the_columns: ("softmax_over_first_axis", "wrong axis"),
        with_diag: ("diag_of_a_batch", "diagonal is wrong for a batch"),
        unstable: ("overflow", "NaN for rows whose scores are hundreds apart"),
    }
    for fn, (bug, words) in expected.items():
        _check(SOFTMAX_JACOBIAN, fn, bug, (words,))


def test_a_jacobian_for_2d_batches_only_fails_on_the_3d_case():
    def rows_of_a_matrix(scores):  # written for (rows, T) and nothing else
        w = torch.softmax(scores, -1)
        return torch.stack([torch.diag(r) - torch.outer(r, r) for r in w])

    found = _check(SOFTMAX_JACOBIAN, rows_of_a_matrix)
    assert "a single row of 6 scores" in found.message


def test_calling_autograd_is_refused():
    def autograd(scores):
        rows = scores.reshape(-1, scores.shape[-1])
        J = [torch.autograd.functional.jacobian(lambda r: r.softmax(-1), r) for r in rows]
        return torch.stack(J).reshape(*scores.shape, scores.shape[-1])

    found = _check(SOFTMAX_JACOBIAN, autograd)
    assert found.bug == "forbidden" and "torch.autograd.functional.jacobian" in found.message
    assert found.steps[0] == SOFTMAX_JACOBIAN.forbidden_hint


# torch.func's first use scripts a helper, and torch warns that scripting is deprecated
@pytest.mark.slow  # torch.func warms up for a second
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_every_autograd_route_and_the_courses_jacobian_are_refused():
    """Autograd reached by another name, through .backward(), torch.func or forward mode, and
    the course's own Jacobian called inside the learner's function: each is refused, by what
    is called, not by the name it is called through."""
    from torch.autograd import grad as imported_grad
    from torch.autograd.forward_ad import dual_level, make_dual, unpack_dual
    from torch.func import jacrev, vmap

    def grad_by_another_name(scores):
        s = scores.detach().requires_grad_()
        w = s.softmax(-1)
        rows = [imported_grad(w[..., i].sum(), s, retain_graph=True)[0]
                for i in range(s.shape[-1])]  # fmt: skip
        return torch.stack(rows, -2)

    def with_backward(scores):
        rows = []
        for i in range(scores.shape[-1]):
            s = scores.detach().clone().requires_grad_()
            s.softmax(-1)[..., i].sum().backward()
            rows.append(s.grad)
        return torch.stack(rows, -2)

    def with_jacrev(scores):
        flat = scores.reshape(-1, scores.shape[-1])
        return vmap(jacrev(lambda r: r.softmax(-1)))(flat).reshape(*scores.shape, -1)

    def forward_mode(scores):
        columns = []
        with dual_level():
            for j in range(scores.shape[-1]):
                tangent = torch.zeros_like(scores)
                tangent[..., j] = 1.0
                columns.append(unpack_dual(make_dual(scores, tangent).softmax(-1)).tangent)
        return torch.stack(columns, -1)

    def the_courses(scores):
        return softmax_jacobian_reference(scores)

    for fn in (grad_by_another_name, with_backward, with_jacrev, forward_mode, the_courses):
        found = _check(SOFTMAX_JACOBIAN, fn)
        assert found.bug == "forbidden", (fn.__name__, found.message)
    for name, fn in (("torch.autograd.grad", grad_by_another_name),
                     ("torch.autograd.backward", with_backward),
                     ("torch.func.jacrev", with_jacrev),
                     ("make_dual", forward_mode)):  # fmt: skip
        assert name in run(SOFTMAX_JACOBIAN, fn).message


def test_a_float64_input_must_give_float64():
    def always_float32(scores):
        return softmax_jacobian(scores).float()

    found = _check(SOFTMAX_JACOBIAN, always_float32)
    assert "expected dtype torch.float64" in found.message


def test_the_worked_example_with_two_keys_is_what_the_lesson_says():
    text = lesson_markdown(NOTEBOOK)
    J = softmax_jacobian(torch.tensor([1.0, 0.0], dtype=torch.float64))
    w = torch.softmax(torch.tensor([1.0, 0.0], dtype=torch.float64), -1)
    assert f"$w = ({w[0]:.3f}, {w[1]:.3f})$" in text
    assert f"derivatives are $\\pm {J[0, 0]:.3f}$" in text and math.isclose(J[0, 0], -J[0, 1])
    far = softmax_jacobian(torch.tensor([10.0, 0.0], dtype=torch.float64))
    w_far = torch.softmax(torch.tensor([10.0, 0.0], dtype=torch.float64), -1)[0]
    assert f"$w_1 = {w_far:.5f}$" in text
    assert f"$\\pm {far[0, 0] * 1e5:.1f} \\cdot 10^{{-5}}$" in text
