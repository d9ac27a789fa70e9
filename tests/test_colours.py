"""Colour that everyone can read (every figure the course draws: the explorers' and viz's).

Maps of data that is never negative use viridis or cividis; signed data a diverging map
centred on 0. A line or bar whose label names a meaning has that meaning's colour
(viz.COLOURS) in every lesson, and legend entries never differ by colour alone.
"""

import importlib
import inspect
import pkgutil
import re

import numpy as np
import pytest
import torch
from matplotlib.cm import ScalarMappable
from matplotlib.collections import PathCollection
from matplotlib.colors import same_color, to_rgb
from matplotlib.container import BarContainer
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from course_lib import heads, position_demos, positional, saturation, train, viz
from course_lib.train import History
from course_lib.widgets import EXPLORERS

SEQUENTIAL = {"viridis", "cividis"}
DIVERGING = {"RdBu_r", "RdBu", "PuOr", "PuOr_r", "BrBG", "BrBG_r", "coolwarm"}


def scores(layers=2, heads_=4, scale=1.0):
    g = torch.Generator().manual_seed(0)
    return {name: scale * torch.rand(layers, heads_, generator=g) for name in heads.DETECTORS}


def attention(*shape):
    return torch.softmax(torch.randn(*shape, generator=torch.Generator().manual_seed(1)), dim=-1)


LABELS = ["the", "cat", "sat", "on", "a", "mat"]
NORMS = {
    f"{norm}, residual {on}": ([2.0**-i for i in range(6)], [1.0 + i for i in range(6)])
    for norm in ("layer norm", "batch norm", "no norm")
    for on in ("on", "off")
}
HISTORY = History(
    step=list(range(1, 41)),
    train_loss=[3.0 - i / 20 for i in range(40)],
    grad_norm=[[1.0 + i / 40, 2.0 - i / 40] for i in range(40)],
    val_step=[10, 20, 30, 40],
    val_loss=[2.8, 2.2, 1.9, 1.8],
)

# every public figure-making function of course_lib.viz, called with small valid inputs the
# way the lessons call it (the lessons' own labels, so their meanings are checked)
CHANCE = {"subject": 0.12, "previous": 0.07, "induction": 0.08, "song": 0.05, "bracket": 0.06}
VIZ_FIGURES = {
    "attention_heatmap": lambda: viz.attention_heatmap(attention(6, 6), LABELS, LABELS),
    "padding_figure": lambda: viz.padding_figure(
        attention(4, 6), attention(4, 6) * torch.tensor([1.0] * 4 + [0.0] * 2), LABELS[:4], 6
    ),
    "next_token_figure": lambda: viz.next_token_figure(
        [(["Dog"], {"near": 0.5, "with": 0.5}, "near", "other"), (["a"], {"b": 1.0}, "b", "mark")]
    ),
    "curve_panels": lambda: viz.curve_panels(
        [1, 2, 4, 8],
        [
            {
                "title": "variance",
                "ylabel": "v",
                "lines": {"q . k": [1, 2, 4, 8], "q . k / sqrt(d_k)": [1, 1, 1, 1]},
                "dashed": {"d_k (the derivation)": [1, 2, 4, 8]},
            },
            {"title": "t", "ylabel": "y", "lines": {"unscaled": [1, 2, 3, 4], "scaled": [4] * 4}},
        ],
        xlabel="d_k",
    ),
    "training_figure": lambda: viz.training_figure(
        {
            (d, scale): {k: [1.0, 0.5, 0.2] for k in ("loss", "entropy", "grad_scores", "flagged")}
            for d in (16, 256)
            for scale in (True, False)
        },
        one_key_loss=2 / 3,
    ),
    "excess_rows_figure": lambda: viz.excess_rows_figure(
        [
            {
                "title": "one layer",
                "holds": True,
                "scaled": {s: [0.1, 0.1, 0.1] for s in saturation.SKILLS},
                "unscaled": {s: [0.6, 0.7, 0.6] for s in saturation.SKILLS},
                "claims": [{"skill": "all", "gap": 0.5, "bar": 0.3, "holds": True}],
            }
        ],
    ),
    "noun_weights_figure": lambda: viz.noun_weights_figure(
        {"1 head": torch.tensor([[0.1, 0.2, 0.3]]), "2 heads": torch.rand(2, 3)}, title="t"
    ),
    "block_diagram": lambda: viz.block_diagram(prenorm=False),
    "depth_profile_figure": lambda: viz.depth_profile_figure(NORMS),
    "seed_dots_figure": lambda: viz.seed_dots_figure(
        {"with": {1: [0.03, 0.04], 2: [0.01, 0.02]}, "without": {1: [0.4, 0.5], 2: [0.5, 0.7]}},
        xlabel="layers",
        title="t",
    ),
    "encoding_heatmap": lambda: viz.encoding_heatmap(positional.sinusoidal_encoding(16, 8)),
    "similarity_figure": lambda: viz.similarity_figure(
        position_demos.position_similarity(64, 32), rows=(0, 16, 40)
    ),
    "rotated_pair_figure": lambda: viz.rotated_pair_figure(torch.tensor([1.0, 0.4]), range(6)),
    "turned_basis_figure": lambda: viz.turned_basis_figure(0.6),
    "length_figure": lambda: viz.length_figure(
        {
            "RoPE": torch.stack([torch.linspace(0, 2, 31), torch.linspace(0, 1, 31)]),
            "sinusoidal added": torch.stack([torch.linspace(0, 4, 31)] * 2),
            "learned positions": torch.stack([torch.linspace(0, 3, 31)] * 2),
            "no positions": torch.stack([torch.linspace(0, 0.8, 31)] * 2),
        },
        8,
    ),
    "drift_figure": lambda: viz.drift_figure(
        [1, 10, 100], {"float32": [1e-6, 1e-5, 1e-4], "float64": [1e-15, 0.0, 1e-13]}
    ),
    "memory_figure": lambda: viz.memory_figure(
        [256, 512],
        {
            "forward": {"lesson 01 attention": [4e6, 16e6], "your online_attention": [1e6, 2e6]},
            "saved": {"lesson 01 attention": [5e6, 20e6], "flash_attention": [1e5, 2e5]},
        },
    ),
    "angles_figure": lambda: viz.angles_figure(
        torch.outer(torch.arange(16.0), torch.tensor([1.0, 0.1])),
        torch.outer(torch.arange(16.0), torch.tensor([1.0, 0.1])),
        8,
    ),
    "excess_figure": lambda: viz.excess_figure(
        {"as trained": [0.0, 0.1, 1.0], "NTK-aware, s = 4": [0.0, 0.1, 0.5]},
        2,
        {"as trained": ([0.0, 0.0, 0.8], [0.1, 0.2, 1.2])},
    ),
    "excess_panels": lambda: viz.excess_panels(
        [
            {"as trained": [0.0, 0.1, 1.0], "YaRN, s = 4": [0.5, 0.6, 0.7]},
            {"as trained": [0.0, 0.1, 1.0], "NTK-aware, s = 4": [0.0, 0.1, 0.5]},
        ],
        2,
        {"as trained": ([0.0, 0.0, 0.8], [0.1, 0.2, 1.2])},
        ("left", "right"),
    ),  # fmt: skip
    "visibility_figure": lambda: viz.visibility_figure(
        attention(6, 6), attention(6, 6) * torch.ones(6, 6).tril(), LABELS
    ),
    "encoder_decoder_diagram": viz.encoder_decoder_diagram,
    "cross_map_figure": lambda: viz.cross_map_figure(
        attention(9, 8), LABELS + ["a", "b"], [f"{i}" for i in range(9)]
    ),  # fmt: skip
    "reversal_training_figure": lambda: viz.reversal_training_figure(
        [0, 10, 20], [0.1, 0.5, 1.0], torch.rand(3, 2, 2), chance=0.125, word_chance=1 / 12
    ),
    "token_costs_figure": lambda: viz.token_costs_figure(
        [16, 64],
        {"cached": [1, 2], "recomputed": [3, 40]},
        {"cached": [5, 6], "recomputed": [7, 8]},
    ),
    "time_per_token_figure": lambda: viz.time_per_token_figure(
        [256, 512], {"cached": [1e-3, 1.1e-3], "recomputed": [1e-2, 4e-2]}
    ),
    "head_groups_figure": lambda: viz.head_groups_figure(8, 2),
    "tradeoff_figure": lambda: viz.tradeoff_figure(
        {
            "window": 4,
            "samples": 16,
            "seeds": [0, 1],
            "rows": [
                {"temperature": t, "top_k": k, "runs": [{"kept": 0.9, "distinct": 9.0}] * 2}
                for t, k in ((0, None), (1.0, None), (1.0, 3), (2.0, 3))
            ],
        }
    ),
    "time_figure": lambda: viz.time_figure(
        [256, 512], {"your attention": [1e-3, 4e-3], "fused kernel": [1e-4, 3e-4]}
    ),
    "bends_figure": viz.bends_figure,
    "excess_by_position_figure": lambda: viz.excess_by_position_figure(
        {"full causal": [0.01, 0.5, 1.0], "window 32": [0.01, 0.05, 0.06]},
        trained=1,
        spread={"window 32": ([0.01, 0.04, 0.05], [0.02, 0.06, 0.07])},
    ),
    "skill_curves_figure": lambda: viz.skill_curves_figure(
        [50, 100], {"subject": [2.0, 0.5], "induction": [2.2, 1.4]}
    ),
    "copy_forming_figure": lambda: viz.copy_forming_figure(
        [(50, 2.0), (100, 0.5), (150, 0.1)],
        {0: [(50, 2.2), (100, 0.1)], 1: [(50, 2.0), (100, 1.0)]},
    ),
    "schedule_figure": lambda: viz.schedule_figure(
        train.learning_rate,
        {"2,000 steps": train.TrainConfig(steps=2000), "600 steps": train.TrainConfig(steps=600)},
    ),
    "detector_figure": lambda: viz.detector_figure(scores(), CHANCE, "t"),
    "forming_figure": lambda: viz.forming_figure(
        [50, 100],
        {"L0 H3: previous": [0.1, 0.3], "L1 H3: induction": [0.2, 0.7]},
        CHANCE | {"induction": 0.08},
    ),
    "knockout_figure": lambda: viz.knockout_figure(
        [(0, 0), (0, 1)], [[0.1, 5.5], [-0.4, 1.0]], ("all", "mark"), "t"
    ),
}


def figure_making_functions() -> set[str]:
    """Public functions of every module of the viz package that return a Figure: annotated
    so, or ending `return fig`. Each must also be reachable as viz.<name>, as lessons call it."""
    found = set()
    for module in pkgutil.iter_modules(viz.__path__, prefix=f"{viz.__name__}."):
        members = importlib.import_module(module.name)
        for name, fn in inspect.getmembers(members, inspect.isfunction):
            if name.startswith("_") or fn.__module__ != module.name:
                continue
            returns_fig = re.search(r"^\s+return fig\s*$", inspect.getsource(fn), re.MULTILINE)
            if inspect.signature(fn).return_annotation is Figure or returns_fig:
                assert getattr(viz, name, None) is fn, f"viz.{name} is not {module.name}.{name}"
                found.add(name)
    return found


def test_every_figure_function_of_viz_is_checked():
    # a new figure function fails here until VIZ_FIGURES builds it
    assert figure_making_functions() == set(VIZ_FIGURES)


def test_the_figure_search_sees_every_lesson_module():
    # the search walks the package: each lesson's module is found and holds checked figures
    homes = {getattr(viz, name).__module__.rsplit(".", 1)[1] for name in VIZ_FIGURES}
    assert homes == set(viz.FIGURE_MODULES)


# ---------------------------------------------------------------- the checks


def mappables(fig):
    """Every artist that colours data through a colormap (images, meshes, scatter with
    values), colour bars included, with its data."""
    for ax in fig.axes:
        for artist in ax.get_children():
            if isinstance(artist, ScalarMappable) and artist.get_array() is not None:
                data = np.ma.masked_invalid(np.asarray(artist.get_array(), dtype=float))
                if data.count():
                    yield artist, data


def colormap_problems(fig) -> list[str]:
    problems = []
    for artist, data in mappables(fig):
        name, norm = artist.get_cmap().name, artist.norm
        where = f"{type(artist).__name__} in '{artist.axes.get_title()}'"
        if data.min() >= 0:
            if name not in SEQUENTIAL:
                problems.append(f"{where}: data >= 0 drawn with {name}, not viridis or cividis")
        elif name not in DIVERGING:
            problems.append(f"{where}: signed data drawn with {name}, not a diverging map")
        elif norm.vmin != -norm.vmax:
            problems.append(f"{where}: diverging map not centred on 0 ({norm.vmin}..{norm.vmax})")
    return problems


def greyish(color) -> bool:
    r, g, b = to_rgb(color)
    return max(r, g, b) - min(r, g, b) < 0.02


def labelled(ax):
    """(label, artist) of every line, patch and bar the axes will list in a legend."""
    for artist in [*ax.lines, *ax.patches, *ax.containers]:
        label = artist.get_label()
        if label and not label.startswith("_"):
            for part in artist.patches if isinstance(artist, BarContainer) else [artist]:
                yield label, part


def meaning_problems(fig) -> list[str]:
    problems = []
    for ax in fig.axes:
        for label, artist in labelled(ax):
            color = artist.get_color() if isinstance(artist, Line2D) else artist.get_facecolor()
            meaning = viz.meaning(label)
            if meaning is not None and not same_color(color, viz.COLOURS[meaning]):
                problems.append(f"'{label}' is {color}, not the colour of {meaning}")
            # no colour of matplotlib's default cycle (red beside green) in a legend
            if isinstance(artist, Line2D) and not (
                greyish(color) or any(same_color(color, c) for c in viz.PALETTE)
            ):
                problems.append(f"line '{label}' is {color}: not in viz.PALETTE, not grey")
    return problems


def look(handle):
    """What tells a legend entry apart from the others, besides its colour."""
    if isinstance(handle, Line2D):
        return ("line", handle.get_marker(), handle.get_linestyle())
    if isinstance(handle, PathCollection):
        return ("marks", handle.get_paths()[0].vertices.round(3).tobytes())
    if isinstance(handle, Patch):
        return ("patch", handle.get_hatch())
    return (type(handle).__name__,)


def legend_problems(fig) -> list[str]:
    legends = [ax.get_legend() for ax in fig.axes] + list(fig.legends)
    problems = []
    for legend in filter(None, legends):
        looks = [look(handle) for handle in legend.legend_handles]
        for text, this in zip(legend.texts, looks, strict=True):
            if looks.count(this) > 1:
                problems.append(
                    f"legend entry '{text.get_text()}' differs from another only by colour"
                )
    return problems


def all_problems(fig) -> list[str]:
    return colormap_problems(fig) + meaning_problems(fig) + legend_problems(fig)


@pytest.mark.parametrize("name", sorted(VIZ_FIGURES))
def test_viz_figure_reads_in_every_colour_vision(name):
    fig = VIZ_FIGURES[name]()
    assert isinstance(fig, Figure)
    assert all_problems(fig) == []


@pytest.fixture(params=EXPLORERS, ids=lambda cls: cls.__name__)
def explorer(request, built_explorer):
    return built_explorer(request.param)


def test_explorer_figure_reads_in_every_colour_vision(explorer):
    assert all_problems(explorer.fig) == []


def test_every_figure_cycles_through_the_palette():
    _, ax = viz.new_figure()
    lines = [ax.plot([0, 1])[0] for _ in viz.PALETTE]
    assert [line.get_color() for line in lines] == list(viz.PALETTE)


def test_cosines_are_coloured_by_their_sign():
    # lesson 06's similarities lie in 0.35..1: sequential; a narrow encoding's go below 0
    assert position_demos.position_similarity(64, 32).min() > 0
    assert viz.cosine_scale(position_demos.position_similarity(64, 32))["cmap"] == "viridis"
    signed = position_demos.position_similarity(16, 2)
    assert signed.min() < 0
    assert colormap_problems(viz.similarity_figure(signed, rows=(0, 8))) == []
    (image,) = viz.similarity_figure(signed, rows=(0, 8)).axes[0].images
    assert image.get_cmap().name == "RdBu_r" and image.norm.vmin == -image.norm.vmax == -1


def test_lesson08_draws_each_norm_alike_in_the_figure_and_the_explorer():
    from course_lib.widgets import BlockExplorer

    fig = viz.depth_profile_figure(NORMS)
    drawn = {line.get_label(): line for line in fig.axes[0].lines}
    explorer = BlockExplorer()
    for label, norm in BlockExplorer.NORMS:
        explorer.controls["norm"].value = norm
        style = explorer.state()["style"]
        for residual in ("on", "off"):
            line = drawn[f"{label}, residual {residual}"]
            assert same_color(line.get_color(), viz.COLOURS[label]), label
            assert same_color(style["color"], viz.COLOURS[label]), label
            assert line.get_marker() == style["marker"] == viz.MARKERS[label], label
        assert drawn[f"{label}, residual off"].get_linestyle() == "--"


# ---------------------------------------------------------------- the checks catch mistakes


def test_the_checks_catch_a_wrong_colormap_and_colour_only_legends():
    fig, (ax_map, ax_lines) = viz.new_figure(ncols=2)
    ax_map.imshow(np.linspace(0.3, 1.0, 16).reshape(4, 4), cmap="RdBu_r", vmin=-1, vmax=1)
    ax_lines.plot([0, 1], [0, 1], "o-", label="scaled")
    ax_lines.plot([0, 1], [1, 0], "o-", label="layer norm")  # right colour, same look
    ax_lines.legend()
    problems = "\n".join(all_problems(fig))
    assert "drawn with RdBu_r, not viridis" in problems
    assert "'layer norm' is #E69F00, not the colour of layer norm" in problems
    assert "differs from another only by colour" in problems

    fig, ax = viz.new_figure()
    ax.imshow(np.linspace(-1.0, 0.5, 16).reshape(4, 4), cmap="jet")
    ax.imshow(np.linspace(-1.0, 0.5, 16).reshape(4, 4), cmap="RdBu_r", vmin=-1, vmax=0.5)
    problems = "\n".join(colormap_problems(fig))
    assert "signed data drawn with jet" in problems and "not centred on 0" in problems

    fig = Figure()  # not made by new_figure: matplotlib's own cycle, tab:blue
    ax = fig.subplots()
    ax.plot([0, 1], label="a line")
    ax.bar([0, 1], [1, 2], color="tab:green", label="validation")
    problems = "\n".join(meaning_problems(fig))
    assert "not in viz.PALETTE" in problems and "not the colour of validation" in problems


# ---------------------------------------------------------------- tools/cvd.py


@pytest.fixture
def cvd():
    from tools import cvd as module

    return module


def hue(rgb):
    """Chromaticity: the colour with its lightness divided out (r, g, b summing to 1)."""
    rgb = np.asarray(rgb, dtype=float)
    return rgb / rgb.sum(axis=-1, keepdims=True)


def test_deuteranopia_confuses_red_with_green_not_blue_with_yellow(cvd):
    pure = np.array([[[255, 0, 0], [0, 255, 0], [0, 0, 255], [255, 255, 0]]], dtype=np.uint8)
    seen = cvd.simulate(pure)
    assert seen.shape == pure.shape and seen.dtype == np.uint8
    red, green, blue, yellow = hue(seen[0])
    # red and green become one yellowish hue, told apart by lightness at most
    assert np.linalg.norm(hue(pure[0, 0]) - hue(pure[0, 1])) > 1.4
    assert np.linalg.norm(red - green) < 0.2
    # blue and yellow stay opposite
    assert np.linalg.norm(blue - yellow) > 0.8
