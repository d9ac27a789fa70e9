"""Lesson 07's exercise: the notebook's solution passes, learner-style mistakes get their hint.

Every wrong function here is written the way a learner would write it (loops over heads,
views and transposes, index lists), not taken from the bug list in
course_lib/exercises/lesson07_rope_in_real_models.py.
"""

import re
from pathlib import Path

import nbformat
import pytest
import torch

from course_lib import positional
from course_lib.checks import check_to_rotate_half
from course_lib.exercises.core import run
from course_lib.exercises.lesson07_rope_in_real_models import EXERCISES, TO_ROTATE_HALF
from course_lib.workspace import BEGIN, stub_solutions
from helpers import notebook_functions, stub, verdict

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "07_rope_in_real_models.ipynb"


def _check(fn, bug=None, words=()):
    result = run(TO_ROTATE_HALF, fn)
    assert not result.passed, result.message
    if bug is not None:
        assert result.bug == bug, result.message
        cause = next(b.cause for b in TO_ROTATE_HALF.bugs if b.name == bug)
        assert result.steps[0] == cause
    for word in words:
        assert word in result.message, result.message
    assert result.steps[-1] == f"See {TO_ROTATE_HALF.idea}."
    return result


def test_the_lessons_solution_passes():
    assert run(TO_ROTATE_HALF, notebook_functions("to_rotate_half")["to_rotate_half"]).passed


def test_a_stub_is_not_implemented_yet(capsys):
    out = verdict(check_to_rotate_half, stub, capsys)
    assert out.startswith("TRY AGAIN") and "not implemented yet" in out


def test_the_workspace_stub_says_not_implemented_yet(capsys):
    namespace = {"torch": torch}
    cells = [c for c in nbformat.read(NOTEBOOK, as_version=4).cells if BEGIN in c.source]
    assert len(cells) == len(EXERCISES) == 1
    exec(stub_solutions(cells[0].source), namespace)
    assert "not implemented yet" in verdict(
        check_to_rotate_half, namespace["to_rotate_half"], capsys
    )


def test_the_last_hint_points_to_a_section_and_a_worked_example_the_lesson_has():
    text = "\n".join(
        c.source for c in nbformat.read(NOTEBOOK, as_version=4).cells if c.cell_type == "markdown"
    )
    (heading,) = re.findall(r"'([^']+)'", TO_ROTATE_HALF.idea)
    assert re.search(rf"^#+ {re.escape(heading)}$", text, re.M)
    assert "$(a, c, b, e)$" in text  # the worked example: one vector of width 4


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
    for fn in (by_head_loop, by_index_list, positional.to_rotate_half):
        assert run(TO_ROTATE_HALF, fn).passed, getattr(fn, "__name__", fn)


def whole_width(weight, num_heads):  # every even row of the weight, then every odd one
    return torch.cat((weight[0::2], weight[1::2]))


def the_other_way(weight, num_heads):  # halves of each head interleaved: rotate-half -> pairs
    d = weight.shape[0] // num_heads
    return weight.reshape(num_heads, 2, d // 2, -1).transpose(1, 2).reshape(weight.shape)


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
