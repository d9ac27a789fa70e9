"""course_lib.bigram: the first model of lesson 01b_loss_and_floor, the counted bigram and
the embeddings' projection."""

import math
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from course_lib import bigram, corpus
from course_lib.exercises import by_name
from course_lib.exercises.stub import stub_source


def test_the_model_is_the_two_layers_it_is_given():
    calls = []

    def embed(ids, weight):
        calls.append("embedding")
        return F.embedding(ids, weight)

    def out(h, weight):
        calls.append("output")
        return h @ weight.T

    model = bigram.Bigram(11, 4, embedding=embed, output=out)
    ids = torch.randint(11, (2, 5))
    logits = model(ids)
    assert logits.shape == (2, 5, 11) and calls == ["embedding", "output"]
    assert torch.allclose(logits, model.head(model.embed(ids)))
    assert sum(p.numel() for p in model.parameters()) == 2 * 11 * 4
    # each position from its own token alone: changing one token moves its logits only
    other = ids.clone()
    other[:, 2] = (other[:, 2] + 1) % 11
    moved = (model(other) - logits).abs().amax(dim=-1)  # (2, 5)
    assert (moved[:, 2] > 0).all() and (moved[:, [0, 1, 3, 4]] == 0).all()


def test_yours_is_used_only_where_it_passes_its_check():
    def good(ids, weight):
        return weight[ids]

    assert bigram.yours_if_it_passes("token_embedding", good) == (good, "yours")
    fn, why = bigram.yours_if_it_passes("token_embedding", lambda ids, w: w.T[ids])
    assert fn is not None and why == "the course's (yours does not pass its check)"
    namespace = {}
    exec(f"def stubbed(ids, weight):\n{stub_source('token_embedding', '    ')}", namespace)
    fn, why = bigram.yours_if_it_passes("token_embedding", namespace["stubbed"])
    assert why == "the course's (yours is not written yet)"
    ids, weight = torch.tensor([[1, 0]]), torch.randn(3, 2)
    assert torch.equal(fn(ids, weight), F.embedding(ids, weight))
    # what earlier_work hands lesson 01b for an exercise not written in lesson 01a: the
    # course's own function, named as the course's (its line says why), not "does not pass"
    reference = by_name("token_embedding").reference
    assert bigram.yours_if_it_passes("token_embedding", reference) == (reference, "the course's")


def test_training_lowers_the_loss_from_ln_v():
    model = bigram.Bigram()
    history = bigram.train_bigram(model, replace(bigram.RECIPE, steps=20, eval_every=10))
    assert history.val_step == [9, 19]
    assert history.train_loss[0] == pytest.approx(math.log(104), abs=0.05)
    assert history.val_loss[-1] < history.train_loss[0]


def test_the_counted_bigram_is_a_distribution_per_token():
    probs = bigram.counted_probabilities()
    assert probs.shape == (104, 104) and probs.dtype == torch.float64
    rows = probs.sum(dim=1)
    assert torch.allclose(rows[rows > 0], torch.ones_like(rows[rows > 0]))
    losses = bigram.count_bigram_losses("valid")
    assert losses.shape == corpus.floored_split("valid")[1].shape
    assert torch.isfinite(losses).all()  # every validation pair occurs in training


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda: bigram.Bigram(0), ValueError, "vocab_size: expected a positive int, got 0"),
        (lambda: bigram.Bigram(d_model=2.5), TypeError, "d_model: expected a positive int"),
        (
            lambda: bigram.Bigram(embedding="F.embedding"),
            TypeError,
            "embedding: expected a function",
        ),
        (lambda: bigram.train_bigram(torch.nn.Linear(2, 2)), TypeError, "model: expected a Bigram"),
        (lambda: bigram.count_bigram_losses("test"), ValueError, "name: expected one of"),
    ],
)
def test_bad_input_names_the_parameter(call, error, words):
    with pytest.raises(error, match=words):
        call()
