"""course_lib.viz.render: the PNG bytes of figures and explorer canvases."""

from course_lib import viz


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
