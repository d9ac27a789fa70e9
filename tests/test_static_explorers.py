"""The static site keeps each explorer picture as a palette PNG where that moves no pixel by more
than PALETTE_TOLERANCE (tools/static_explorers.compact_png), and the picture as drawn otherwise."""

import io

import numpy as np
from PIL import Image

from tools.static_explorers import PALETTE_TOLERANCE, compact_png


def png(pixels: np.ndarray) -> bytes:
    out = io.BytesIO()
    Image.fromarray(pixels.astype(np.uint8), "RGB").save(out, "PNG")
    return out.getvalue()


def rgb(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"), np.int16)


def test_a_picture_of_few_colours_becomes_a_smaller_palette_png_with_the_same_pixels():
    rng = np.random.default_rng(0)
    colours = rng.integers(0, 256, size=(40, 3))  # a plot's few colours, in blocks
    picture = colours[rng.integers(0, 40, size=(60, 80))].repeat(4, 0).repeat(4, 1)
    drawn = png(picture)
    kept = compact_png(drawn)
    assert Image.open(io.BytesIO(kept)).mode == "P" and len(kept) < len(drawn)
    assert np.array_equal(rgb(kept), rgb(drawn))


def test_a_picture_a_palette_cannot_hold_is_kept_as_drawn():
    rng = np.random.default_rng(1)
    drawn = png(rng.integers(0, 256, size=(64, 64, 3)))  # 4,096 colours spread over the cube
    assert compact_png(drawn) == drawn


def test_the_palette_moves_no_pixel_beyond_its_tolerance_on_a_smooth_ramp():
    ramp = np.linspace(0, 255, 600)  # 600 greys and a colour ramp: more than 256 colours
    picture = np.stack([np.tile(ramp, (40, 1)), np.tile(ramp[::-1], (40, 1)),
                        np.full((40, 600), 90.0)], axis=-1)  # fmt: skip
    drawn = png(picture)
    kept = compact_png(drawn)
    assert np.abs(rgb(kept) - rgb(drawn)).max() <= PALETTE_TOLERANCE
