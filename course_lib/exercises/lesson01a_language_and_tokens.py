"""Lesson 01a_language_and_tokens's exercises: the token embedding and the output layer.

CONTRACTS (fixed: later lessons and course_lib.mywork rely on them):
- token_embedding(ids, weight) -> (..., D): row ids[...] of weight (V, D), in weight's dtype,
  as torch.nn.functional.embedding does; ids an int64 tensor of any shape, 0-d included.
- output_layer(h, weight) -> (..., V): the logits of h (..., D) against every row of weight
  (V, D), h @ weight^T, as torch.nn.functional.linear without a bias: raw scores, no softmax.
  Passing the embedding's own matrix as weight ties the two layers.

Every weight in the cases requires a gradient, as a model's do, and every entry
`needs_grad`: a result computed under torch.no_grad() or detached fails
(course_lib.exercises.core). Lesson 01b's loss (lesson01b_loss_and_floor) builds its cases
with the same `_leaf`.
"""

import math

import torch
import torch.nn.functional as F

from course_lib.exercises.core import Bug, Case, Exercise

LESSON = "01a_language_and_tokens"


def token_embedding_reference(ids, weight):
    return F.embedding(ids, weight)  # (...) -> (..., D)


def output_layer_reference(h, weight):
    return F.linear(h, weight)  # (..., D) -> (..., V)


def _leaf(*shape, g, scale=1.0, dtype=torch.float32):
    """A random tensor that requires a gradient, as a model's weights and logits do."""
    return (torch.randn(*shape, generator=g, dtype=dtype) * scale).requires_grad_()


# ---------------------------------------------------------------- token_embedding


def _embedding_cases() -> list[Case]:
    g = torch.Generator().manual_seed(0)

    def ids(high, *shape):
        return torch.randint(high, shape, generator=g)

    square = ids(6, 2, 5)
    square[0, 0] = 0  # id 0 is there: a shift by one wraps it round to the last row
    full = ids(104, 3, 4)
    full[0, 0] = 103  # the largest id is there
    return [
        Case((square, _leaf(7, 7, g=g)),
             label="a square weight, V = D = 7, and ids that never reach V - 1"),
        Case((full, _leaf(104, 16, g=g)), label="the toy language's V = 104 tokens, D = 16"),
        Case((ids(10, 6), _leaf(10, 4, g=g)), label="a 1-D ids: one sequence"),
        Case((ids(9, 2, 3, 4), _leaf(9, 5, g=g)), label="a 3-D ids: more axes than (B, T)"),
        Case((torch.tensor(3), _leaf(8, 6, g=g)), label="a 0-d ids: one token"),
        Case((ids(6, 2, 3), _leaf(6, 4, g=g, dtype=torch.float64)),
             label="a float64 weight: the vectors stay float64"),
    ]  # fmt: skip


TOKEN_EMBEDDING = Exercise(
    name="token_embedding",
    lesson=LESSON,
    reference=token_embedding_reference,
    cases=_embedding_cases,
    idea="the section 'From ids to vectors and back', and its example worked by hand",
    bugs=(
        Bug(
            "columns",
            lambda ids, w: w.T[ids],
            "your vectors are columns of the weight, not its rows",
            "weight is (V, D): one row of D numbers per token. Taking column i (weight[:, i], "
            "or row i of the transpose) gives V numbers, one per token; with V = D the shapes "
            "cannot tell you.",
        ),
        Bug(
            "one_hot_too_short",
            lambda ids, w: F.one_hot(ids).to(w.dtype) @ w,
            "your one-hot vectors are shorter than the vocabulary when the ids never reach V - 1",
            "F.one_hot(ids) makes each vector as long as the largest id present plus one, not "
            "V: it needs num_classes, the weight's number of rows. (Indexing the weight with "
            "the ids needs no one-hot vectors at all.)",
        ),
        Bug(
            "one_hot_long",
            lambda ids, w: F.one_hot(ids, w.shape[0]) @ w,
            "your one-hot vectors are integers, and a matrix product needs one dtype on both sides",
            "F.one_hot returns int64 tensors. Convert them to the weight's own dtype before "
            "the product.",
        ),
        Bug(
            "one_hot_float32",
            lambda ids, w: F.one_hot(ids, w.shape[0]).float() @ w,
            "your one-hot vectors are float32 while this weight is float64",
            ".float() always gives float32. The product needs the weight's own dtype, "
            "whichever it is: convert to weight.dtype.",
        ),
        Bug(
            "off_by_one",
            lambda ids, w: w[ids - 1],
            "every vector is the row just above the right one, and id 0 gets the last row",
            "ids count from 0: token i's vector is row i. Subtracting 1 (counting from 1) moves "
            "every token onto its neighbour's row, and -1 wraps round to the last.",
        ),
        Bug(
            "index_select",
            lambda ids, w: w.index_select(0, ids),
            "index_select takes a vector of indices, and these ids have more axes",
            "ids may have any shape: a (B, T) batch, more axes, or none. index_select takes "
            "only a 1-D tensor of indices; indexing the weight with the ids tensor itself "
            "keeps the ids' shape and adds the D axis.",
        ),
        Bug(
            "scaled",
            lambda ids, w: w[ids] * math.sqrt(w.shape[1]),
            "your vectors are sqrt(D) times the weight's rows",
            "the lookup returns each row as it is stored. The 2017 transformer multiplies its "
            "embeddings by sqrt(D) after the lookup, inside its model; nn.Embedding and "
            "F.embedding do not, and neither does this function.",
        ),
    ),
    hints=(
        "Row i of weight is token i's vector: the result for ids of shape (...) has shape "
        "(..., D), one row per id, in the weight's dtype.",
    ),
    needs_grad=True,
    # F.embedding is the reference, and nn.Embedding calls it: either passes every case
    # without the indexing
    forbidden=((F, "embedding"), (torch, "embedding")),
    forbidden_hint="The check compares with torch's embedding, so calling it (F.embedding, "
    "nn.Embedding, torch.embedding) proves nothing. Pick the rows yourself, as the example "
    "worked by hand does.",
)


# ---------------------------------------------------------------- output_layer


def _output_cases() -> list[Case]:
    g = torch.Generator().manual_seed(1)
    return [
        Case((_leaf(2, 4, 6, g=g), _leaf(6, 6, g=g)),
             label="a square weight, V = D = 6: no shape error tells h @ W from h @ W^T"),
        Case((_leaf(2, 5, 16, g=g), _leaf(104, 16, g=g)),
             label="a (B, T, D) batch, the toy language's V = 104 tokens"),
        Case((_leaf(16, g=g), _leaf(10, 16, g=g)), label="a 1-D h: one vector"),
        Case((_leaf(3, 8, g=g), _leaf(12, 8, g=g)), label="a 2-D h: (T, D)"),
        Case((_leaf(2, 3, 4, 8, g=g), _leaf(5, 8, g=g)), label="a 4-D h: more axes than (B, T, D)"),
        Case((_leaf(2, 3, 4, g=g, dtype=torch.float64), _leaf(7, 4, g=g, dtype=torch.float64)),
             label="float64 h and weight: the logits stay float64"),
    ]  # fmt: skip


OUTPUT_LAYER = Exercise(
    name="output_layer",
    lesson=LESSON,
    reference=output_layer_reference,
    cases=_output_cases,
    idea="the section 'From ids to vectors and back', and its example worked by hand",
    bugs=(
        Bug(
            "not_transposed",
            lambda h, w: h @ w,
            "your logits use the weight the wrong way round",
            "weight has one row per token, (V, D), as nn.Linear(D, V) stores its weight: each "
            "logit is the dot product of h with one row, so h multiplies the transpose of "
            "weight. With V = D, h @ weight runs and is wrong.",
        ),
        Bug(
            "softmax",
            lambda h, w: torch.softmax(h @ w.T, dim=-1),
            "your logits are probabilities: each row is positive and sums to 1",
            "the output layer returns raw scores (logits), which may be any real numbers. The "
            "softmax that turns them into probabilities comes where they are used: the loss "
            "takes the log-softmax of the logits itself.",
        ),
        Bug(
            "log_softmax",
            lambda h, w: F.log_softmax(h @ w.T, dim=-1),
            "your logits are log-probabilities: every one is negative, and their exponentials "
            "sum to 1",
            "the output layer returns raw scores (logits). Normalising them into "
            "log-probabilities is the loss's job, and a later lesson's sampler divides raw "
            "logits by a temperature.",
        ),
        Bug(
            "batched_T",
            lambda h, w: (w @ h.permute(*reversed(range(h.dim())))).permute(
                *reversed(range(h.dim()))
            ),
            "your function works for one vector or one (T, D) table, and fails on a batch",
            "for a tensor of more than two axes, .T reverses every axis, so (B, T, D) becomes "
            "(D, T, B), not a batch of transposes. Transpose the weight instead, a plain (V, D) "
            "matrix: h times its transpose works for any number of leading axes.",
        ),
        Bug(
            "scaled",
            lambda h, w: h @ w.T / math.sqrt(h.shape[-1]),
            "your logits are sqrt(D) times too small",
            "the output layer is the plain product. Dividing by sqrt(d) belongs to attention's "
            "scores (a later lesson), not to the logits.",
        ),
    ),
    hints=(
        "The result has one logit per token: shape (..., V), with V the weight's number of "
        "rows, in h's dtype.",
    ),
    needs_grad=True,
    # F.linear is the reference, and nn.Linear calls it
    forbidden=((F, "linear"),),
    forbidden_hint="The check compares with torch's linear layer, so calling it (F.linear, "
    "or an nn.Linear given this weight) proves nothing. Write the product yourself, as the "
    "example worked by hand scores h against each row.",
)


EXERCISES = (TOKEN_EMBEDDING, OUTPUT_LAYER)
