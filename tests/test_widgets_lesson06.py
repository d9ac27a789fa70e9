"""TrainedHeadsExplorer and AblationExplorer: every control swept, pictures change."""

import math

import numpy as np

from benchmarks.explorers import values_to_visit
from course_lib.widgets import AblationExplorer, TrainedHeadsExplorer


def picture(explorer) -> bytes:
    return bytes(explorer.image.value)


def test_trained_heads_explorer_sweeps_every_control():
    e = TrainedHeadsExplorer()
    for name, control in e.controls.items():
        if name == "sentence":
            continue
        for value in values_to_visit(control, 6):
            if value == control.value:
                continue
            before, weights = picture(e), e.image_map.get_array().copy()
            control.value = value
            assert picture(e) != before, (name, value)
            assert np.isfinite(e.image_map.get_array()).all()
            if name in ("layer", "head", "example"):
                assert not np.array_equal(e.image_map.get_array(), weights) or (
                    e.image_map.get_array().shape != weights.shape
                )
    assert "looks most at" in e.readout.value


def test_typed_sentence_runs_the_model_and_unknown_words_leave_the_picture():
    e = TrainedHeadsExplorer()
    e.controls["sentence"].value = "Birds with the dog eat the apple ( the cat ) ."
    assert "your sentence" in e.message.value
    assert e.current["tokens"][0] == "Birds" and len(e.current["tokens"]) == 12
    shown, weights = picture(e), e.image_map.get_array().copy()
    e.controls["sentence"].value = "Dogs chase the cat ."
    assert "chase" in e.message.value and "position 1" in e.message.value
    assert picture(e) == shown and np.array_equal(e.image_map.get_array(), weights)
    e.controls["example"].value = "brackets and quotes"
    assert e.message.value == "" and e.current["tokens"][0] == "Cat"


def test_typed_samples_cover_good_and_unknown_words():
    samples = TrainedHeadsExplorer().controls["sentence"].sample_values
    assert len(samples) >= 3 and any("chase" in s for s in samples)


def test_ablation_explorer_sweeps_every_control():
    e = AblationExplorer()
    for name, control in e.controls.items():
        for value in values_to_visit(control, 8):
            if value == control.value:
                continue
            before, heights = picture(e), [b.get_height() for b in e.det_bars]
            control.value = value
            assert picture(e) != before, (name, value)
            assert all(math.isfinite(b.get_height()) for b in e.det_bars)
            assert [b.get_height() for b in e.det_bars] != heights
    # no positions: the previous-token job fails; without the scale, the loss rises
    e.controls["scale"].value = True
    e.controls["setting"].value = "none-h4"
    assert e.det_bars[0].get_height() < 0.5
    e.controls["setting"].value = "rope-h4"
    with_scale = e.loss_bar.get_height()
    e.controls["scale"].value = False
    assert e.loss_bar.get_height() > with_scale + 0.05
