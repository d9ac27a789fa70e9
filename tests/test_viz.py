"""course_lib.viz helpers that no lesson test covers on its own."""

import pytest

from course_lib import viz


def panel(dashed):
    return {"title": "t", "ylabel": "y", "lines": {"data": [1.0, 2.0, 3.0]}, "dashed": dashed}


def test_curve_panels_reference_lines_are_grey_and_told_apart_by_dash_pattern():
    refs = {"level a": [1.0] * 3, "level b": [2.0] * 3, "level c": [3.0] * 3}
    (ax,) = viz.curve_panels([1, 2, 3], [panel(refs)], xlabel="x").axes
    grey = {
        line.get_label(): line.get_linestyle() for line in ax.lines if line.get_color() == "grey"
    }
    assert list(grey) == list(refs)
    assert len(set(grey.values())) == 3  # a legend can tell each one from the others
    with pytest.raises(ValueError, match="dashed: expected at most 3 reference lines, got 4"):
        viz.curve_panels([1, 2, 3], [panel(refs | {"level d": [4.0] * 3})], xlabel="x")


def test_every_head_detector_has_one_style():
    from course_lib import heads

    assert list(viz.DETECTOR_STYLES) == list(heads.DETECTORS)
    markers = [style["marker"] for style in viz.DETECTOR_STYLES.values()]
    assert len(set(markers)) == len(markers)  # a map's marks tell the detectors apart


def test_canvas_png_is_every_pixel_of_the_canvas_without_alpha():
    """The explorers' PNG: three channels, lossless against the canvas (read with numpy from
    Agg's own buffer, not through Pillow's writer), and cut to `height` rows when asked."""
    import io

    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image

    fig, ax = viz.new_figure(3.0, 2.0)
    ax.imshow(np.linspace(0, 1, 60).reshape(6, 10), cmap="viridis")
    ax.plot([0, 9], [0, 5], color=viz.PALETTE[1])
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    rgba = np.asarray(canvas.buffer_rgba())
    assert (rgba[..., 3] == 255).all()  # an opaque figure: dropping alpha loses nothing
    picture = Image.open(io.BytesIO(viz.canvas_png(canvas)))
    assert picture.mode == "RGB"
    assert np.array_equal(np.asarray(picture), rgba[..., :3])
    top = Image.open(io.BytesIO(viz.canvas_png(canvas, height=50)))
    assert np.array_equal(np.asarray(top), rgba[:50, :, :3])
