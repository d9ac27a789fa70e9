"""SamplingExplorer (lesson 10): the bars are the distribution the sampler draws from, the
diamonds the language's, the lines come from the learner's generate and are read by the
language's rules."""

import pytest
import torch

from course_lib import corpus, sampling
from course_lib.model import generate
from course_lib.widgets import SamplingExplorer
from course_lib.widgets.base import STATIC_BUDGET
from course_lib.widgets.lesson10 import LINES, PROMPTS, SHOWN
from helpers import picture, set_controls, stub


@pytest.fixture(scope="module")
def explorer():
    return SamplingExplorer()


@pytest.mark.parametrize("temperature", [0, 0.5, 2.0])
@pytest.mark.parametrize("top_k", [0, 3])
def test_the_bars_are_the_samplers_distribution(explorer, temperature, top_k):
    state = set_controls(explorer, prompt="verb", temperature=temperature, top_k=top_k)
    text = dict(PROMPTS)["verb"]
    with torch.no_grad():
        logits = explorer.model(corpus.encode(text)[None])[0, -1]
    order = torch.argsort(logits, descending=True)[:SHOWN]
    if top_k:
        logits = logits.masked_fill(logits < torch.topk(logits, top_k).values[-1], -torch.inf)
    if temperature == 0:
        expected = torch.zeros_like(logits)
        expected[logits.argmax()] = 1.0
    else:
        expected = torch.softmax(logits / temperature, dim=-1)
    assert state["bars"] == pytest.approx(expected[order].tolist(), abs=1e-6)
    truth = sampling.language_next(text.split())
    assert state["truth"] == pytest.approx([truth.get(t, 0.0) for t in state["labels"]])
    assert f"temperature {temperature:g}" in state["readout"]


def test_the_readout_counts_the_lines_that_keep_every_rule(explorer):
    state = set_controls(explorer, prompt="object", temperature=2.0, top_k=0)
    ids, whose = explorer.lines("object", 2.0, None)
    kept = sum(sampling.rule_check(corpus.to_tokens(r)).broken is None for r in ids)
    assert f"{kept} of {LINES} sampled lines keep every rule" in state["readout"]
    assert sum(line.startswith("x ") for line in state["lines"]) == LINES - kept
    for line, broken, row in zip(state["lines"], state["broken"], ids, strict=True):
        check = sampling.rule_check(corpus.to_tokens(row))
        assert broken == ("" if check.broken is None else corpus.VOCAB[row[check.broken]])
        assert line.endswith(" ".join(corpus.to_tokens(row)[4:]))
    greedy = set_controls(explorer, temperature=0)
    first_line = greedy["readout"].split("\n")[0]
    assert greedy["distinct"] == 1 and first_line.endswith("1 different start (first 4 new tokens)")


def test_a_change_redraws_the_picture(explorer):
    before = picture(explorer)
    set_controls(explorer, prompt="free noun", temperature=1.5, top_k=2)
    assert picture(explorer) != before


def test_the_learners_generate_draws_the_lines_and_a_broken_one_is_replaced():
    calls = []

    def mine(model, prompt, num_tokens, **kwargs):
        calls.append(kwargs)
        return generate(model, prompt, num_tokens, **kwargs)

    state = SamplingExplorer(generate=mine).state()
    assert calls and "Lines drawn by your generate" in state["readout"]
    state = SamplingExplorer(generate=stub).state()
    assert "the course's generate (yours:" in state["readout"]
    with pytest.raises(TypeError, match="generate: expected your generate function"):
        SamplingExplorer(generate=3)


def test_a_static_page_can_hold_every_setting(explorer):
    settings = explorer.settings()
    count = 1
    for values in settings.values():
        count *= len(values)
    assert count <= STATIC_BUDGET
