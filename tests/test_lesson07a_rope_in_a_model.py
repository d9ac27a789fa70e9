"""Lesson 07a's claims, each measured: the learner's RoPE in the learner's multi-head
attention runs a trained model, the example of regrouping a last axis, the two RoPE layouts
are one rotation up to a reordering, what mixing them up costs the trained model (predicted
first) and what porting gives back (and that re-running those cells gives the same answer),
and Hugging Face's permute, printed once the learner's reordering passes its check.

Numbers the lesson prints are checked at the precision it prints them. Lesson 07b's claims are
tests/test_lesson07b_positions_past_training.py.
"""

from pathlib import Path

import nbformat
import pytest
import torch

from course_lib import corpus, position_demos, positional, variants
from course_lib.checks import check_to_rotate_half
from course_lib.exercises.core import run
from course_lib.exercises.lesson07a_rope_in_a_model import (
    rope_heads_reference,
    to_rotate_half_reference,
)
from course_lib.show import judge_prediction
from course_lib.train import token_losses
from helpers import lesson_markdown, lesson_outputs, notebook_functions

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "07a_rope_in_a_model.ipynb"


def test_the_regrouping_example_prints_what_it_says():
    t = torch.arange(24.0).reshape(2, 2, 6)
    groups = t.unflatten(-1, (2, 3))
    assert groups.shape == (2, 2, 2, 3) and torch.equal(groups.flatten(-2), t)
    assert torch.equal(t.reshape(*t.shape[:-1], 2, 3), groups)  # "does what unflatten does"
    out = lesson_outputs(NOTEBOOK)
    assert f"groups[0, 1]:            {groups[0, 1].tolist()}" in out
    assert f"each group's sum:        {groups.sum(dim=-1)[0, 1].tolist()}" in out
    assert "flattened back equals t: True" in out


# ---------------------------------------------------------------- two layouts, one rotation


@pytest.mark.parametrize("seed", range(5))
def test_rotate_then_reorder_is_reorder_then_rotate_half(seed, measure):
    g = torch.Generator().manual_seed(seed)
    x, where = torch.randn(3, 16, generator=g), torch.arange(3)
    order = positional.half_layout_order(16)
    gap = (positional.apply_rope(x, where)[:, order]
           - positional.apply_rope_half(x[:, order], where)).abs().max()  # fmt: skip
    # the same arithmetic in another order: 0 or one rounding step; printed as 0.000000
    assert measure("|rotate, reorder - reorder, rotate half|", gap) < 5e-7


def test_the_score_table_agrees_when_reordered_and_only_at_offset_0_as_they_are():
    reorder = notebook_functions("to_rotate_half")["to_rotate_half"]
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(16, generator=g), torch.randn(16, generator=g)
    out = lesson_outputs(NOTEBOOK)
    for offset in (0, 1, 4, 16):
        ours = position_demos.rope_scores(q, k, 20 + offset, 20)[0]
        mixed = position_demos.rope_scores(q, k, 20 + offset, 20, layout="half")[0]
        ported = position_demos.rope_scores(reorder(q, 1), reorder(k, 1), 20 + offset, 20,
                                            layout="half")[0]  # fmt: skip
        assert f"{ours:.2f}" == f"{ported:.2f}"
        assert (f"{mixed:.2f}" == f"{ours:.2f}") == (offset == 0)
        assert f"{offset:6d}   {ours:11.2f}   {mixed:17.2f}   {ported:15.2f}" in out
    assert "reordering: yours" in out


def test_the_code_the_lesson_describes_says_what_it_says():
    """The lesson's claims about Meta's and Hugging Face's code, as the course writes them
    (checked against those files: Meta's llama/model.py apply_rotary_emb, Hugging Face's
    modeling_llama.py rotate_half and convert_llama_weights_to_hf.py permute): Meta's
    complex-number form pairs neighbours (apply_rope), rotate_half pairs i with i + d/2
    (apply_rope_half), and Hugging Face's permute (view as (H, d/2, 2, D), swap the two inner
    axes) is the exercise's reference. GPT-NeoX's rotate-half on a quarter of each head
    (rotary_pct = 0.25, modeling_gpt_neox.py's query_rot / query_pass) is stated in words."""
    g = torch.Generator().manual_seed(4)
    x, where, d = torch.randn(2, 5, 8, generator=g), torch.arange(5), 8
    theta = 10000 ** (-torch.arange(0, d, 2).float() / d)
    freqs = torch.polar(torch.ones(5, d // 2), where[:, None].float() * theta)  # (T, d/2)
    meta = torch.view_as_real(torch.view_as_complex(x.reshape(2, 5, d // 2, 2)) * freqs)
    torch.testing.assert_close(meta.flatten(-2), positional.apply_rope(x, where))
    cos, sin = torch.cat((freqs.real, freqs.real), -1), torch.cat((freqs.imag, freqs.imag), -1)
    halves = torch.cat((-x[..., d // 2 :], x[..., : d // 2]), dim=-1)
    torch.testing.assert_close(x * cos + halves * sin, positional.apply_rope_half(x, where))
    w = torch.randn(3 * d, 7, generator=g)
    permuted = w.view(3, d // 2, 2, 7).transpose(1, 2).reshape(3 * d, 7)
    torch.testing.assert_close(to_rotate_half_reference(w, 3), permuted)


# ---------------------------------------------------------------- the trained model, ported


def _code_cell(starts: str) -> str:
    cells = nbformat.read(NOTEBOOK, as_version=4).cells
    (source,) = [c.source for c in cells if c.cell_type == "code" and c.source.startswith(starts)]
    return source


@pytest.fixture(scope="module")
def excess_on_valid():
    valid = corpus.load_split("valid")

    def excess(model):
        return corpus.excess_loss(token_losses(model, valid), "valid")["all"]

    return excess


@pytest.mark.slow
def test_the_learners_multihead_and_rope_run_the_trained_model_to_its_excess(
    measure, excess_on_valid
):
    mine = notebook_functions("multihead", "rope_heads")
    model = variants.load_trained("base", 0)
    excess = excess_on_valid
    course = excess(model)
    yours = excess(position_demos.with_attention(model, mine["multihead"], mine["rope_heads"]))
    bare = excess(position_demos.with_attention(model, mine["multihead"], None))
    reference = excess(position_demos.with_attention(model, mine["multihead"],
                                                     rope_heads_reference))  # fmt: skip
    # native/generic paths: course and yours differ by ~1e-8; printed at four decimals
    assert measure("|yours - course| excess", abs(yours - course)) < 1e-5
    assert abs(reference - course) < 1e-5
    assert f"{course:.4f}" == f"{yours:.4f}" == "0.0083"
    assert f"{bare:.4f}" == "2.3391"
    assert course == pytest.approx(variants.trained_card("base", 0)["excess"]["valid"]["all"],
                                   abs=1e-4)  # fmt: skip
    out = lesson_outputs(NOTEBOOK)
    assert "rope_heads: yours" in out and "multihead    lesson 04a: yours" in out
    assert "multihead with that rope_heads   excess 0.0083" in out
    text = lesson_markdown(NOTEBOOK)
    assert "excess, 0.0083 nats" in text and "2.3391 nats" in text


def test_with_attention_leaves_the_model_it_copies_alone():
    model = variants.load_trained("base", 0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    twin = position_demos.with_attention(model, lambda x, qkv, out, h, mask, rope: x, None)
    assert twin is not model and all(
        torch.equal(before[k], v) for k, v in model.state_dict().items()
    )
    assert type(model.blocks[0].attn).__name__ == "MultiHeadAttention"
    with pytest.raises(ValueError, match="return_weights"):
        twin(corpus.load_split("valid")[:1], return_weights=True)


@pytest.mark.slow
def test_mixing_layouts_costs_the_trained_model_and_porting_gives_it_back(measure, excess_on_valid):
    """The lesson's own cells, run as they stand, each twice: every cell that changes a model
    loads it afresh, so a second run (say after writing your to_rotate_half) gives the same
    number, and the model the lesson loaded first is never changed."""
    excess = excess_on_valid
    model = variants.load_trained("base", 0)
    kept = {k: v.clone() for k, v in model.state_dict().items()}
    trained = excess(model)
    namespace = {"torch": torch, "variants": variants, "position_demos": position_demos,
                 "excess": excess, "model": model, "print": lambda *a, **k: None,
                 "judge_prediction": judge_prediction, "predicted_excess": None,
                 "reorder": notebook_functions("to_rotate_half")["to_rotate_half"]}  # fmt: skip
    found = {}
    for _ in range(2):
        exec(_code_cell("mixed = "), namespace)
        exec(_code_cell("ported = "), namespace)
        found.setdefault("mixed", []).append(excess(namespace["mixed"]))
        found.setdefault("ported", []).append(excess(namespace["ported"]))
    assert found["mixed"][0] == found["mixed"][1] and found["ported"][0] == found["ported"][1]
    assert all(torch.equal(kept[k], v) for k, v in model.state_dict().items())
    mixed, ported = found["mixed"][0], found["ported"][0]
    # native and generic paths: |ported - trained| ~1e-8; printed at four decimals
    assert measure("|ported - trained| excess", abs(ported - trained)) < 1e-5
    assert (f"{trained:.4f}", f"{mixed:.4f}", f"{ported:.4f}") == ("0.0083", "1.5807", "0.0083")
    assert "from 0.0083 to 1.5807 nats" in lesson_markdown(NOTEBOOK)
    out = lesson_outputs(NOTEBOOK)
    assert "weights as they are:  excess 1.5807" in out
    assert "rows reordered:       excess 0.0083" in out
    # the prediction cell starts empty; the measurement says so, at the digits printed
    assert "predicted_excess = None" in _code_cell("predicted_excess = ")
    assert judge_prediction(None, mixed, what="excess in the other layout", unit=" nats",
                            digits=4) in out  # fmt: skip
    # "about two thirds of the way from the model's own 0.0083 to the 2.3391 of no RoPE"
    bare = excess(position_demos.set_rope_layout(variants.load_trained("base", 0), "half"))
    assert bare == mixed
    share = (mixed - trained) / (2.3391 - trained)
    assert 0.62 < share < 0.71
    assert "about two thirds of the way" in lesson_markdown(NOTEBOOK)


def test_hugging_faces_permute_is_the_learners_reordering_and_shown_only_after_the_check():
    """position_demos.hf_permute is Hugging Face's permute (view as (H, d/2, 2, D), swap the
    two inner axes); the lesson prints it only once the learner's to_rotate_half passes, so
    no cell's source holds it, and a stub prints the line that says when it will show."""
    reorder = notebook_functions("to_rotate_half")["to_rotate_half"]
    w = position_demos.attention_layers(variants.load_trained("base", 0))[0].qkv.weight
    w = w.detach()[:64]
    swapped = w.reshape(4, 8, 2, 64).transpose(1, 2).reshape(64, 64)
    assert torch.equal(swapped, position_demos.hf_permute(w, 4))
    assert torch.equal(swapped, reorder(w, 4))
    assert torch.equal(swapped, to_rotate_half_reference(w, 4))
    g = torch.Generator().manual_seed(0)
    other = torch.randn(3 * 8, 5, generator=g)
    torch.testing.assert_close(position_demos.hf_permute(other, 3),
                               to_rotate_half_reference(other, 3))  # fmt: skip
    out = lesson_outputs(NOTEBOOK)
    assert "largest difference from your reordering: 0.0" in out
    assert "def hf_permute(" in out and ".transpose(1, 2)" in out
    cells = nbformat.read(NOTEBOOK, as_version=4).cells
    for cell in cells:
        assert ".transpose(1, 2)" not in cell.source and "view(H, d // 2" not in cell.source
    source = _code_cell("first = position_demos.attention_layers")
    printed = []
    namespace = {"torch": torch, "position_demos": position_demos,
                 "model": variants.load_trained("base", 0), "inspect": __import__("inspect"),
                 "check_to_rotate_half": check_to_rotate_half, "run": run,
                 "print": lambda *a, **k: printed.append(" ".join(map(str, a)))}  # fmt: skip
    exec("def to_rotate_half(weight, num_heads):\n    raise NotImplementedError", namespace)
    exec(source, namespace)
    assert printed == [
        "Hugging Face's permute is printed here once your to_rotate_half passes its check."
    ]


def test_the_next_lesson_link_names_a_lesson_that_exists():
    import re

    links = re.findall(r"\]\((\d\d[a-z]?_[a-z_]+\.ipynb)\)", lesson_markdown(NOTEBOOK))
    assert "07b_positions_past_training.ipynb" in links
    for link in links:
        assert (NOTEBOOK.parent / link).exists(), link


def test_no_number_the_prose_quotes_is_missing_from_the_outputs():
    """Every decimal number in the lesson's prose (not its formulas) is printed by a cell."""
    import re

    prose = lesson_markdown(NOTEBOOK)
    text = re.sub(r"\$[^$]*\$|`[^`]*`", " ", prose)  # formulas and code left out
    numbers = set(re.findall(r"(?<![\w.])\d+\.\d+", text))
    printed = lesson_outputs(NOTEBOOK)
    worked = {"1.00", "0.00", "0.54", "0.84", "0.42", "0.91"}  # rope_heads' worked example
    assert {n for n in numbers - worked if n not in printed} == set()
