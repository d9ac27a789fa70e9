"""Lesson 01a_language_and_tokens's exercises: learner-style mistakes get the hint that names them.

Every wrong function here is written the way a learner would write it (loops, one-hot
products, shifts by slicing), not taken from the bug lists in
course_lib/exercises/lesson01a_language_and_tokens.py. Each asserts the hint of its own mistake.
"""

import math
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F

from course_lib.checks import check_output_layer, check_token_embedding
from course_lib.exercises import by_name
from course_lib.exercises.core import DTYPE_HINT, run
from course_lib.exercises.lesson01a_language_and_tokens import (
    EXERCISES,
    OUTPUT_LAYER,
    TOKEN_EMBEDDING,
)
from helpers import failed_with_hint as _check
from helpers import failed_without_gradient

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "01a_language_and_tokens.ipynb"


# ---------------------------------------------------------------- every exercise


def test_the_names_are_the_courses_own_and_collide_with_no_other_lesson():
    # the retired lesson 06 had next_token_loss and train_step: these names are new
    names = [e.name for e in EXERCISES]
    assert names == ["token_embedding", "output_layer"]
    for name in names:
        assert by_name(name).lesson == "01a_language_and_tokens"


def test_the_references_are_torchs_own_layers():
    g = torch.Generator().manual_seed(5)
    embedding = torch.nn.Embedding(11, 4)
    ids = torch.randint(11, (2, 3), generator=g)
    assert torch.equal(TOKEN_EMBEDDING.reference(ids, embedding.weight), embedding(ids))
    head = torch.nn.Linear(4, 11, bias=False)
    h = torch.randn(2, 3, 4, generator=g)
    assert torch.equal(OUTPUT_LAYER.reference(h, head.weight), head(h))


def test_torchs_own_layers_are_refused_by_every_route():
    """The fresh read passed both exercises with the torch one-liner the lesson names
    (F.embedding, F.linear): the checks now refuse them and the modules that call them."""
    import json

    text = "".join(
        "".join(c["source"]) for c in json.loads(NOTEBOOK.read_text())["cells"]
        if c["cell_type"] == "markdown"
    )  # fmt: skip
    assert text.count("the check refuses") == 2
    routes = [
        (TOKEN_EMBEDDING, lambda ids, w: F.embedding(ids, w), "torch.nn.functional.embedding"),
        (TOKEN_EMBEDDING, lambda ids, w: torch.embedding(w, ids), "torch.embedding"),
        (OUTPUT_LAYER, lambda h, w: F.linear(h, w), "torch.nn.functional.linear"),
    ]
    for exercise, fn, name in routes:
        result = run(exercise, fn)
        assert not result.passed and result.bug == "forbidden", result.message
        assert f"calls {name}," in result.message, result.message
        assert result.steps[0] == exercise.forbidden_hint


# ---------------------------------------------------------------- token_embedding


def test_embedding_by_a_loop_over_the_ids_passes():
    def token_embedding(ids, weight):
        rows = [weight[i] for i in ids.reshape(-1).tolist()]
        return torch.stack(rows).reshape(*ids.shape, weight.shape[1])

    assert run(TOKEN_EMBEDDING, token_embedding).passed


def test_embedding_by_a_one_hot_product_in_the_weights_dtype_passes():
    def token_embedding(ids, weight):
        return F.one_hot(ids, num_classes=weight.shape[0]).to(weight.dtype) @ weight

    assert run(TOKEN_EMBEDDING, token_embedding).passed


def test_embedding_that_indexes_columns_is_named():
    def token_embedding(ids, weight):
        return weight[:, ids].movedim(0, -1)  # (D, ...) -> (..., D)

    _check(TOKEN_EMBEDDING, token_embedding, "columns", ["columns of the weight"])


def test_embedding_by_one_hot_without_the_number_of_classes_is_named():
    def token_embedding(ids, weight):
        return F.one_hot(ids).float() @ weight

    result = _check(TOKEN_EMBEDDING, token_embedding, "one_hot_too_short")
    assert "raised RuntimeError: mat1 and mat2 shapes cannot be multiplied" in result.message


def test_embedding_by_an_integer_one_hot_product_is_named():
    def token_embedding(ids, weight):
        one_hot = F.one_hot(ids, weight.shape[0])
        return torch.matmul(one_hot, weight)

    _check(TOKEN_EMBEDDING, token_embedding, "one_hot_long", ["integers"])


def test_embedding_by_a_float32_one_hot_product_is_named_on_the_float64_case():
    def token_embedding(ids, weight):
        return F.one_hot(ids, len(weight)).float() @ weight

    result = _check(TOKEN_EMBEDDING, token_embedding, "one_hot_float32", ["float64"])
    assert "float != double" in result.message


def test_embedding_counting_ids_from_one_is_named():
    def token_embedding(ids, weight):
        return weight[ids - 1]

    _check(TOKEN_EMBEDDING, token_embedding, "off_by_one", ["id 0 gets the last row"])


def test_embedding_by_index_select_is_named():
    def token_embedding(ids, weight):
        return torch.index_select(weight, 0, ids)

    _check(TOKEN_EMBEDDING, token_embedding, "index_select")


def test_embedding_scaled_as_in_the_2017_paper_is_named():
    def token_embedding(ids, weight):
        d_model = weight.shape[-1]
        return weight[ids] * d_model**0.5

    _check(TOKEN_EMBEDDING, token_embedding, "scaled", ["sqrt(D)"])


def test_embedding_built_as_a_new_tensor_has_no_gradient_and_says_so():
    def token_embedding(ids, weight):
        return torch.tensor(weight[ids].tolist())

    failed_without_gradient(TOKEN_EMBEDDING, token_embedding)


def test_embedding_under_no_grad_says_so():
    def token_embedding(ids, weight):
        with torch.no_grad():
            return weight[ids]

    failed_without_gradient(TOKEN_EMBEDDING, token_embedding)


def test_embedding_in_float32_only_is_told_about_the_dtype():
    def token_embedding(ids, weight):
        return weight[ids].float()

    result = _check(TOKEN_EMBEDDING, token_embedding, None, ["float64"])
    assert result.steps[0] == DTYPE_HINT


# ---------------------------------------------------------------- output_layer


def test_output_layer_by_einsum_passes():
    def output_layer(h, weight):
        return torch.einsum("...d,vd->...v", h, weight)

    assert run(OUTPUT_LAYER, output_layer).passed


def test_output_layer_by_matmul_with_the_transpose_passes():
    def output_layer(h, weight):
        return torch.matmul(h, weight.t())

    assert run(OUTPUT_LAYER, output_layer).passed


def test_output_layer_without_the_transpose_is_named():
    def output_layer(h, weight):
        return h @ weight

    _check(OUTPUT_LAYER, output_layer, "not_transposed", ["wrong way round"])


def test_output_layer_that_returns_probabilities_is_named():
    def output_layer(h, weight):
        logits = h @ weight.T
        return torch.exp(logits) / torch.exp(logits).sum(dim=-1, keepdim=True)

    _check(OUTPUT_LAYER, output_layer, "softmax", ["probabilities"])


def test_output_layer_that_returns_log_probabilities_is_named():
    def output_layer(h, weight):
        scores = h @ weight.T
        return scores - torch.logsumexp(scores, dim=-1, keepdim=True)

    _check(OUTPUT_LAYER, output_layer, "log_softmax", ["log-probabilities"])


def test_output_layer_that_transposes_h_is_named_on_a_batch():
    def output_layer(h, weight):
        with warnings.catch_warnings():  # torch warns about .T on more than two axes
            warnings.simplefilter("ignore")
            return (weight @ h.T).T

    result = _check(OUTPUT_LAYER, output_layer, "batched_T", ["fails on a batch"])
    assert "raised RuntimeError" in result.message


def test_output_layer_scaled_like_attention_is_named():
    def output_layer(h, weight):
        return (h @ weight.T) / math.sqrt(h.shape[-1])

    _check(OUTPUT_LAYER, output_layer, "scaled", ["too small"])


def test_output_layer_under_no_grad_says_so():
    @torch.no_grad()
    def output_layer(h, weight):
        return h @ weight.T

    failed_without_gradient(OUTPUT_LAYER, output_layer)
