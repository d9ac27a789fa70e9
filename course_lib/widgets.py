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
from matplotlib.patches import Rectangle

from course_lib import viz
from course_lib.attention import (
    causal_mask,
    one_thread,
    project_qkv,
    scaled_dot_product_attention,
    softmax_entropy,
    toy_embeddings,
    typical_gradient_norms,
)
from course_lib.block import (
    StackProfile,
    activation_scales,
    build_stack,
    gradient_reaching,
    run_stack,
)


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
        # natural size, never stretched to the cell's width (a stretched PNG looks blurry)
        self.image = widgets.Image(format="png", layout={"align_self": "flex-start"})
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
        layout={"width": "420px"},  # room for a long description and a usable track
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
        self.button = widgets.Button(
            description="Reveal the course's answer", layout={"width": "auto"}
        )
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


# ---------------------------------------------------------------- lesson 01

TOY_SENTENCE = ("the", "cat", "chased", "the", "mouse", "because", "it", "was", "hungry")


class AttentionExplorer(Explorer):
    """Lesson 01: pick a query token; see its weights beside the whole map (random projections)."""

    WIDTHS = (1, 2, 4, 8, 16, 32, 64)

    def __init__(self, words=TOY_SENTENCE, D: int = 16):
        self.words = list(words)
        self.x = toy_embeddings(self.words, D)  # (T, D)
        T = len(self.words)
        fig, (self.ax_bars, self.ax_map) = viz.new_figure(
            10.5, 4.4, ncols=2, width_ratios=[1, 1.15]
        )
        self.bars = viz.draw_weight_bars(self.ax_bars, [0.0] * T, self.words)
        viz.draw_attention(self.ax_map, torch.zeros(T, T), self.words, self.words)
        self.mesh = self.ax_map.collections[0]
        self.row_box = Rectangle((0, 0), T, 1, fill=False, edgecolor="red", linewidth=2.5)
        self.ax_map.add_patch(self.row_box)
        self.ax_map.set_title("every query (rows) over every key")
        controls = {
            "query": widgets.Dropdown(
                options=[(f"{i}: {w}", i) for i, w in enumerate(self.words)],
                value=min(6, T - 1),
                description="query token",
                style={"description_width": "initial"},
            ),
            "width": widgets.SelectionSlider(
                options=self.WIDTHS, value=8, description="head width d",
                continuous_update=False, style={"description_width": "initial"},
            ),
            "seed": slider("projection seed", 0, 0, 9),
            "causal": widgets.Checkbox(
                value=False, description="causal mask", style={"description_width": "initial"}
            ),
        }
        super().__init__(
            controls, fig,
            dynamic=[self.mesh, *self.bars, self.row_box, self.ax_bars.title],
        )

    def update(self) -> None:
        v = self.values()
        with one_thread():
            q, k, val = project_qkv(self.x, v["width"], seed=v["seed"])  # each (T, d)
            mask = causal_mask(len(self.words)) if v["causal"] else None
            _, self.weights = scaled_dot_product_attention(q, k, val, mask)  # (T, T)
        self.mesh.set_array(self.weights.numpy())
        row = v["query"]
        for bar, height in zip(self.bars, self.weights[row].tolist(), strict=True):
            bar.set_height(height)
        self.row_box.set_y(row)
        self.ax_bars.set_title(f"weights of query {row}: '{self.words[row]}'")


# ---------------------------------------------------------------- lesson 02


class ScalingExplorer(Explorer):
    """Lesson 02: grow d_k with and without the 1/sqrt(d_k) scale; watch softmax saturate."""

    D_KS = tuple(2**i for i in range(11))  # 1 .. 1024
    EDGES = torch.linspace(-48, 48, 33)  # histogram bins 3 wide; scores beyond sit in the end bins

    def __init__(self, T: int = 8, n: int = 16, seed: int = 0):
        self.T, self.n, self.seed = T, n, seed
        self.readout = widgets.HTML()
        # both curves are computed here, live, by the same function the marker uses
        self.curves = {
            scale: [
                typical_gradient_norms(d, scale=scale, T=T, n=n, seed=seed)[0] for d in self.D_KS
            ]
            for scale in (True, False)
        }
        fig, (self.ax_map, self.ax_hist, self.ax_grad) = viz.new_figure(13.0, 4.0, ncols=3)
        labels = [f"{i}" for i in range(T)]
        viz.draw_attention(self.ax_map, torch.zeros(T, T), labels, labels, cbar=False)
        self.mesh = self.ax_map.collections[0]
        self.steps = self.ax_hist.stairs(torch.zeros(32).tolist(), self.EDGES.tolist(), fill=True)
        self.ax_hist.set_xlim(-48, 48)
        self.ax_hist.set_ylim(0, 1)
        self.ax_hist.set_xlabel("score fed to the softmax")
        self.ax_hist.set_ylabel("share of scores")
        self.lines = {}
        for scale, label in ((True, "scaled"), (False, "unscaled")):
            (self.lines[scale],) = self.ax_grad.plot(
                self.D_KS, self.curves[scale], "o-", ms=3, label=label
            )
        self.ax_grad.set_xscale("log", base=2)
        self.ax_grad.set_yscale("log")
        (self.marker,) = self.ax_grad.plot([1], [1], "o", ms=12, mfc="none", mec="red", mew=2.5)
        self.ax_grad.set_xlabel("d_k")
        self.ax_grad.set_ylabel("typical gradient norm\nw.r.t. the scores")
        self.ax_grad.legend(loc="lower left")
        self.ax_grad.grid(True, alpha=0.3)
        self.ax_map.set_title("weights of one sample (yellow = 1)")
        self.ax_hist.set_title("every score the softmax sees")
        self.ax_grad.set_title("typical gradient vs d_k (circle: now)")
        controls = {
            "d_k": widgets.SelectionSlider(
                options=self.D_KS, value=64, description="d_k",
                continuous_update=False, style={"description_width": "initial"},
            ),
            "scale": widgets.Checkbox(
                value=True, description="scale by 1/sqrt(d_k)",
                style={"description_width": "initial"},
            ),
        }
        super().__init__(
            controls, fig,
            dynamic=[self.mesh, self.steps, *self.lines.values(), self.marker],
        )
        # numbers go in an HTML line, not the figure: drawing text costs more than the plot
        self.widget.children = (*self.widget.children[:1], self.readout, *self.widget.children[1:])

    def update(self) -> None:
        d_k, scale = self.controls["d_k"].value, self.controls["scale"].value
        grad, _, weights, scores = typical_gradient_norms(
            d_k, scale=scale, T=self.T, n=self.n, seed=self.seed
        )
        self.grad_norm, self.weights = grad, weights
        self.mesh.set_array(weights[0].numpy())
        low, high = self.EDGES[0].item(), self.EDGES[-1].item()
        counts = torch.histc(scores.clamp(low, high), bins=len(self.EDGES) - 1, min=low, max=high)
        self.steps.set_data(values=(counts / counts.sum()).tolist())
        for key, line in self.lines.items():
            line.set_linewidth(3.0 if key == scale else 1.0)
            line.set_alpha(1.0 if key == scale else 0.35)
        self.marker.set_data([d_k], [grad])
        self.readout.value = (
            f"<b>d_k = {d_k}, {'scaled' if scale else 'unscaled'}</b>: "
            f"largest weight {weights.amax(-1).mean():.2f}, "
            f"entropy {softmax_entropy(weights).mean():.2f} nats, "
            f"score std {scores.std():.1f}, typical gradient {grad:.2g}"
        )


# ---------------------------------------------------------------- lesson 05


class BlockExplorer(Explorer):
    """Lesson 05: stack 1 to 48 blocks; watch the gradient reaching each layer, live.

    Each change runs a real backward pass through the stack. The forward passes are run
    here, once, through twelve stacks of 48 blocks (3 norms x pre/post x residual on/off,
    one seed, so the same weights in all twelve), keeping autograd's record: depth d is
    the first d blocks of a 48-block forward pass, so a change needs only the backward
    pass from block d down. The stack is tiny (D = 16, 2 heads, 2 sequences of 8 tokens).
    """

    MAX_DEPTH = 48
    NORMS = (("layer norm", "layer"), ("batch norm", "batch"), ("no norm", "none"))
    # every setting looks different even where the numbers barely move (depth 1):
    # colour = norm, solid / dashed = residual on / off, circles / squares = pre / post-norm
    COLORS = {"layer": "tab:blue", "batch": "tab:green", "none": "tab:purple"}

    def __init__(self, D: int = 16, heads: int = 2, B: int = 2, T: int = 8, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(B, T, D, generator=g)  # (B, T, D)
        self.probe = torch.randn(B, T, D, generator=g)  # (B, T, D): the gradient fed in at the top
        self.stacks, self.hidden = {}, {}
        with one_thread():
            for _, norm in self.NORMS:
                for prenorm in (True, False):
                    for residual in (True, False):
                        key = (norm, prenorm, residual)
                        self.stacks[key] = build_stack(
                            self.MAX_DEPTH,
                            D,
                            heads,
                            4 * D,
                            seed=seed,
                            norm=norm,
                            prenorm=prenorm,
                            residual=residual,
                        )
                        self.hidden[key] = run_stack(self.stacks[key], self.x)  # 49 x (B, T, D)
        self.readout = widgets.HTML()
        fig, (self.ax_grad, self.ax_scale) = viz.new_figure(11.0, 3.8, ncols=2)
        viz.setup_depth_axes(self.ax_grad, self.ax_scale, self.MAX_DEPTH)
        self.artists = {}
        for name, ax in (("grad", self.ax_grad), ("scale", self.ax_scale)):
            (line,) = ax.plot([], [], "o-", ms=4)
            (below,) = ax.plot([], [], "v", ms=8, color="tab:red")
            (above,) = ax.plot([], [], "^", ms=8, color="tab:red")
            self.artists[name] = (line, below, above)
        self.ax_grad.text(
            0.02,
            0.93,
            "red triangles: beyond the axis, pinned to its edge",
            transform=self.ax_grad.transAxes,
            fontsize=9,
            color="tab:red",
        )
        controls = {
            "depth": slider("depth (blocks)", 24, 1, self.MAX_DEPTH),
            "residual": widgets.Checkbox(
                value=True, description="residual (x + ...)", style={"description_width": "initial"}
            ),
            "norm": widgets.Dropdown(
                options=self.NORMS,
                value="layer",
                description="norm",
                style={"description_width": "initial"},
            ),
            "prenorm": widgets.ToggleButtons(
                options=(("pre-norm", True), ("post-norm", False)),
                value=True,
                description="norm placement",
                style={"description_width": "initial"},
            ),
        }
        dynamic = [artist for group in self.artists.values() for artist in group]
        super().__init__(controls, fig, dynamic=dynamic)
        # numbers go in an HTML line, not the figure: drawing text costs more than the plot
        self.widget.children = (*self.widget.children[:1], self.readout, *self.widget.children[1:])

    def update(self) -> None:
        v = self.values()
        hidden = self.hidden[(v["norm"], v["prenorm"], v["residual"])][: v["depth"] + 1]
        with one_thread():
            grads = gradient_reaching(hidden, self.probe)
        self.profile = StackProfile(grads, activation_scales(hidden))
        layers = list(range(1, v["depth"] + 1))
        for name, values, limits in (
            ("grad", self.profile.grad_norms, viz.GRAD_LIMITS),
            ("scale", self.profile.act_scales, viz.SCALE_LIMITS),
        ):
            line, below, above = self.artists[name]
            ys, low, high = viz.pin_to_limits(values, limits)
            line.set_data(layers, ys)
            line.set_color(self.COLORS[v["norm"]])
            line.set_linestyle("-" if v["residual"] else "--")
            line.set_marker("o" if v["prenorm"] else "s")
            below.set_data(*viz.pinned_points(layers, ys, low))
            above.set_data(*viz.pinned_points(layers, ys, high))
        names = {norm: label for label, norm in self.NORMS}
        self.readout.value = (
            f"<b>{v['depth']} block(s), {'pre' if v['prenorm'] else 'post'}-norm, "
            f"{names[v['norm']]}, residual "
            f"{'on' if v['residual'] else 'off'}</b>: gradient at layer 1 = {grads[0]:.3g}, "
            f"at layer {v['depth']} = {grads[-1]:.3g} (ratio {grads[0] / grads[-1]:.3g}); "
            f"output RMS {self.profile.act_scales[-1]:.3g}"
        )
