"""TrainedHeadsExplorer (lesson 06): every control swept, pictures change."""

import io

import numpy as np
from PIL import Image

from benchmarks.explorers import values_to_visit
from course_lib import data, heads, viz
from course_lib.widgets import TrainedHeadsExplorer, fresh_sentences
from course_lib.widgets.ticks import TickStamp
from helpers import picture


def pixels(explorer) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(picture(explorer))).convert("RGB"))


def test_trained_heads_explorer_sweeps_every_control():
    e = TrainedHeadsExplorer()
    for name, control in e.controls.items():
        if name == "sentence":
            continue
        for value in values_to_visit(control, 6):
            if value == control.value:
                continue
            before, weights = picture(e), e.state()["weights"]
            control.value = value
            state = e.state()
            assert picture(e) != before, (name, value)
            assert np.isfinite(state["weights"]).all()
            T = len(state["tokens"])
            assert state["weights"].shape == (T, T) and len(state["bars"]) == T
            assert state["query"] == state["values"]["query"] <= T - 1
            np.testing.assert_allclose(state["bars"], state["weights"][state["query"]], rtol=1e-6)
            if name in ("layer", "head", "example"):
                assert not np.array_equal(state["weights"], weights) or (
                    state["weights"].shape != weights.shape
                )
    assert "looks most at" in e.state()["readout"]


def test_query_slider_spans_the_sentence_shown():
    """Every position the slider offers is a token of the sentence shown: its range follows
    each example and each typed sentence, and a shorter one pulls the value back in."""
    e = TrainedHeadsExplorer()
    query = e.controls["query"]
    lengths = {}
    for example in e.controls["example"].options:
        e.controls["example"].value = example
        lengths[example] = len(e.state()["tokens"])
        assert (query.min, query.max) == (0, lengths[example] - 1)
        query.value = query.max
        state = e.state()
        assert state["query"] == lengths[example] - 1
        assert f"query {query.max} '{state['tokens'][-1]}'" in state["readout"]
    assert len(set(lengths.values())) > 1  # the examples differ in length
    longest = max(lengths, key=lengths.get)
    e.controls["example"].value = longest
    query.value = query.max
    e.controls["sentence"].value = "Cat sleeps ."  # shorter than where the slider stood
    state = e.state()
    assert query.max == 2 and query.value == 2 and state["query"] == 2
    assert "query 2 '.'" in state["readout"]


def test_controls_sit_in_tidy_rows():
    """Examples on one row, the text box on the next, the model's choices on a third."""
    e = TrainedHeadsExplorer()
    rows = [
        [next(n for n, c in e.controls.items() if c is child) for child in box.children]
        for box in e.widget.children[:3]
    ]
    assert rows == [["example"], ["sentence"], ["layer", "head", "query"]]


def test_detector_marks_are_the_sentences_pairs():
    e = TrainedHeadsExplorer()
    for example in e.controls["example"].options:
        e.controls["example"].value = example
        state = e.state()
        assert list(state["marks"]) == list(heads.DETECTORS)
        for name, find in heads.DETECTORS.items():
            assert state["marks"][name] == [tuple(pair) for pair in find(state["tokens"])]
    assert sum(len(cells) for cells in state["marks"].values()) > 0


def test_typed_sentence_runs_the_model_and_unknown_words_leave_the_picture():
    e = TrainedHeadsExplorer()
    e.controls["sentence"].value = "Birds with the dog eat the apple ( the cat ) ."
    state = e.state()
    assert "your sentence" in state["message"]
    assert state["tokens"][0] == "Birds" and len(state["tokens"]) == 12
    shown, weights = picture(e), state["weights"]
    e.controls["sentence"].value = "Dogs chase the cat ."
    state = e.state()
    assert state["message"].startswith("Not shown:")
    assert "chase" in state["message"] and "position 1" in state["message"]
    assert picture(e) == shown and np.array_equal(state["weights"], weights)
    e.controls["example"].value = "brackets and quotes"
    state = e.state()
    assert state["message"] == "" and state["tokens"][0] == "Cat"


def test_typed_samples_cover_good_and_unknown_words():
    samples = TrainedHeadsExplorer().controls["sentence"].sample_values
    assert len(samples) >= 3 and any("chase" in s for s in samples)
    # the benchmark types 30 sentences in a row, each one new to the explorer
    fresh = fresh_sentences(40)
    assert len(set(fresh)) == 40 and set(fresh) <= set(samples)
    assert all(8 <= len(s.split()) <= data.SEQ_LEN for s in fresh)
    assert all(len(data.encode(s)) == len(s.split()) for s in fresh)  # in the vocabulary


def test_new_sentence_pictures_do_not_depend_on_what_came_before():
    first, second = fresh_sentences(2, seed=3)
    alone = TrainedHeadsExplorer()
    alone.controls["sentence"].value = first
    after = TrainedHeadsExplorer()
    after.controls["sentence"].value = second
    assert picture(after) != picture(alone)
    after.controls["sentence"].value = first
    assert np.array_equal(pixels(after), pixels(alone))


def test_the_widest_words_fit_inside_the_picture():
    e = TrainedHeadsExplorer()
    longest = e.MAX_T  # the most tokens a sentence can show
    stamp = TickStamp(viz.new_figure()[0], fontsize=8)  # the explorer's label font
    widest = {stamp.widest(data.VOCAB, "y"), stamp.widest(data.VOCAB, "x90")}
    words = (sorted(widest) * longest)[:longest]
    e.controls["sentence"].value = " ".join(words)
    assert "your sentence" in e.state()["message"]
    rgb = pixels(e)
    ink = rgb.min(axis=2) < 200
    assert not ink[:, 0].any() and not ink[-1, :].any()  # nothing cut at the edges
    # the map's left edge: the first column in colour (viridis); labels and ticks are grey
    colour = (rgb.max(axis=2).astype(int) - rgb.min(axis=2)) > 60
    left_of_map = ink[:, : np.flatnonzero(colour.any(axis=0))[0] - 4]
    assert left_of_map.sum() > 20 * longest  # every row labelled
