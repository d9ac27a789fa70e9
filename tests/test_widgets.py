"""The Explorer base (every explorer's state, settings and readout) and lesson 00's widgets,
driven from plain Python as the front end would."""

import base64
import math
from html.parser import HTMLParser

import ipywidgets
import numpy as np
import pytest

from course_lib.widgets import EXPLORERS, ConceptCheck, Explorer, SoftmaxExplorer
from course_lib.widgets.base import STATIC_BUDGET, value_label
from helpers import picture

PNG = b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------- every explorer, via the base


@pytest.fixture(params=EXPLORERS, ids=lambda cls: cls.__name__)
def explorer(request, built_explorer):
    return built_explorer(request.param)  # with no arguments, as a lesson builds it


def plain(value) -> bool:
    """Plain Python and numpy values all the way down: no tensors, no matplotlib objects."""
    if isinstance(value, dict):
        return all(isinstance(k, str) and plain(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return all(plain(v) for v in value)
    return isinstance(value, bool | int | float | str | np.ndarray | np.number)


def test_explorers_come_in_lesson_order_and_all_share_the_base():
    assert [cls.__module__.rsplit(".", 1)[1] for cls in EXPLORERS] == sorted(
        cls.__module__.rsplit(".", 1)[1] for cls in EXPLORERS
    )
    assert all(issubclass(cls, Explorer) for cls in EXPLORERS)


def test_builds_with_no_arguments_and_states_what_it_shows(explorer):
    assert picture(explorer).startswith(PNG)
    assert repr(explorer) == f"{type(explorer).__name__}(controls: {', '.join(explorer.controls)})"
    state = explorer.state()
    assert state["values"] == {name: c.value for name, c in explorer.controls.items()}
    assert state["readout"].strip() and "<" not in state["readout"]  # plain text
    assert explorer.readout in explorer.widget.children  # one line, above the picture
    children = list(explorer.widget.children)
    assert children.index(explorer.readout) == children.index(explorer.image) - 1
    assert plain(state), state


def test_settings_name_every_control_with_values_it_accepts(explorer):
    settings = explorer.settings()
    typed = [n for n, c in explorer.controls.items() if isinstance(c, ipywidgets.Text)]
    assert list(settings) == [n for n in explorer.controls if n not in typed]
    assert math.prod(len(values) for values in settings.values()) <= STATIC_BUDGET
    for name, values in settings.items():
        control = explorer.controls[name]
        start = control.value
        assert len(values) >= 2 and len(set(map(repr, values))) == len(values), (name, values)
        assert start in values, (name, "the starting state must be one of the settings")
        for value in values:
            control.value = value
            assert control.value == value, (name, value)
        control.value = start


def test_every_control_changes_the_picture_or_the_readout(explorer):
    for name, values in explorer.settings().items():
        control = explorer.controls[name]
        first = control.value
        before = (picture(explorer), explorer.state()["readout"])
        others = [v for v in values if v != first][:2]  # quick: two settings per control
        changed = False
        for value in others:
            control.value = value
            state = explorer.state()
            assert state["values"][name] == value
            changed |= (picture(explorer), state["readout"]) != before
        control.value = first
        assert changed, (type(explorer).__name__, name, others)


class Still(HTMLParser):
    """The text and the pictures of an explorer's HTML part, as a page shows them."""

    def __init__(self, markup: str):
        super().__init__()
        self.text, self.images = [], []
        self.feed(markup)

    def handle_data(self, data):
        self.text.append(data)

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.images.append(dict(attrs))


def test_without_a_widget_manager_it_shows_its_setting_readout_and_picture(explorer):
    """GitHub, nbviewer, nbconvert and a kernel-less JupyterLab show text/html in place of the
    widget: the setting and the readout line must be there, above the picture they explain."""
    name, values = next(iter(explorer.settings().items()))
    control = explorer.controls[name]
    start = control.value
    control.value = moved = values[-1] if values[-1] != start else values[0]
    still = Still(explorer._repr_mimebundle_()["text/html"])
    shown, readout, alt = picture(explorer), Still(explorer.readout.value), explorer.describe()
    control.value = start
    text = " ".join("".join(still.text).split())
    assert f"{control.description or name} = {value_label(control, moved)}" in text
    assert " ".join("".join(readout.text).split()) in text  # the readout line, as shown live
    (image,) = still.images
    assert image["src"] == "data:image/png;base64," + base64.b64encode(shown).decode("ascii")
    assert image["alt"] == alt


@pytest.mark.slow  # nbconvert's import and one export: about 1.5 s
def test_a_page_rendered_without_widget_state_shows_the_explorer_still():
    """What nbviewer shows of a lesson (nbconvert's HTML, no widget state in the notebook)."""
    import nbformat
    from nbconvert import HTMLExporter

    explorer = SoftmaxExplorer()
    cell = nbformat.v4.new_code_cell("SoftmaxExplorer()", execution_count=1)
    cell.outputs = [nbformat.v4.new_output("display_data", data=explorer._repr_mimebundle_())]
    page, _ = HTMLExporter().from_notebook_node(nbformat.v4.new_notebook(cells=[cell]))
    main = Still(page[page.index("<main>") :])
    text = " ".join("".join(main.text).split())
    assert "SoftmaxExplorer, a still picture at sharpness (scores x) = 1." in text
    assert "scores x 1: weights cat 0.56, sat 0.21, on 0.13, the 0.08, mat 0.03" in text
    (image,) = main.images  # one picture, above it the readout that explains it
    assert image["alt"] == explorer.describe()
    assert image["src"] == "data:image/png;base64," + base64.b64encode(picture(explorer)).decode()


def test_the_setting_names_each_control_as_the_learner_reads_it(built_explorer):
    from course_lib.widgets import TrainedHeadsExplorer  # a box to type into, named choices

    explorer = built_explorer(TrainedHeadsExplorer)
    assert "your line" not in explorer.setting()  # nothing typed yet
    assert explorer.setting().startswith(
        "line = the copy; after training step = 250; layer = 1; head = 3"
    )
    explorer.controls["sentence"].value = "the cat"
    assert 'your line = "the cat"' in explorer.setting()
    explorer.controls["sentence"].value = ""


def test_control_settings_of_each_kind():
    from course_lib.widgets.base import MAX_SETTINGS, control_settings, text_box

    assert control_settings(ipywidgets.Checkbox(value=True), True) == [False, True]
    assert control_settings(ipywidgets.Dropdown(options=[("a", 1), ("b", 2)], value=1), 1) == [1, 2]
    assert control_settings(ipywidgets.IntSlider(value=1, min=0, max=3), 1) == [0, 1, 2, 3]
    wide = control_settings(ipywidgets.IntSlider(value=7, min=0, max=100), 7)
    assert wide[0] == 0 and wide[-1] == 100 and 7 in wide and len(wide) <= MAX_SETTINGS + 1
    grid = control_settings(ipywidgets.FloatSlider(value=1.0, min=0, max=8, step=0.25), 1.0)
    assert all((v / 0.25).is_integer() for v in grid) and {0.0, 1.0, 8.0} <= set(grid)
    with pytest.raises(TypeError, match="says: a Text has no values to list"):
        control_settings(text_box("says", "type here"), "")


# ---------------------------------------------------------------- lesson 00


def test_softmax_explorer_shows_a_png_where_widgets_cannot_run():
    explorer = SoftmaxExplorer()
    assert set(explorer.controls) == {"sharpness"}
    assert explorer.controls["sharpness"].continuous_update is False
    bundle = explorer._repr_mimebundle_()
    assert bundle["text/plain"] == "SoftmaxExplorer(controls: sharpness)"
    assert base64.b64decode(bundle["image/png"]).startswith(PNG)
    assert "application/vnd.jupyter.widget-view+json" in bundle


def test_sweeping_the_slider_changes_bars_and_picture():
    explorer = SoftmaxExplorer()
    slider = explorer.controls["sharpness"]
    seen_pictures, previous = set(), None
    for value in np.arange(slider.min, slider.max + 1e-9, 1.0):
        slider.value = float(value)
        heights = explorer.state()["weights"]
        assert all(math.isfinite(h) for h in heights)
        assert math.isclose(sum(heights), 1.0, rel_tol=1e-5)
        if previous is not None:
            assert heights != previous
        previous = heights
        seen_pictures.add(picture(explorer))
    assert len(seen_pictures) == len(np.arange(slider.min, slider.max + 1e-9, 1.0))
    slider.value = 0.0
    state = explorer.state()
    assert [round(h, 6) for h in state["weights"]] == [0.2] * 5
    assert "largest weight 0.20" in state["title"]
    assert state["readout"] == "scores x 0: weights cat 0.20, sat 0.20, on 0.20, the 0.20, mat 0.20"


def test_blitted_picture_equals_a_full_redraw():
    explorer = SoftmaxExplorer()
    explorer.controls["sharpness"].value = 3.0
    fast = explorer.image.value
    explorer.invalidate()
    explorer.redraw()
    assert explorer.image.value == fast


def test_mismatched_labels_are_named():
    with pytest.raises(ValueError, match="labels: expected one label per score"):
        SoftmaxExplorer(scores=(1.0, 2.0), labels=("a",))


def test_concept_check_reveals_the_answer_and_renders_without_widgets():
    check = ConceptCheck("Why divide by sqrt(d_k)?", "To keep scores <moderate>.")
    assert check.shown.value == ""
    check.text.value = "my answer"
    check.button.click()
    assert "To keep scores &lt;moderate&gt;." in check.shown.value
    bundle = check._repr_mimebundle_()
    assert "<details>" in bundle["text/html"] and bundle["text/plain"].startswith("ConceptCheck")


def test_the_picture_has_a_text_alternative_in_numbers(explorer):
    """Its title (what a screen reader reads for it) says what kind of picture, then numbers."""
    alt = explorer.state()["alt"]
    assert alt.startswith(type(explorer).PICTURE) and explorer.state()["readout"] in alt
    assert any(ch.isdigit() for ch in explorer.state()["readout"])
    assert explorer.image.tooltip == alt
    name, values = next(iter(explorer.settings().items()))
    start = explorer.controls[name].value
    explorer.controls[name].value = values[-1] if values[-1] != start else values[0]
    assert explorer.image.tooltip == explorer.state()["alt"]  # it follows every change
    explorer.controls[name].value = start


def test_control_rows_place_each_control_once():
    from course_lib.widgets.base import control_rows, slider

    controls = {"a": slider("a", 1, 0, 3), "b": slider("b", 1, 0, 3), "c": slider("c", 1, 0, 3)}
    boxes = control_rows(controls, [["a", "b"], ["c"]])
    assert [list(box.children) for box in boxes] == [
        [controls["a"], controls["b"]],
        [controls["c"]],
    ]
    assert [list(box.children) for box in control_rows(controls)] == [list(controls.values())]
    with pytest.raises(ValueError, match=r"rows: expected each of \['a', 'b', 'c'\] once"):
        control_rows(controls, [["a"], ["c"]])
    with pytest.raises(ValueError, match="rows: expected"):
        control_rows(controls, [["a", "b", "c", "a"]])


def test_picture_fits_a_1000_px_notebook_at_its_own_size(explorer):
    """A notebook 1000 px wide leaves about 930 px beside the prompts: a wider picture is cut
    off or shrunk (soft) there, and costs pixels nobody sees. 880 px leaves a margin."""
    import io

    from PIL import Image

    width, _ = Image.open(io.BytesIO(picture(explorer))).size
    assert width <= 880, f"{type(explorer).__name__}: a {width} px picture"


def test_a_kept_static_picture_gives_the_same_picture_as_a_full_redraw():
    """ScalingExplorer keeps one static picture per histogram range (invalidate(key)): coming
    back to a range restores it, and the picture must be the one a fresh explorer draws."""
    from course_lib.widgets import ScalingExplorer

    e = ScalingExplorer()
    for scale, d_k in ((False, 256), (True, 256), (False, 16), (False, 256), (True, 64)):
        e.controls["scale"].value = scale
        e.controls["d_k"].value = d_k
    assert len(e._backgrounds) >= 3  # each range drawn in full once, then kept
    fresh = ScalingExplorer()
    fresh.controls["d_k"].value = 64
    assert picture(e) == picture(fresh)
    e.controls["scale"].value = False
    fresh.controls["scale"].value = False
    assert picture(e) == picture(fresh)


def test_snapped_lines_draw_the_same_pixels_when_their_last_bits_differ():
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from course_lib.widgets.base import pixel_snapped

    def picture(y, snap):
        fig = Figure(figsize=(4, 3), dpi=100)
        canvas = FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        (line,) = ax.plot(x, y, lw=2)
        ax.set_xlim(0, 10)
        ax.set_ylim(-1.2, 1.2)
        if snap:
            with pixel_snapped([line]):
                canvas.draw()
            assert np.array_equal(line.get_ydata(), y)  # its data is put back
        else:
            canvas.draw()
        return np.asarray(canvas.buffer_rgba()).copy()

    x = np.linspace(0, 10, 400)
    y = np.sin(3 * x)
    nudged = y * (1 + 2**-21)  # float32 rounding, as another kernel path gives
    assert not np.array_equal(picture(y, snap=False), picture(nudged, snap=False))
    assert np.array_equal(picture(y, snap=True), picture(nudged, snap=True))
