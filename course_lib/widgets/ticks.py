"""Tick labels stamped from pictures made once: how the explorers of lessons 03 and 12 label a
sentence's tokens in a few milliseconds (TickStamp)."""

import numpy as np
from matplotlib import rcParams
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.transforms import IdentityTransform


class TickStamp:
    """Tick marks and tick labels stamped onto an Agg canvas from pictures made once (lesson 04b).

    matplotlib lays out and rasterises every tick label each time its axis is drawn, about a
    millisecond a label, so a 32-token sentence spends most of its redraw on 64 words. When
    the labels come from a small vocabulary, each word is rendered once here (all new ones in
    one scratch drawing) and later only copied, with the font, tick length, padding and
    alignment that matplotlib's own tick labels use; the result differs from matplotlib's by
    at most a pixel of rounding.
    """

    # how matplotlib aligns tick labels: y to the left of the axes, x hanging below it
    KINDS = {
        "y": {"rotation": 0, "ha": "right", "va": "center_baseline"},
        "x": {"rotation": 0, "ha": "center", "va": "top"},
        "x90": {"rotation": 90, "ha": "center", "va": "top"},
    }

    def __init__(self, fig: Figure, fontsize=None, tick_length=None):
        self.fig = fig
        self.fontsize = rcParams["xtick.labelsize"] if fontsize is None else fontsize
        points = fig.dpi / 72  # pixels per point
        length = rcParams["xtick.major.size"] if tick_length is None else tick_length  # points
        self.length = length * points
        self.gap = (length + rcParams["xtick.major.pad"]) * points
        self.pictures = {}  # (text, kind) -> (RGBA rows bottom-up, anchor inside them)
        self.marks = LineCollection(
            [], colors=rcParams["xtick.color"], linewidths=rcParams["xtick.major.width"]
        )
        self.marks.set_transform(IdentityTransform())  # segments in canvas pixels
        self.marks.set_figure(fig)  # drawn only by stamp(), never by a full draw

    def prepare(self, texts, kind: str = "y") -> None:
        """Render every text not seen before as a kind of label ("y", "x" or "x90")."""
        if kind not in self.KINDS:
            raise ValueError(f"kind: expected one of {sorted(self.KINDS)}, got {kind!r}")
        todo = [t for t in dict.fromkeys(map(str, texts)) if (t, kind) not in self.pictures]
        if not todo:
            return
        style = self.KINDS[kind]
        em = FontProperties(size=self.fontsize).get_size_in_points() * self.fig.dpi / 72
        step = int(3 * em)  # pixels between two anchors, integers so no rounding is needed
        longest = int(12 + em * max(map(len, todo)))  # more than any text's length
        span = (len(todo) + 1) * step
        vertical = kind == "y"  # y labels stacked one above the other, x labels side by side
        size = (longest, span) if vertical else (span, longest)
        scratch = Figure(figsize=(size[0] / self.fig.dpi, size[1] / self.fig.dpi), dpi=self.fig.dpi)
        scratch.patch.set_alpha(0)
        canvas = FigureCanvasAgg(scratch)
        anchors = [
            (longest - 6, (i + 1) * step) if vertical else ((i + 1) * step, longest - 6)
            for i in range(len(todo))
        ]
        placed = [
            scratch.text(*xy, text, fontsize=self.fontsize, transform=IdentityTransform(), **style)
            for text, xy in zip(todo, anchors, strict=True)
        ]
        canvas.draw()
        renderer = canvas.get_renderer()
        pixels = np.asarray(canvas.buffer_rgba())
        height = pixels.shape[0]
        for text, artist, (x, y) in zip(todo, placed, anchors, strict=True):
            box = artist.get_window_extent(renderer)
            x0, x1 = int(np.floor(box.x0)) - 1, int(np.ceil(box.x1)) + 1
            y0, y1 = int(np.floor(box.y0)) - 1, int(np.ceil(box.y1)) + 1
            rows = pixels[height - y1 : height - y0, x0:x1]
            # the anchor's place inside the copied pixels, from their bottom-left corner
            self.pictures[(text, kind)] = (rows[::-1].copy(), (x - x0, y - y0))

    def stamp(self, renderer, ax, kind: str, labels, positions=None) -> None:
        """Draw outward ticks and labels at data positions (default 0, 1, ...) of ax's x axis
        (kind "x", or "x90" rotated) or y axis ("y"), where set_xticks/set_yticks would."""
        self.prepare(labels, kind)
        labels = [str(label) for label in labels]
        positions = range(len(labels)) if positions is None else list(positions)
        if len(positions) != len(labels):
            raise ValueError(
                f"positions: expected one per label ({len(labels)}), got {len(positions)}"
            )
        frame = ax.get_window_extent(renderer)
        on_x = kind != "y"
        ends = ax.transData.transform([(p, 0) if on_x else (0, p) for p in positions])
        ends = ends[:, 0] if on_x else ends[:, 1]
        lines = []
        gc = renderer.new_gc()
        for text, at in zip(labels, ends, strict=True):
            rows, (dx, dy) = self.pictures[(text, kind)]
            if on_x:
                lines.append([(at, frame.y0), (at, frame.y0 - self.length)])
                anchor = (at, frame.y0 - self.gap)
            else:
                lines.append([(frame.x0, at), (frame.x0 - self.length, at)])
                anchor = (frame.x0 - self.gap, at)
            renderer.draw_image(gc, round(anchor[0]) - dx, round(anchor[1]) - dy, rows)
        gc.restore()
        if self.length > 0:
            self.marks.set_segments(lines)
            self.marks.draw(renderer)

    def reach(self, text, kind: str = "y") -> int:
        """Pixels the label of `text` takes away from the axes: a y label's width, an x
        label's height (tick and gap not included)."""
        self.prepare([text], kind)
        return self.pictures[(str(text), kind)][0].shape[1 if kind == "y" else 0]

    def widest(self, texts, kind: str = "y") -> str:
        """The text whose label reaches furthest from the axes (to reserve room for it)."""
        self.prepare(texts, kind)
        return max(map(str, texts), key=lambda t: self.reach(t, kind))
