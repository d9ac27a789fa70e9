"""The explorer base and the control helpers every lesson's explorer is built from (lesson 00).

Every explorer is built the same way:
- `controls`, a dict of ipywidgets controls by name, made with the helpers below;
- `fig`, one matplotlib Figure made once; a change updates its artists in place;
- `readout`, one line of numbers above the picture, filled through `show_readout`;
- `image`, an `ipywidgets.Image` holding the PNG bytes of `fig`;
- `widget`, the box that a notebook shows: the controls, the readout, the picture.

The picture is a PNG, so the explorer needs no interactive matplotlib backend and no
JavaScript from the internet, and a change is visible from plain Python (tests set
`controls[name].value` and read `state()`). Where widgets cannot run (GitHub, nbviewer,
nbconvert to HTML, a notebook reopened without its kernel, a broken ipywidgets install) the
display bundle still carries the explorer as it was shown, `still_html()`: its setting, the
readout line and the picture; and `settings()` lists the values a static page precomputes.
"""

import base64
import html
from contextlib import contextmanager

import ipywidgets as widgets
import numpy as np
import torch
import traitlets
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.lines import Line2D

from course_lib import viz
from course_lib.exercises.stub import attempt

STYLE = {"description_width": "initial"}  # a control's description is never cut short
MAX_SETTINGS = 16  # a control with at most this many values lists every one in settings()
# every combination of the settings is one picture in a static page: at most this many each,
# which keeps a lesson page within its 15 MB (tools/static_explorers.py)
STATIC_BUDGET = 256


class Picture(widgets.Image):
    """An explorer's picture, whose tooltip is its text alternative (the title screen readers read)
    (lesson 00).

    ipywidgets 8's front end reads a widget's description before it sets the tooltip, and an
    Image has none: the view fails to render. An empty description lets the title through.
    """

    description = traitlets.Unicode("").tag(sync=True)


class Explorer:
    """Base class: subclasses build controls and a figure, then implement `update()` (lesson 00).

    Speed (every change should redraw in well under 100 ms on a 2-core laptop): artists
    listed in `self.dynamic` are drawn over a cached picture of everything else
    (blitting), so a change redraws only them. A subclass whose change also moves
    static parts (axis limits, tick labels) calls `self.invalidate()` in `update()`,
    and the next redraw is a full one. Numbers go in the readout line, not the figure:
    drawing text costs more than the plot.

    The picture's text alternative (its title, which screen readers read out) is PICTURE, what
    kind of picture it is, followed by the readout, which says in numbers what it shows.
    """

    PICTURE = "Explorer picture"  # each explorer says what its picture is
    KEPT_BACKGROUNDS = 16  # static pictures kept per explorer (about 1 MB each)

    def __init__(self, controls: dict, fig, dynamic=(), above_readout=(), rows=None):
        self.controls = controls
        self.fig = fig
        self.canvas = FigureCanvasAgg(fig)
        self.dynamic = list(dynamic)
        for artist in self.dynamic:
            artist.set_animated(True)
        self._background = None
        self._backgrounds = {}  # key -> static picture, see invalidate(key)
        self._background_key = None  # the key of the static parts drawn now
        self._start = self.values()  # settings() grids always hold the starting state
        self._readout = ""  # the readout as plain text, for state()
        self.readout = widgets.HTML()
        # natural size, never stretched to the cell's width (a stretched PNG looks blurry)
        self.image = Picture(format="png", layout={"align_self": "flex-start"})
        self.widget = widgets.VBox([*control_rows(controls, rows), *above_readout, self.readout,
                                    self.image])  # fmt: skip
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
        """Recompute from the controls, update the figure's artists and the readout."""
        raise NotImplementedError

    def show_readout(self, lead: str, rest: str = "", note: str = "") -> None:
        """Fill the line above the picture: `lead` in bold, then `rest`, then a small `note`."""
        self._readout = lead + rest + (f"\n{note}" if note else "")
        shown = f"<b>{html.escape(lead, quote=False)}</b>{html.escape(rest, quote=False)}"
        if note:
            shown += f"<br><small>{html.escape(note, quote=False)}</small>"
        self.readout.value = shown

    def state(self) -> dict:
        """What the explorer shows now: control values, the readout as plain text, and (in
        subclasses) the numbers in the picture, as plain Python and numpy values."""
        return {"values": self.values(), "readout": self._readout, "alt": self.describe()}

    def describe(self) -> str:
        """The picture in words, for readers who cannot see it: its kind, then its numbers."""
        return f"{self.PICTURE}. {self._readout}"

    def settings(self, **chosen) -> dict[str, list]:
        """For each control, the values a static page precomputes: a subclass passes its own
        lists for some controls as `chosen`, the others come from `control_settings`. A control
        that a static page cannot offer (a box to type into) is left out by passing None.
        Every combination is one picture: their number stays within STATIC_BUDGET."""
        return {
            name: list(chosen[name]) if name in chosen else control_settings(c, self._start[name])
            for name, c in self.controls.items()
            if name not in chosen or chosen[name] is not None
        }

    def every(self, name: str, step: int) -> list:
        """Every step-th value of an integer slider, with its last and its starting value."""
        control = self.controls[name]
        return sorted({*range(control.min, control.max + 1, step), control.max, self._start[name]})

    def invalidate(self, key=None) -> None:
        """Ask for a full redraw next time: call after changing limits, ticks or labels.

        With a `key` that names the static parts drawn now (say the axis limits), each key's
        full redraw happens once: its picture is kept, and the next time the explorer comes
        back to that key, the picture is restored instead of drawn (a few ms, not ~100)."""
        self._background_key = key
        self._background = None if key is None else self._backgrounds.get(key)

    def redraw(self) -> None:
        """Draw what changed, encode the picture as PNG once, and hand it to the image widget."""
        if self._background is None:
            with pixel_snapped([line for ax in self.fig.axes for line in ax.lines]):
                self.canvas.draw()  # everything but the dynamic artists
            self._background = self.canvas.copy_from_bbox(self.fig.bbox)
            key = self._background_key
            if key is not None and len(self._backgrounds) < self.KEPT_BACKGROUNDS:
                self._backgrounds[key] = self._background
        else:
            self.canvas.restore_region(self._background)
        with pixel_snapped([a for a in self.dynamic if isinstance(a, Line2D)]):
            for artist in self.dynamic:
                self.fig.draw_artist(artist)
        self.show_picture(viz.canvas_png(self.canvas))

    def show_picture(self, png: bytes) -> None:
        """Hand a new picture to the image widget, with its text alternative (one message)."""
        with self.image.hold_sync():
            self.image.value = png
            self.image.tooltip = self.describe()

    def _on_change(self, change) -> None:
        self.update()
        self.redraw()

    def __repr__(self) -> str:
        names = ", ".join(self.controls)
        return f"{type(self).__name__}(controls: {names})"

    def setting(self) -> str:
        """The controls' values as a learner reads them: "head width d = 8; causal mask = off"."""
        shown = []
        for name, control in self.controls.items():
            label = control.description or name
            if not isinstance(control, widgets.Text):
                shown.append(f"{label} = {value_label(control, control.value)}")
            elif control.value:  # a box to type into: what was typed, if anything
                shown.append(f'{label} = "{control.value}"')
        return "; ".join(shown)

    def still_html(self, png: str) -> str:
        """The explorer for a front end without a widget manager, which shows this part of the
        display bundle instead of the widget: the setting, the readout line above the picture,
        the picture (PNG in base64) with its text alternative."""
        return (
            f"<div><p><small>{type(self).__name__}, a still picture at "
            f"{html.escape(self.setting(), quote=False)}. Moving its controls needs the notebook "
            f"running, with ipywidgets.</small></p>\n<p>{self.readout.value}</p>\n"
            f'<img alt="{html.escape(self.describe(), quote=True)}" '
            f'src="data:image/png;base64,{png}"></div>'
        )

    def _repr_mimebundle_(self, include=None, exclude=None):
        # JupyterLab and VS Code with widgets show the widget view; nbviewer, GitHub, nbconvert
        # and an untrusted or kernel-less JupyterLab show text/html (ranked before image/png)
        bundle = self.widget._repr_mimebundle_(include=include, exclude=exclude)
        png = base64.b64encode(self.image.value).decode("ascii")
        bundle["text/plain"] = repr(self)
        bundle["text/html"] = self.still_html(png)
        bundle["image/png"] = png
        return bundle


@contextmanager
def pixel_snapped(lines, step: float = 0.125):
    """Draw `lines` with their points moved to the nearest `step` of a pixel, then put their
    data back (lesson 00).

    torch's kernel paths round the last bits of a curve differently; drawn as is, the smoothed
    edge of a line then differs by a shade of 1-2/255 from one CPU to another, and so does the
    picture stored in a lesson. Snapped to an eighth of a pixel, the same curve draws the same
    pixels on every path (a point moves by at most 1/16 of a pixel, which no eye sees)."""
    saved = []
    try:
        for line in lines:
            x, y = line.get_xdata(), line.get_ydata()
            points = np.column_stack([np.asarray(x, dtype=float), np.asarray(y, dtype=float)])
            to_pixels = line.get_transform()
            snapped = to_pixels.inverted().transform(
                np.round(to_pixels.transform(points) / step) * step
            )
            saved.append((line, x, y))
            line.set_data(snapped[:, 0], snapped[:, 1])
        yield
    finally:
        for line, x, y in saved:
            line.set_data(x, y)


def value_label(control, value) -> str:
    """What the learner reads for one value of a control: the option's name where it has one,
    on or off for a switch, a float without trailing zeros (lesson 00)."""
    for option in getattr(control, "options", ()):
        if isinstance(option, tuple) and option[1] == value:
            return str(option[0])
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def compare_learner(fn, args: tuple, course_value, what: str, setting: str, atol: float = 1e-4):
    """Run the learner's fn(*args) beside the course's result; return (value to draw, note).

    The picture shows the learner's numbers when their function runs and returns the right
    shape; the note says, in words, whether and how far they differ from the course's at this
    control setting (lesson 02b on, `AttentionExplorer(attention=my_attention)` and friends).
    With fn None there is nothing to compare: the course's value and an empty note.
    """
    if fn is None:
        return course_value, ""
    course = course_value[0] if isinstance(course_value, tuple) else course_value
    tried = attempt(what, fn, *args)
    if tried.missing not in (None, what):
        return course_value, (
            f"Your {what} calls your {tried.missing}, which is not written yet: the picture "
            "shows the course's."
        )
    if tried.missing is not None:
        return course_value, f"Your {what} is not written yet: the picture shows the course's."
    if tried.error is not None:
        err = tried.error
        return course_value, (
            f"Your {what} raised {type(err).__name__} at {setting}: {err}. "
            "The picture shows the course's."
        )
    got = tried.value
    mine = got[0] if isinstance(got, tuple | list) and isinstance(course_value, tuple) else got
    if not isinstance(mine, torch.Tensor) or mine.shape != course.shape:
        shape = tuple(mine.shape) if isinstance(mine, torch.Tensor) else type(mine).__name__
        return course_value, (
            f"DIFFERS: your {what} returned {shape} at {setting}, the course's "
            f"{tuple(course.shape)}. The picture shows the course's."
        )
    gap = (mine.detach().double() - course.detach().double()).abs()
    shown = got if isinstance(course_value, tuple) else mine
    if gap.isnan().any():
        return shown, (
            f"DIFFERS from the course's {what} at {setting}: yours has NaN where the course's "
            f"has numbers ({int(gap.isnan().sum())} of {gap.numel()} values). "
            "The picture shows yours."
        )
    worst = float(gap.max()) if gap.numel() else 0.0
    if worst > atol:
        return shown, (
            f"DIFFERS from the course's {what} at {setting}: largest difference {worst:.3g}. "
            "The picture shows yours."
        )
    return shown, f"Your {what} agrees with the course's at {setting} (within {atol:g})."


def control_rows(controls: dict, rows=None) -> list:
    """The controls laid out in rows: `rows` lists the names on each row (default: all on
    one). A row wraps only where the notebook is too narrow for it: between controls, or
    between the buttons of a long row of buttons, never between a label and its control
    (lesson 00)."""
    rows = [list(controls)] if rows is None else [list(row) for row in rows]
    placed = [name for row in rows for name in row]
    if sorted(placed) != sorted(controls):
        raise ValueError(f"rows: expected each of {list(controls)} once, got {placed}")
    for control in controls.values():
        # a row of buttons may wrap its buttons (beside its label); nothing else is squeezed
        squeeze = isinstance(control, widgets.ToggleButtons)
        control.layout.flex = "0 1 auto" if squeeze else "0 0 auto"
    return [
        widgets.HBox(
            [controls[name] for name in row],
            layout={"flex_flow": "row wrap", "align_items": "center", "grid_gap": "4px 16px"},
        )
        for row in rows
    ]


def control_settings(control, start) -> list:
    """Every value of a small control; for a slider with more than MAX_SETTINGS steps, an even
    grid of them that holds its ends and its starting value (lesson 00)."""
    if isinstance(control, widgets.Checkbox | widgets.ToggleButton):
        return [False, True]
    if hasattr(control, "options"):  # Dropdown, ToggleButtons, SelectionSlider
        return [option[1] if isinstance(option, tuple) else option for option in control.options]
    if isinstance(control, widgets.IntSlider | widgets.FloatSlider):
        count = round((control.max - control.min) / control.step) + 1
        picked = set(range(count))
        if count > MAX_SETTINGS:
            picked = {round(i * (count - 1) / (MAX_SETTINGS - 1)) for i in range(MAX_SETTINGS)}
            picked.add(round((start - control.min) / control.step))
        if isinstance(control, widgets.IntSlider):
            return [control.min + i * control.step for i in sorted(picked)]
        return [round(control.min + i * control.step, 10) for i in sorted(picked)]
    raise TypeError(
        f"{control.description}: a {type(control).__name__} has no values to list; "
        "the explorer's settings() must list them"
    )


def slider(description: str, value, low, high, step=1, **kw):
    """An integer or float slider that only fires on release (lesson 00)."""
    cls = (
        widgets.IntSlider
        if all(isinstance(v, int) for v in (value, low, high, step))
        else (widgets.FloatSlider)
    )
    return cls(
        value=value,
        min=low,
        max=high,
        step=step,
        description=description,
        continuous_update=False,
        style=STYLE,
        layout={"width": "420px"},  # room for a long description and a usable track
        **kw,
    )


def choice_slider(description: str, options, value):
    """A slider over a list of values (say head widths), firing on release (lesson 02b on)."""
    return widgets.SelectionSlider(
        options=options, value=value, description=description, continuous_update=False,
        style=STYLE,
    )  # fmt: skip


def toggle_buttons(description: str, options, value, button_width: str | None = None):
    """A row of buttons, one pressed: a few named choices side by side (lesson 04b on)."""
    style = STYLE if button_width is None else {**STYLE, "button_width": button_width}
    # ipywidgets lays its ToggleButtons out as a block, so the label sits above the buttons;
    # as a flex row the label stays beside them, like every other control's
    return widgets.ToggleButtons(
        options=options, value=value, description=description, style=style,
        layout={"display": "flex", "align_items": "center"},
    )  # fmt: skip


def checkbox(description: str, value: bool):
    """A switch: on or off (lesson 02b on)."""
    return widgets.Checkbox(value=value, description=description, style=STYLE)


def choice_buttons(description: str, options, value):
    """Named choices as buttons, each as wide as its name (lesson 04b on).

    Not a dropdown: in JupyterLab the arrow keys of a focused dropdown move between notebook
    cells instead of choosing, so a learner without a mouse could not use it. Buttons are
    reached with Tab and pressed with Space or Enter.
    """
    return toggle_buttons(description, options, value, button_width="auto")


def text_box(description: str, placeholder: str, width: str | None = None):
    """A text box that fires on Enter or when it loses focus (lesson 12)."""
    layout = {} if width is None else {"layout": {"width": width}}
    return widgets.Text(
        value="", placeholder=placeholder, description=description, continuous_update=False,
        style=STYLE, **layout,
    )  # fmt: skip


class ConceptCheck:
    """Write your own answer first, then reveal the course's (lesson 03a on, at the end of
    lessons)."""

    def __init__(self, question: str, answer: str):
        self.question = question
        self.answer = answer
        self.text = widgets.Textarea(
            placeholder="Your answer, in a sentence or two...", layout={"width": "95%"}
        )
        self.button = widgets.Button(
            description="Reveal the course's answer", layout={"width": "auto"}
        )
        self.shown = widgets.HTML()
        self.button.on_click(self.reveal)
        self.widget = widgets.VBox(
            [
                widgets.HTML(f"<b>Check yourself.</b> {html.escape(question, quote=False)}"),
                self.text,
                self.button,
                self.shown,
            ]
        )

    def reveal(self, _button=None) -> None:
        note = "" if self.text.value.strip() else "<i>(Try writing yours first next time.)</i> "
        self.shown.value = f"<p>{note}{html.escape(self.answer, quote=False)}</p>"

    def __repr__(self) -> str:
        return f"ConceptCheck: {self.question}"

    def _repr_mimebundle_(self, include=None, exclude=None):
        bundle = self.widget._repr_mimebundle_(include=include, exclude=exclude)
        bundle["text/plain"] = repr(self)
        bundle["text/html"] = (
            f"<p><b>Check yourself.</b> {html.escape(self.question, quote=False)}</p>"
            "<details><summary>The course's answer</summary>"
            f"<p>{html.escape(self.answer, quote=False)}</p></details>"
        )
        return bundle
