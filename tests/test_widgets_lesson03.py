"""HeadsExplorer (lesson 03): every control swept; the maps are the checkpoints' own attention."""

import base64
import io

import numpy as np
import pytest
import torch

from course_lib.model import load_card, load_pretrained
from course_lib.widgets import HeadsExplorer, best_detector, heads_examples
from helpers import picture

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def explorer():
    return HeadsExplorer()


def check_state(explorer):
    v = explorer.values()
    H = v["heads"]
    _, ids = explorer.examples[v["example"]]
    T = len(ids)
    assert explorer.current.shape == (H, T, T)
    assert torch.isfinite(explorer.current).all()
    torch.testing.assert_close(explorer.current.sum(-1), torch.ones(H, T))
    for i, (ax, image, title) in enumerate(
        zip(explorer.axes, explorer.images, explorer.titles, strict=True)
    ):
        assert ax.get_visible() == (i < H) and image.get_visible() == (i < H)
        if i < H:
            shown = np.asarray(image.get_array())
            assert shown.shape == (T, T) and np.isfinite(shown).all()
            np.testing.assert_allclose(shown, explorer.current[i].numpy())
            name, score = best_detector(explorer.cards[H], v["layer"], i)
            assert title.get_text() == f"head {i}: {name} {score:.2f}"
    assert (
        f"validation loss {load_card(f'rope-h{H}')['val_loss']:.3f}" in explorer.heading.get_text()
    )
    assert picture(explorer).startswith(PNG)


def test_builds_with_no_arguments_and_shows_a_png(explorer):
    bundle = explorer._repr_mimebundle_()
    assert bundle["text/plain"] == "HeadsExplorer(controls: heads, layer, example)"
    assert base64.b64decode(bundle["image/png"]).startswith(PNG)
    check_state(explorer)


def test_maps_are_the_checkpoints_attention(explorer):
    examples = heads_examples()
    for H in (1, 8):
        model = load_pretrained(f"rope-h{H}")
        _, ids = examples[2]
        with torch.no_grad():
            _, weights = model(ids[None], return_weights=True)
        torch.testing.assert_close(explorer.maps[H, 2][1], weights[1][0])


@pytest.mark.parametrize("name", ["heads", "layer", "example"])
def test_every_control_sweeps_and_changes_the_picture(explorer, name):
    control = explorer.controls[name]
    options = [o[1] for o in control.options]
    start = control.value
    pictures = {}
    for value in [*options, *reversed(options)]:
        control.value = value
        check_state(explorer)
        pictures.setdefault(value, picture(explorer))
    assert len(set(pictures.values())) == len(options), "each setting should look different"
    # coming back to a setting gives the same picture (the caches hold no stale state)
    control.value = options[0]
    assert picture(explorer) == pictures[options[0]]
    control.value = start


def test_all_combinations_draw(explorer):
    seen = set()
    for H in (1, 2, 4, 8):
        explorer.controls["heads"].value = H
        for layer in (0, 1):
            explorer.controls["layer"].value = layer
            for example in range(len(explorer.examples)):
                explorer.controls["example"].value = example
                check_state(explorer)
                seen.add(picture(explorer))
    assert len(seen) == 4 * 2 * len(explorer.examples)


def test_examples_are_short_whole_validation_sentences():
    for label, ids in heads_examples():
        tokens = label.split()
        assert ids.dim() == 1 and 6 <= len(ids) <= 14
        assert ids[-1].item() == 0  # "." ends the sentence
        assert tokens[-1] == "..." and tokens[0][0].isupper()


def ink_rows(png: bytes) -> np.ndarray:
    from PIL import Image

    rgb = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
    return (rgb.min(axis=2) < 200).any(axis=1)  # per pixel row: anything drawn?


def test_one_row_of_heads_is_not_followed_by_an_empty_row(explorer):
    full = int(explorer.fig.bbox.height)
    explorer.controls["example"].value = 1
    for H in (1, 4, 8):
        explorer.controls["heads"].value = H
        rows = ink_rows(picture(explorer))
        assert len(rows) == (full if H == 8 else explorer.one_row_height)
        assert len(rows) < 0.7 * full or H == 8
        # the key labels under the last row are whole: drawn, and followed by a blank margin
        assert rows[-int(0.2 * len(rows)) :].any() and not rows[-4:].any()
