"""Explorers: controls that re-run a bit of course math and redraw its picture live.

Every explorer is built the same way (lesson 00 introduces the pattern):
- `controls`, a dict of ipywidgets controls by name;
- `fig`, one matplotlib Figure made once; a change updates its artists in place;
- `widget`, the box that a notebook shows: the controls above a PNG of `fig`.

The picture is an `ipywidgets.Image` holding the PNG bytes of `fig`, so the explorer
needs no interactive matplotlib backend and no JavaScript from the internet, and a
change is visible from plain Python (tests set `controls[name].value` and look at the
figure). Where widgets cannot run (GitHub, nbviewer, nbconvert to HTML) the display
bundle still carries a PNG of the starting state.
"""

import base64
import html

import ipywidgets as widgets
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg

from course_lib import viz


class Explorer:
    """Base class: subclasses build controls and a figure, then implement `update()`.

    Speed (every change should redraw in well under 100 ms on a 2-core laptop): artists
    listed in `self.dynamic` are drawn over a cached picture of everything else
    (blitting), so a change redraws only them. A subclass whose change also moves
    static parts (axis limits, tick labels) calls `self.invalidate()` in `update()`,
    and the next redraw is a full one.
    """

    def __init__(self, controls: dict, fig, dynamic=()):
        self.controls = controls
        self.fig = fig
        self.canvas = FigureCanvasAgg(fig)
        self.dynamic = list(dynamic)
        for artist in self.dynamic:
            artist.set_animated(True)
        self._background = None
        self.image = widgets.Image(format="png")
        self.widget = widgets.VBox(
            [widgets.HBox(list(controls.values()), layout={"flex_flow": "row wrap"}), self.image]
        )
        self.update()
        self.redraw()
        # the first full draw placed everything; freeze it so later changes never shift
        # the axes around (and skip re-running the layout engine on every redraw)
        fig.set_layout_engine("none")
        for control in controls.values():
            control.observe(self._on_change, names="value")

    def values(self) -> dict:
        """The current value of every control, by name."""
        return {name: control.value for name, control in self.controls.items()}

    def update(self) -> None:
        """Recompute from the controls and update the figure's artists in place."""
        raise NotImplementedError

    def invalidate(self) -> None:
        """Ask for a full redraw next time: call after changing limits, ticks or labels."""
        self._background = None

    def redraw(self) -> None:
        """Draw what changed, encode the picture as PNG once, and hand it to the image widget."""
        if self._background is None:
            self.canvas.draw()  # everything but the dynamic artists
            self._background = self.canvas.copy_from_bbox(self.fig.bbox)
        else:
            self.canvas.restore_region(self._background)
        for artist in self.dynamic:
            self.fig.draw_artist(artist)
        self.image.value = viz.canvas_png(self.canvas)

    def _on_change(self, change) -> None:
        self.update()
        self.redraw()

    def __repr__(self) -> str:
        names = ", ".join(self.controls)
        return f"{type(self).__name__}(controls: {names})"

    def _repr_mimebundle_(self, include=None, exclude=None):
        bundle = self.widget._repr_mimebundle_(include=include, exclude=exclude)
        bundle["text/plain"] = repr(self)
        bundle["image/png"] = base64.b64encode(self.image.value).decode("ascii")
        return bundle


def slider(description: str, value, low, high, step=1, **kw):
    """An integer or float slider that only fires on release (lesson 00)."""
    cls = widgets.IntSlider if all(isinstance(v, int) for v in (value, low, high, step)) else (
        widgets.FloatSlider
    )
    return cls(
        value=value,
        min=low,
        max=high,
        step=step,
        description=description,
        continuous_update=False,
        style={"description_width": "initial"},
        **kw,
    )


class SoftmaxExplorer(Explorer):
    """Lesson 00: scale a row of scores up and down and watch softmax sharpen or flatten."""

    def __init__(self, scores=(2.0, 1.0, 0.5, 0.0, -1.0), labels=("cat", "sat", "on", "the", "mat")):
        if len(scores) != len(labels):
            raise ValueError(
                f"labels: expected one label per score ({len(scores)}), got {len(labels)}"
            )
        self.scores = torch.tensor(scores, dtype=torch.float32)
        self.labels = list(labels)
        fig, self.ax = viz.new_figure(5.5, 3.0)
        self.bars = self.ax.bar(self.labels, torch.zeros(len(labels)).tolist(), color="tab:blue")
        self.ax.set_ylim(0, 1)
        self.ax.set_ylabel("softmax weight")
        controls = {"sharpness": slider("sharpness (scores x)", 1.0, 0.0, 8.0, 0.25)}
        super().__init__(controls, fig, dynamic=[*self.bars, self.ax.title])

    def weights(self) -> torch.Tensor:
        return torch.softmax(self.scores * self.controls["sharpness"].value, dim=-1)

    def update(self) -> None:
        w = self.weights()
        for bar, height in zip(self.bars, w.tolist(), strict=True):
            bar.set_height(height)
        self.ax.set_title(
            f"scores x {self.controls['sharpness'].value:g}: largest weight {w.max().item():.2f}"
        )


class ConceptCheck:
    """Write your own answer first, then reveal the course's (used at the end of lessons)."""

    def __init__(self, question: str, answer: str):
        self.question = question
        self.answer = answer
        self.text = widgets.Textarea(
            placeholder="Your answer, in a sentence or two...", layout={"width": "95%"}
        )
        self.button = widgets.Button(description="Reveal the course's answer")
        self.shown = widgets.HTML()
        self.button.on_click(self.reveal)
        self.widget = widgets.VBox(
            [widgets.HTML(f"<b>Check yourself.</b> {html.escape(question)}"), self.text,
             self.button, self.shown]
        )

    def reveal(self, _button=None) -> None:
        note = "" if self.text.value.strip() else "<i>(Try writing yours first next time.)</i> "
        self.shown.value = f"<p>{note}{html.escape(self.answer)}</p>"

    def __repr__(self) -> str:
        return f"ConceptCheck: {self.question}"

    def _repr_mimebundle_(self, include=None, exclude=None):
        bundle = self.widget._repr_mimebundle_(include=include, exclude=exclude)
        bundle["text/plain"] = repr(self)
        bundle["text/html"] = (
            f"<p><b>Check yourself.</b> {html.escape(self.question)}</p>"
            f"<details><summary>The course's answer</summary><p>{html.escape(self.answer)}</p>"
            "</details>"
        )
        return bundle
