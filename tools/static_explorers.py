"""Explorers that still respond in a static page: every precomputed setting, switched by a script.

`make html` calls `explorer_figure(explorer)` for each explorer a lesson shows. It walks the
explorer through every combination of the values its `settings()` lists, keeps the PNG, the
readout line and the text alternative of each, and returns one HTML block: the controls as
plain HTML inputs (range, select, checkbox: keyboard-usable as they are), the picture, and
the data. The few lines of JavaScript in site_template/explorers.js, inlined once per page,
look up the picture for the chosen setting. Nothing is fetched, nothing is computed in the
page: any setting between the precomputed ones needs the notebook, and the page says so.
"""

import base64
import html
import io
import itertools
import json

import ipywidgets
import numpy as np
from PIL import Image

from course_lib.runtime import one_thread
from course_lib.widgets.base import value_label


def _labels(control, values: list) -> list[str]:
    """What the learner reads for each value: the control's own option names where it has them."""
    return [value_label(control, value) for value in values]


def _kind(control, values: list) -> str:
    # a checkbox only for a switch: named choices that happen to be True/False ("pre-norm",
    # "post-norm") keep their names, and layers 0 and 1 are numbers, though 0 == False
    if isinstance(control, ipywidgets.Checkbox | ipywidgets.ToggleButton):
        return "checkbox"
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return "range"
    return "select"


def _control_html(figure_id: str, index: int, name: str, control, values: list, start) -> str:
    """One labelled HTML control whose value is an index into `values`."""
    ident = f"{figure_id}-c{index}"
    text = html.escape(getattr(control, "description", "") or name)
    chosen = values.index(start) if start in values else 0
    kind = _kind(control, values)
    labels = _labels(control, values)
    if kind == "checkbox":
        checked = " checked" if values[chosen] is True else ""
        order = [values.index(False), values.index(True)]  # unchecked, checked
        return (
            f'<label class="course-control"><input type="checkbox" id="{ident}" '
            f"data-control=\"{index}\" data-order='{json.dumps(order)}'{checked}> {text}</label>"
        )
    if kind == "range":
        return (
            f'<label class="course-control" for="{ident}">{text}</label> '
            f'<input type="range" id="{ident}" data-control="{index}" min="0" '
            f'max="{len(values) - 1}" step="1" value="{chosen}" '
            f'aria-valuetext="{html.escape(labels[chosen])}"> '
            f'<output for="{ident}">{html.escape(labels[chosen])}</output>'
        )
    options = "".join(
        f'<option value="{i}"{" selected" if i == chosen else ""}>{html.escape(label)}</option>'
        for i, label in enumerate(labels)
    )
    return (
        f'<label class="course-control" for="{ident}">{text}</label> '
        f'<select id="{ident}" data-control="{index}">{options}</select>'
    )


# a palette PNG is about a third of the size of the full-colour one matplotlib writes: a page of
# two hundred pictures stays within the site's size budget. Kept only where no pixel moves by
# more than PALETTE_TOLERANCE of 255 in any channel (marker colours must stay as drawn)
PALETTE_TOLERANCE = 8


def compact_png(png: bytes) -> bytes:
    """The same picture as a 256-colour palette PNG where that changes no colour noticeably
    and is smaller; otherwise the picture as it was."""
    rgb = Image.open(io.BytesIO(png)).convert("RGB")
    palette = rgb.quantize(colors=256, method=Image.Quantize.MAXCOVERAGE, dither=Image.Dither.NONE)
    moved = np.abs(np.asarray(palette.convert("RGB"), np.int16) - np.asarray(rgb, np.int16))
    out = io.BytesIO()
    palette.save(out, "PNG", optimize=True)
    small = out.getvalue()
    return small if moved.max() <= PALETTE_TOLERANCE and len(small) < len(png) else png


def precompute(explorer) -> tuple[list[str], list[list], dict]:
    """Every combination of the explorer's settings: {"i,j,...": {png, readout, alt}}."""
    settings = explorer.settings()
    names = list(settings)
    values = [list(settings[name]) for name in names]
    start = explorer.values()
    pictures = {}
    with one_thread():
        for combo in itertools.product(*(range(len(v)) for v in values)):
            for name, options, i in zip(names, values, combo, strict=True):
                explorer.controls[name].value = options[i]
            state = explorer.state()
            pictures[",".join(map(str, combo))] = {
                "png": base64.b64encode(compact_png(bytes(explorer.image.value))).decode("ascii"),
                "readout": state["readout"],
                "alt": state.get("alt") or state["readout"],
            }
        for name, value in start.items():  # leave it as it was built
            explorer.controls[name].value = value
    return names, values, pictures


def explorer_figure(explorer, figure_id: str, note: str = "") -> str:
    """The static stand-in for one explorer: its controls, picture, readout and data."""
    names, values, pictures = precompute(explorer)
    start = explorer.values()
    key = ",".join(
        str(v.index(start[n]) if start[n] in v else 0) for n, v in zip(names, values, strict=True)
    )
    first = pictures[key]
    controls = "\n".join(  # each label stays on one line with its control
        '<span class="course-control-group">'
        + _control_html(figure_id, i, name, explorer.controls[name], values[i], start[name])
        + "</span>"
        for i, name in enumerate(names)
    )
    labels = [_labels(explorer.controls[n], v) for n, v in zip(names, values, strict=True)]
    data = json.dumps({"labels": labels, "pictures": pictures}, separators=(",", ":"))
    count = len(pictures)
    return (
        f'<figure class="course-explorer" id="{figure_id}" '
        f'data-explorer="{type(explorer).__name__}">\n'
        f'<p class="course-note">This page shows {count} precomputed settings of '
        f"{type(explorer).__name__}: move the controls to switch between them. The notebook "
        f"computes any setting live.{(' ' + html.escape(note)) if note else ''}</p>\n"
        f'<div class="course-controls">\n{controls}\n</div>\n'
        f'<p class="course-readout" aria-live="polite">{html.escape(first["readout"])}</p>\n'
        f'<img class="course-picture" alt="{html.escape(first["alt"], quote=True)}" '
        f'src="data:image/png;base64,{first["png"]}">\n'
        f'<script type="application/json" class="course-explorer-data">{data}</script>\n'
        "</figure>"
    )
