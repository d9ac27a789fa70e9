"""CrossAttentionExplorer (lesson 05_encoder_decoder): every setting shows the run's own map,
its readout names the setting and the numbers in the picture, and a static page keeps few
enough pictures."""

import numpy as np
import pytest
import torch

from course_lib import reversal
from course_lib.widgets import CrossAttentionExplorer
from course_lib.widgets.base import STATIC_BUDGET
from helpers import picture

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def explorer(built_explorer):
    return built_explorer(CrossAttentionExplorer)  # trains the course's model, seed 0


def test_it_starts_on_the_trained_model_and_names_what_it_shows(explorer):
    state = explorer.state()
    assert state["values"] == {"sentence": 0, "layer": 0, "head": 0, "step": 150}
    assert picture(explorer).startswith(PNG)
    assert state["readout"].startswith("sentence 1, step 150, decoder layer 0, head 0: ")
    assert "chance 0.125" in state["readout"] and "(8 of 8 words right)" in state["readout"]
    assert state["heading"] == "sentence 1, decoder layer 0, head 0, after 150 steps"
    assert repr(explorer) == "CrossAttentionExplorer(controls: sentence, layer, head, step)"


def test_every_setting_draws_the_runs_own_map_and_its_anti_diagonal_weight(explorer):
    run = explorer.run
    start = explorer.values()
    try:
        for step in (0, 20, 150):
            for sentence in range(reversal.PROBES):
                for layer in (0, 1):
                    for head in (0, 1):
                        for name, value in (
                            ("step", step),
                            ("sentence", sentence),
                            ("layer", layer),
                            ("head", head),
                        ):
                            explorer.controls[name].value = value
                        state = explorer.state()
                        at = run.steps.index(step)
                        expected = run.maps[at][sentence, layer, head].numpy()
                        np.testing.assert_array_equal(state["map"], expected)
                        rows = np.arange(8)
                        weight = expected[rows, 7 - rows].mean()
                        assert (
                            f"weight on the anti-diagonal {weight:.2f} in this map"
                            in (state["readout"])
                        )
                        assert state["sources"] == reversal.words(run.probes[sentence])
    finally:
        for name, value in start.items():
            explorer.controls[name].value = value


def test_the_written_sentence_is_the_one_recorded_at_that_step(explorer):
    run = explorer.run
    explorer.controls["step"].value = 20
    try:
        at = run.steps.index(20)
        written = reversal.words(run.written[at][0])
        right = sum(
            w == t
            for w, t in zip(written[:8], reversal.words(run.probes[0]).__reversed__(), strict=True)
        )
        assert (
            f"The model writes: {' '.join(written[:8])} ({right} of 8 words right)."
            in (explorer.state()["readout"])
        )
        assert (
            f"held-out words right at this step {run.accuracy[at]:.1%}"
            in explorer.state()["readout"]
        )
    finally:
        explorer.controls["step"].value = 150


def test_a_static_page_keeps_two_sentences_and_five_steps(explorer):
    settings = explorer.settings()
    assert settings == {
        "sentence": [0, 1],
        "layer": [0, 1],
        "head": [0, 1],
        "step": [0, 10, 20, 40, 150],
    }
    assert np.prod([len(v) for v in settings.values()]) <= min(STATIC_BUDGET, 48)


def test_it_shows_a_run_it_is_given_and_refuses_anything_else():
    model, run = reversal.trained_run(1)
    shown = CrossAttentionExplorer(run)
    assert shown.run is run
    np.testing.assert_array_equal(shown.state()["map"], run.maps[-1][0, 0, 0].numpy())
    with pytest.raises(TypeError, match="run: expected what course_lib.reversal.train_reversal"):
        CrossAttentionExplorer(torch.zeros(3))
    with pytest.raises(TypeError, match="run: expected"):
        CrossAttentionExplorer(reversal.ReversalRun())
