"""Lesson 11a's claims: your model computes the course's, and the untrained start against a
uniform guess."""

import math
from functools import partial
from pathlib import Path

import nbformat
import torch

import course_lib
from course_lib import capstone, corpus, variants
from course_lib.model import TinyTransformer
from course_lib.mywork import earlier_work
from helpers import stored_stdout

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "11a_build_your_model.ipynb"
CELLS = nbformat.read(NOTEBOOK, as_version=4).cells
MARKDOWN = "\n".join(c.source for c in CELLS if c.cell_type == "markdown")
NAMES = ("token_embedding", "output_layer", "make_causal_mask", "multihead", "rope_heads",
         "feed_forward", "prenorm_block", "layer_norm")  # fmt: skip


def _my_transformer():
    """The lesson's MyTransformer class, run from its cell with the lesson's own functions."""
    source = next(c.source for c in CELLS if "class MyTransformer" in c.source)
    space = {"mine": earlier_work(*NAMES, folder=NOTEBOOK.parent, quiet=True)}
    exec("from functools import partial\nfrom torch import nn\n" + source, space)
    return space["MyTransformer"]


def _args():
    return {name: getattr(variants.BASE, name) for name in capstone.SIZES}


_stored = partial(stored_stdout, CELLS)  # what the cell holding a marker printed


def test_the_lesson_names_todays_lessons():
    for old in ("01_attention_qkv", "01_language_and_loss", "02_attention_and_masks",
                "03_multihead", "04_multihead", "04_positional_encoding",
                "05_transformer_block"):  # fmt: skip
        assert old not in MARKDOWN, old
    for new in ("01a_language_and_tokens", "01b_loss_and_floor", "02a_attention",
                "02b_attention_in_batches", "04a_multihead_layer", "06_sinusoidal_and_rope",
                "08_transformer_block", "09_feed_forward"):  # fmt: skip
        assert new in MARKDOWN, new


def test_your_model_computes_the_course_models_logits_and_excess():
    shipped = variants.load_trained("base", 0)
    yours = _my_transformer()(**_args())
    yours.load_state_dict(shipped.state_dict())
    ids = corpus.load_split("valid")[:64]
    with torch.no_grad():
        assert (yours.eval()(ids) - shipped(ids)).abs().max() < 1e-4
    recorded = variants.trained_card("base", 0)["excess"]["valid"]["all"]
    assert round(recorded, 4) == 0.0083
    said = "your MyTransformer: excess over the floor 0.0083 nats; the table's record 0.0083"
    assert said in _stored("the table's record")


def test_the_untrained_start_sits_above_a_uniform_guess_and_is_confident_at_random():
    uniform = math.log(variants.BASE.vocab_size) - corpus.split_floor("valid")["all"]
    assert round(uniform, 3) == 3.619
    valid = corpus.load_split("valid")
    for seed in (0, 1, 2):
        course_lib.set_seed(seed)
        model = TinyTransformer.from_config(variants.BASE).eval()
        excess = variants.excess_loss(model, "valid")["all"]
        assert 0.1 < excess - uniform < 0.5  # "higher still": 0.28 on seed 0
        with torch.no_grad():
            favourite = model(valid).softmax(dim=-1).amax(dim=-1).mean()
        assert favourite > 3 / variants.BASE.vocab_size  # "more than three times 1/V"
    said = _stored("uniform = ")
    assert "measured: 3.895; a uniform guess, ln V - floor: 3.619" in said
    assert "0.277 nats above a uniform guess: its favourite token gets 0.035" in said
    assert "0.28 nats" in MARKDOWN and "more\nthan three times $1/V$" in MARKDOWN


def test_the_start_is_said_to_be_the_courses_initialisation():
    assert "Your model starts from random weights, the course's: `TinyTransformer`'s" in MARKDOWN
    embedding = TinyTransformer.from_config(variants.BASE).embed.weight
    assert 0.09 < float(embedding.detach().std()) < 0.11  # "standard deviation 0.1"
    assert 0.9 < float(torch.nn.Embedding(104, 64).weight.detach().std()) < 1.1  # yours: "1"
