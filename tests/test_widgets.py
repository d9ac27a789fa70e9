"""The Explorer base and lesson 00's widgets, driven from plain Python as the front end would."""

import base64
import math

import numpy as np
import pytest

from course_lib.widgets import ConceptCheck, SoftmaxExplorer

PNG = b"\x89PNG\r\n\x1a\n"


def test_softmax_explorer_builds_with_no_arguments_and_shows_a_png():
    explorer = SoftmaxExplorer()
    assert set(explorer.controls) == {"sharpness"}
    assert bytes(explorer.image.value).startswith(PNG)
    assert explorer.controls["sharpness"].continuous_update is False
    bundle = explorer._repr_mimebundle_()
    assert bundle["text/plain"] == "SoftmaxExplorer(controls: sharpness)"
    assert base64.b64decode(bundle["image/png"]).startswith(PNG)
    assert "application/vnd.jupyter.widget-view+json" in bundle


def test_sweeping_the_slider_changes_bars_and_picture():
    explorer = SoftmaxExplorer()
    slider = explorer.controls["sharpness"]
    seen_pictures, previous = set(), None
    for value in np.arange(slider.min, slider.max + 1e-9, 1.0):
        slider.value = float(value)
        heights = [bar.get_height() for bar in explorer.bars]
        assert all(math.isfinite(h) for h in heights)
        assert math.isclose(sum(heights), 1.0, rel_tol=1e-5)
        if previous is not None:
            assert heights != previous
        previous = heights
        seen_pictures.add(bytes(explorer.image.value))
    assert len(seen_pictures) == len(np.arange(slider.min, slider.max + 1e-9, 1.0))
    slider.value = 0.0
    assert [round(bar.get_height(), 6) for bar in explorer.bars] == [0.2] * 5
    assert "largest weight 0.20" in explorer.ax.get_title()


def test_blitted_picture_equals_a_full_redraw():
    explorer = SoftmaxExplorer()
    explorer.controls["sharpness"].value = 3.0
    fast = explorer.image.value
    explorer.invalidate()
    explorer.redraw()
    assert explorer.image.value == fast


def test_mismatched_labels_are_named():
    with pytest.raises(ValueError, match="labels: expected one label per score"):
        SoftmaxExplorer(scores=(1.0, 2.0), labels=("a",))


def test_concept_check_reveals_the_answer_and_renders_without_widgets():
    check = ConceptCheck("Why divide by sqrt(d_k)?", "To keep scores <moderate>.")
    assert check.shown.value == ""
    check.text.value = "my answer"
    check.button.click()
    assert "To keep scores &lt;moderate&gt;." in check.shown.value
    bundle = check._repr_mimebundle_()
    assert "<details>" in bundle["text/html"] and bundle["text/plain"].startswith("ConceptCheck")
