"""HeadsExplorer (lesson 04b): every control swept; the maps are the shipped one-layer models'
own attention, or read through the learner's multihead, whose disagreement the readout names."""

import base64
import io

import numpy as np
import pytest
import torch

from course_lib import corpus, language, mark_heads, variants
from course_lib.widgets import HeadsExplorer, heads_examples
from helpers import picture, stub

PNG = b"\x89PNG\r\n\x1a\n"
EXAMPLES = heads_examples()
CARDS = {H: variants.trained_card(mark_heads.variant(H), 0) for H in mark_heads.HEAD_COUNTS}


@pytest.fixture(scope="module")
def explorer():
    return HeadsExplorer()


def check_state(explorer):
    state = explorer.state()
    v = state["values"]
    H = v["heads"]
    label, ids = EXAMPLES[v["example"]]
    T = len(ids)
    maps = state["maps"]
    assert maps.shape == (H, T, T) and np.isfinite(maps).all()
    np.testing.assert_allclose(maps.sum(-1), np.ones((H, T)), rtol=1e-5)
    query, nouns = state["mark"]
    assert query == T - 2 and len(nouns) == 3  # the row before the mark, which ends the line
    assert len(state["titles"]) == H
    for i, title in enumerate(state["titles"]):
        weights = " / ".join(f"{maps[i, query, n]:.2f}" for n in nouns)
        assert title == f"head {i}: {weights}"
    mark = CARDS[H]["excess"]["valid"]["mark"]
    assert state["heading"].startswith(f"one layer, {H} head")
    assert f"(seed 0): excess on the mark {mark:.2f} nats" in state["heading"]
    assert state["tokens"] == corpus.to_tokens(ids)
    assert state["readout"].startswith(f"{H} head{'s' if H > 1 else ''}, sentence '{label}': ")
    assert picture(explorer).startswith(PNG)


def test_builds_with_no_arguments_and_shows_a_png(explorer):
    bundle = explorer._repr_mimebundle_()
    assert bundle["text/plain"] == "HeadsExplorer(controls: heads, example)"
    assert base64.b64decode(bundle["image/png"]).startswith(PNG)
    check_state(explorer)


def test_maps_are_the_shipped_models_attention(explorer):
    start = explorer.values()
    explorer.controls["example"].value = 2
    for H in (1, 8):
        explorer.controls["heads"].value = H
        model = variants.load_trained(mark_heads.variant(H), 0)
        _, ids = EXAMPLES[2]
        with torch.no_grad():
            _, weights = model(ids[None], return_weights=True)
        np.testing.assert_allclose(explorer.state()["maps"], weights[0][0].numpy(), rtol=1e-6)
    for name, value in start.items():
        explorer.controls[name].value = value


@pytest.mark.parametrize("name", ["heads", "example"])
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
    for H in mark_heads.HEAD_COUNTS:
        explorer.controls["heads"].value = H
        for example in range(len(EXAMPLES)):
            explorer.controls["example"].value = example
            check_state(explorer)
            seen.add(picture(explorer))
    assert len(seen) == len(mark_heads.HEAD_COUNTS) * len(EXAMPLES)


def test_examples_are_short_whole_sentences_with_three_kinds_of_noun():
    for label, ids in EXAMPLES:
        tokens = corpus.to_tokens(ids)
        assert 8 <= len(ids) <= 14 and tokens[-1] in language.MARKS
        assert tokens[0] in language.SUBJECTS and label.endswith(" ... " + tokens[-1])
        assert len(set(tokens[-1][1:])) == 3  # three different kinds: a clear mark to read
    # one plain aside, one with a song between its nouns, one with nested asides
    assert "sings" in corpus.to_tokens(EXAMPLES[1][1])
    assert (
        corpus.to_tokens(EXAMPLES[2][1]).count("]") + corpus.to_tokens(EXAMPLES[2][1]).count(")")
        == 2
    )


def ink_rows(png: bytes) -> np.ndarray:
    from PIL import Image

    rgb = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
    return (rgb.min(axis=2) < 200).any(axis=1)  # per pixel row: anything drawn?


def test_one_row_of_heads_is_not_followed_by_an_empty_row(explorer):
    explorer.controls["example"].value = 1
    heights = {}
    for H in (8, 1, 4):
        explorer.controls["heads"].value = H
        rows = ink_rows(picture(explorer))
        heights[H] = len(rows)
        # the key labels under the last row are whole: drawn, and followed by a blank margin
        assert rows[-int(0.2 * len(rows)) :].any() and not rows[-4:].any()
    # one row of up to four heads: the same short picture, well under the two-row one
    assert heights[1] == heights[4] < 0.7 * heights[8]
    explorer.controls["example"].value = 0


def test_the_outline_sits_on_the_row_before_the_mark_and_triangles_over_its_nouns(explorer):
    explorer.controls["example"].value = 1
    query, nouns = explorer.state()["mark"]
    tokens = explorer.state()["tokens"]
    assert tokens[query + 1] in language.MARKS
    assert all(tokens[n] in (*language.NOUNS, *language.SUBJECTS) for n in nouns)
    row, triangles = explorer.rows[0], explorer.nouns[0]
    assert row.get_y() == query - 0.5 and row.get_height() == 1
    # over the nouns' columns, above the map (its top edge is -0.5): no cell is covered
    assert list(triangles.get_xdata()) == list(nouns)
    assert max(triangles.get_ydata()) < -0.5 and not triangles.get_clip_on()
    explorer.controls["example"].value = 0


def test_the_still_shows_every_head_on_the_sentence_with_a_song():
    state = HeadsExplorer().state()
    assert state["values"] == {"heads": 8, "example": 1}
    assert "sings" in state["tokens"] and len(state["titles"]) == 8


def test_low_weights_get_colours_of_their_own(explorer):
    image = explorer.images[0]
    low, lower = image.norm(0.2), image.norm(0.05)
    # a square-root scale: 0.05 and 0.2 lie a quarter of the scale apart, not 0.15 of it
    assert low - lower == pytest.approx(0.2236, abs=1e-3)
    assert image.norm.vmin == 0.0 and image.norm.vmax == 1.0


# ---------------------------------------------------------------- the learner's multihead


def learner_multihead(x, qkv, out, num_heads, mask=None, rope=None, *, width=None):
    """A learner's multihead; width, when given, is the (wrong) width the scores are scaled by."""
    B, T, D = x.shape
    d = D // num_heads
    q, k, v = (t.view(B, T, num_heads, d).transpose(1, 2) for t in qkv(x).split(D, dim=-1))
    if rope is not None:
        q, k = rope(q), rope(k)
    scores = q @ k.transpose(-2, -1) / (width or d) ** 0.5
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    y = scores.softmax(dim=-1) @ v  # (B, H, T, d)
    return out(y.transpose(1, 2).reshape(B, T, D))


def scaled_by_model_width(x, qkv, out, num_heads, mask=None, rope=None):
    return learner_multihead(x, qkv, out, num_heads, mask, rope, width=x.shape[-1])


def note_of(explorer) -> str:
    return explorer.state()["readout"].split("\n", 1)[1]


def test_the_learners_right_multihead_draws_the_models_maps_and_agrees():
    e = HeadsExplorer(multihead=learner_multihead)
    for H in (1, 8):  # d = 64 (one read of the values), d = 8 (two reads for T up to 14)
        e.controls["heads"].value = H
        model = variants.load_trained(mark_heads.variant(H), 0)
        for example in range(len(EXAMPLES)):
            e.controls["example"].value = example
            with torch.no_grad():
                _, weights = model(EXAMPLES[example][1][None], return_weights=True)
            np.testing.assert_allclose(e.state()["maps"], weights[0][0].numpy(), atol=1e-6)
            note = note_of(e)
            assert note.startswith("Your multihead agrees with the course's at ")
            assert f"heads {H}, sentence '{EXAMPLES[example][0]}'" in note
            assert "each head's weights, read through your multihead" in note
            check_state(e)


def test_a_wrong_multihead_is_flagged_where_it_differs():
    e = HeadsExplorer(multihead=scaled_by_model_width)
    e.controls["heads"].value = 4
    note = note_of(e)
    assert note.startswith("DIFFERS from the course's multihead at heads 4, sentence")
    assert "largest difference" in note and "The picture shows yours" in note
    gap = float(note.split("largest difference ")[1].split(". ")[0])
    shown, course = e.state()["maps"], e.maps[4, e.values()["example"]].numpy()
    assert np.abs(shown - course).max() == pytest.approx(gap, rel=1e-2)
    # one head is as wide as the model: dividing by sqrt(D) is right there, and the note says so
    e.controls["heads"].value = 1
    assert note_of(e).startswith("Your multihead agrees with the course's at heads 1, sentence")


def test_a_multihead_that_ignores_the_mask_draws_the_future():
    def no_mask(x, qkv, out, num_heads, mask=None, rope=None):
        return learner_multihead(x, qkv, out, num_heads, None, rope)

    e = HeadsExplorer(multihead=no_mask)
    maps = e.state()["maps"]
    assert np.triu(maps, k=1).max() > 0.01  # weight above the diagonal: later tokens
    assert note_of(e).startswith("DIFFERS")


def test_a_stub_shows_the_courses_maps_and_says_not_written_yet():
    e = HeadsExplorer(multihead=stub)
    assert note_of(e) == "Your multihead is not written yet: the picture shows the course's."
    v = e.values()
    np.testing.assert_array_equal(e.state()["maps"], e.maps[v["heads"], v["example"]].numpy())
    check_state(e)


def test_a_multihead_that_returns_a_pair_is_reported_and_the_courses_maps_shown():
    def returns_pair(x, qkv, out, num_heads, mask=None, rope=None):
        y = learner_multihead(x, qkv, out, num_heads, mask, rope)
        return y, None

    note = note_of(HeadsExplorer(multihead=returns_pair))
    assert "raised ValueError at heads 8, sentence" in note and "returned tuple" in note


def test_multihead_must_be_a_function():
    with pytest.raises(TypeError, match="multihead: expected your multihead function"):
        HeadsExplorer(multihead="multihead")
