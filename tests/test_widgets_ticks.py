"""TickStamp (course_lib.widgets.ticks): tick labels stamped where matplotlib puts its own."""

from pathlib import Path

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from course_lib import viz
from course_lib.widgets.ticks import TickStamp

WORDS = 'Dogs near the cat sing bone run ( sleeps ) " behind fishes .'.split()


def label_boxes(rgb, ax, renderer, count: int) -> list:
    """Ink bounding box of each tick (mark and label) of a count x count map: y ticks in
    their row's band left of the axes, x ticks in their column's band below it."""
    ink = rgb.min(axis=2) < 200
    height, frame = ink.shape[0], ax.get_window_extent(renderer)
    half = frame.height / count / 2
    boxes = []
    for x, y in ax.transData.transform([(i, i) for i in range(count)]):
        row_band = ink[int(height - y - half) + 1 : int(height - y + half), : int(frame.x0) - 1]
        column_band = ink[int(height - frame.y0) + 1 :, int(x - half) + 1 : int(x + half)]
        for band in (row_band, column_band):
            ys, xs = np.nonzero(band)
            boxes.append((xs.min(), xs.max(), ys.min(), ys.max()) if len(xs) else None)
    return boxes


def test_tick_stamp_puts_labels_where_matplotlib_puts_its_own():
    T = len(WORDS)
    fig, ax = viz.new_figure(5, 5)
    ax.imshow(np.linspace(0, 1, T * T).reshape(T, T))
    ax.set_xticks(range(T), WORDS, rotation=90, fontsize=8)
    ax.set_yticks(range(T), WORDS, fontsize=8)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    fig.set_layout_engine("none")
    reference = np.asarray(canvas.buffer_rgba())[..., :3].copy()
    expected = label_boxes(reference, ax, canvas.get_renderer(), T)
    ax.set_xticks([])
    ax.set_yticks([])

    def stamped(words, fontsize=8, kind="x90"):
        canvas.draw()
        stamp, renderer = TickStamp(fig, fontsize=fontsize), canvas.get_renderer()
        stamp.stamp(renderer, ax, kind, words)
        stamp.stamp(renderer, ax, "y", words)
        got = label_boxes(np.asarray(canvas.buffer_rgba())[..., :3], ax, renderer, T)
        return max(
            max(abs(int(a) - int(b)) for a, b in zip(e, g, strict=True)) if e and g else 99
            for e, g in zip(expected, got, strict=True)
        )

    assert stamped(WORDS) <= 1  # pixels, from rounding
    # a wrong font size, rotation or word order lands visibly elsewhere
    assert stamped(WORDS, fontsize=9) >= 2
    assert stamped(WORDS, kind="x") >= 5
    assert stamped(WORDS[::-1]) >= 5


def test_tick_stamp_names_bad_arguments():
    fig, ax = viz.new_figure(3, 3)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    stamp = TickStamp(fig)
    with pytest.raises(ValueError, match="kind: expected one of"):
        stamp.prepare(["a"], "z")
    with pytest.raises(ValueError, match=r"positions: expected one per label \(2\), got 3"):
        stamp.stamp(canvas.get_renderer(), ax, "x", ["a", "b"], positions=[0, 1, 2])


def test_tick_stamp_is_defined_once():
    """The explorers' glyph cache lives in widgets/ticks.py only (it left viz for issue 23)."""
    package = Path(__file__).resolve().parents[1] / "course_lib"
    defining = [p for p in package.rglob("*.py") if "class TickStamp" in p.read_text()]
    assert [p.relative_to(package).as_posix() for p in defining] == ["widgets/ticks.py"]
