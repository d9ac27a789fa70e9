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
from course_lib.positional import (
    additive_scores,
    apply_rope,
    rope_scores,
    sinusoidal_at,
    sinusoidal_encoding,
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
        style={"description_width": "initial"},
        layout={"width": "420px"},  # room for a long description and a usable track
        **kw,
    )


def choice_slider(description: str, options, value):
    """A slider over a list of values (say head widths), firing on release (lessons 01-04)."""
    return widgets.SelectionSlider(
        options=options,
        value=value,
        description=description,
        continuous_update=False,
        style={"description_width": "initial"},
    )


class SoftmaxExplorer(Explorer):
    """Lesson 00: scale a row of scores up and down and watch softmax sharpen or flatten."""

    def __init__(
        self, scores=(2.0, 1.0, 0.5, 0.0, -1.0), labels=("cat", "sat", "on", "the", "mat")
    ):
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
            "width": choice_slider("head width d", self.WIDTHS, 8),
            "seed": slider("projection seed", 0, 0, 9),
            "causal": widgets.Checkbox(
                value=False, description="causal mask", style={"description_width": "initial"}
            ),
        }
        super().__init__(
            controls,
            fig,
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
            "d_k": choice_slider("d_k", self.D_KS, 64),
            "scale": widgets.Checkbox(
                value=True,
                description="scale by 1/sqrt(d_k)",
                style={"description_width": "initial"},
            ),
        }
        super().__init__(
            controls,
            fig,
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


# ---------------------------------------------------------------- lesson 03

# validation rows whose first sentence is short and leans on one skill: a song (previous
# token), round brackets, quotes, and a subject behind two distractor nouns
HEADS_EXAMPLE_ROWS = (19, 10, 5, 34)


def heads_examples(rows=HEADS_EXAMPLE_ROWS) -> list[tuple[str, torch.Tensor]]:
    """(label, ids) of the first sentence of some validation rows, for head maps (lesson 03)."""
    from course_lib import data  # here, so lessons 00-02 never load the toy language

    valid = data.load_split("valid")  # (N, T)
    examples = []
    for row in rows:
        tokens = data.to_tokens(valid[row])
        end = tokens.index(".") + 1 if "." in tokens else len(tokens)
        examples.append((" ".join(tokens[:5]) + " ...", valid[row, :end].clone()))  # (T,)
    return examples


def best_detector(card: dict, layer: int, head: int) -> tuple[str, float]:
    """The detector a head scores highest on in a checkpoint's card, and the score (lesson 03)."""
    return max(
        ((name, table[layer][head]) for name, table in card["detectors"].items()),
        key=lambda pair: pair[1],
    )


class HeadsExplorer(Explorer):
    """Lesson 03: each head's attention in the trained rope-h1 / h2 / h4 / h8 models.

    Every model's attention on every example is computed here, once (a few ms each), so a
    change only hands new numbers to the images. Titles carry each head's best detector
    score from the model's card; the heading carries its validation loss. Up to four heads
    fill one row, and the picture then stops below it.
    """

    HEADS = (1, 2, 4, 8)
    NCOLS = 4

    def __init__(self, examples=None):
        from course_lib import data
        from course_lib.model import load_card, load_pretrained

        self.examples = heads_examples() if examples is None else list(examples)
        self.cards = {H: load_card(f"rope-h{H}") for H in self.HEADS}
        self.maps = {}  # (H, example index) -> (layers, H, T, T)
        with one_thread(), torch.no_grad():
            for H in self.HEADS:
                model = load_pretrained(f"rope-h{H}")
                for i, (_, ids) in enumerate(self.examples):
                    _, weights = model(ids[None], return_weights=True)  # per layer (1, H, T, T)
                    self.maps[H, i] = torch.stack([w[0] for w in weights])  # (layers, H, T, T)
        self.labels = [data.to_tokens(ids) for _, ids in self.examples]
        num_layers = self.cards[self.HEADS[0]]["config"]["num_layers"]
        T = max(len(ids) for _, ids in self.examples)
        fig, axes = viz.new_figure(10.5, 6.2, ncols=self.NCOLS, nrows=2)
        fig.set_layout_engine("none")  # fixed places: every head count uses the same grid
        axes[0, 0].get_gridspec().update(
            left=0.08, right=0.9, bottom=0.12, top=0.85, wspace=0.15, hspace=0.5
        )
        self.axes = list(axes.flat)
        self.images = [viz.draw_head_map(ax, torch.zeros(T, T)) for ax in self.axes]
        for ax in self.axes:  # token labels are stamped per example, see _stamp_tokens
            ax.set_xticks([])
            ax.set_yticks([])
        self.titles = [ax.set_title(" ", fontsize=10) for ax in self.axes]
        top_row = self.axes[0].get_position()
        fig.colorbar(self.images[0], label="attention weight",
                     cax=fig.add_axes((0.92, top_row.y0, 0.015, top_row.height)))  # fmt: skip
        self.heading = fig.suptitle(" ")
        fig.text(0.5, 0.925, "rows: the query token; columns: the key it looks at",
                 ha="center", fontsize=9)  # fmt: skip
        # token labels drawn from cached pictures of the vocabulary (viz.TickStamp)
        self.words = viz.TickStamp(fig, fontsize=8, tick_length=0)
        tallest = self.words.reach(self.words.widest(data.VOCAB, "x90"), "x90")
        # up to four heads fill one row: the picture then ends below that row's labels
        below_row = top_row.y0 * fig.bbox.height - self.words.gap - tallest - 8
        self.one_row_height = int(fig.bbox.height - below_row)
        self.shown = None  # the (H, example) whose axes are arranged
        style = {"description_width": "initial"}
        controls = {
            "heads": widgets.ToggleButtons(
                options=[(str(H), H) for H in self.HEADS], value=4, description="heads H",
                style=style,
            ),
            "layer": widgets.ToggleButtons(
                options=[(str(i), i) for i in range(num_layers)], value=0,
                description="layer", style=style,
            ),
            "example": widgets.Dropdown(
                options=[(label, i) for i, (label, _) in enumerate(self.examples)], value=0,
                description="sentence", style=style, layout={"width": "340px"},
            ),
        }  # fmt: skip
        self._bases = {}  # H -> the picture of H empty axes, heading and colour bar
        self._backgrounds = {}  # (H, example) -> the base with the example's tokens stamped
        self._title_strips = {}  # (H, layer) -> the drawn titles, as small pixel regions
        super().__init__(controls, fig, dynamic=[*self.images, *self.titles])
        start = self.values()
        for H in self.HEADS:  # one full draw per head count, now, so no change needs one later
            self._show(H, start["layer"], start["example"])
            self.redraw()
        self.update()
        self.redraw()

    def redraw(self) -> None:
        """Blit from caches: the arrangement's background, the titles' pixels, then the maps.

        A title depends only on (H, layer) and drawing text is slow (~4 ms a title), so
        each set of titles is drawn once and its pixels pasted back on later changes.
        """
        H, layer = self.shown[0], self.layer
        if self.shown in self._backgrounds:
            self.canvas.restore_region(self._backgrounds[self.shown])
        else:
            if H in self._bases:
                self.canvas.restore_region(self._bases[H])
            else:
                self.canvas.draw()  # everything but the animated maps and titles
                self._bases[H] = self.canvas.copy_from_bbox(self.fig.bbox)
            self._stamp_tokens()
            self._backgrounds[self.shown] = self.canvas.copy_from_bbox(self.fig.bbox)
        if (H, layer) in self._title_strips:
            for strip in self._title_strips[H, layer]:
                self.canvas.restore_region(strip)
        else:
            renderer = self.canvas.get_renderer()
            strips = []
            for title in self.titles[:H]:
                self.fig.draw_artist(title)
                box = title.get_window_extent(renderer).padded(2)
                strips.append(self.canvas.copy_from_bbox(box))
            self._title_strips[H, layer] = strips
        for image in self.images[:H]:
            self.fig.draw_artist(image)
        height = self.one_row_height if H <= self.NCOLS else None
        self.image.value = viz.canvas_png(self.canvas, height)

    def _arrange(self, H: int, example: int) -> None:
        """Show H axes (a row of up to four, then a second row) sized for the example."""
        T = len(self.labels[example])
        parts = zip(self.axes, self.images, self.titles, strict=True)
        for i, (ax, image, title) in enumerate(parts):
            for artist in (ax, image, title):
                artist.set_visible(i < H)
            image.set_extent((-0.5, T - 0.5, T - 0.5, -0.5))
            ax.set_xlim(-0.5, T - 0.5)
            ax.set_ylim(T - 0.5, -0.5)
        card = self.cards[H]
        width = card["config"]["d_model"] // H
        self.heading.set_text(
            f"rope-h{H}: {H} head{'s' if H > 1 else ''} of width d = {width}, "
            f"validation loss {card['val_loss']:.3f}"
        )
        self.shown = (H, example)

    def _stamp_tokens(self) -> None:
        """Token labels outside the shown grid: keys under its last row, queries on its left."""
        H, example = self.shown
        renderer = self.canvas.get_renderer()
        for i, ax in enumerate(self.axes[:H]):
            if i + self.NCOLS >= H:
                self.words.stamp(renderer, ax, "x90", self.labels[example])
            if i % self.NCOLS == 0:
                self.words.stamp(renderer, ax, "y", self.labels[example])

    def _show(self, H: int, layer: int, example: int) -> None:
        if (H, example) != self.shown:
            self._arrange(H, example)
        self.layer = layer
        self.current = self.maps[H, example][layer]  # (H, T, T)
        for i in range(H):
            self.images[i].set_data(self.current[i].numpy())
            name, score = best_detector(self.cards[H], layer, i)
            self.titles[i].set_text(f"head {i}: {name} {score:.2f}")

    def update(self) -> None:
        v = self.values()
        self._show(v["heads"], v["layer"], v["example"])


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


# ---------------------------------------------------------------- lesson 04


class PositionExplorer(Explorer):
    """Lesson 04: pick a position and a width; see its sinusoidal encoding and its similarities."""

    WIDTHS = (8, 16, 32, 64, 128)

    def __init__(self, T: int = 64):
        self.T = T
        self.encodings = {D: sinusoidal_encoding(T, D) for D in self.WIDTHS}  # D -> (T, D)
        self.readout = widgets.HTML()
        fig, (self.ax_vec, self.ax_sim) = viz.new_figure(11.0, 3.4, ncols=2)
        # x = 2i / D, the exponent that sets pair i's frequency: every width draws the same
        # two curves, wider models sample them more finely (and the axis never changes)
        (self.sin_dots,) = self.ax_vec.plot([], [], "o-", ms=4, lw=0.8, label="sin (dim 2i)")
        (self.cos_dots,) = self.ax_vec.plot([], [], "s-", ms=4, lw=0.8, label="cos (dim 2i+1)")
        self.ax_vec.set_xlim(-0.03, 1.0)
        self.ax_vec.set_ylim(-1.15, 1.15)
        self.ax_vec.set_xlabel("2i / D  (pair i; left: fast waves, right: slow)")
        self.ax_vec.set_ylabel("value")
        self.ax_vec.set_title("this position's encoding, pair by pair")
        self.ax_vec.legend(fontsize=9, loc="lower right")
        self.ax_vec.grid(True, alpha=0.3)
        (self.sim_line,) = self.ax_sim.plot(range(T), [0.0] * T, color="tab:green")
        (self.sim_mark,) = self.ax_sim.plot([0], [1.0], "o", ms=9, mfc="none", mec="red", mew=2)
        self.ax_sim.set_xlim(-0.5, T - 0.5)
        self.ax_sim.set_ylim(-1.05, 1.1)
        self.ax_sim.set_xlabel("other position")
        self.ax_sim.set_ylabel("cosine similarity")
        self.ax_sim.set_title("similarity to every position (circle: itself)")
        self.ax_sim.grid(True, alpha=0.3)
        controls = {
            "position": slider("position p", 10, 0, T - 1),
            "width": choice_slider("model width D", self.WIDTHS, 32),
        }
        super().__init__(
            controls, fig, dynamic=[self.sin_dots, self.cos_dots, self.sim_line, self.sim_mark]
        )
        self.widget.children = (*self.widget.children[:1], self.readout, *self.widget.children[1:])

    def update(self) -> None:
        p, D = self.controls["position"].value, self.controls["width"].value
        pe = self.encodings[D]  # (T, D)
        self.vector = pe[p]  # (D,)
        self.similarity = pe @ pe[p] / (D / 2)  # (T, D) @ (D,) -> (T,)
        exponents = torch.arange(0, D, 2) / D  # (D/2,): 2i / D
        self.sin_dots.set_data(exponents.numpy(), self.vector[0::2].numpy())
        self.cos_dots.set_data(exponents.numpy(), self.vector[1::2].numpy())
        self.sim_line.set_ydata(self.similarity.numpy())
        self.sim_mark.set_data([p], [self.similarity[p].item()])
        others = self.similarity.clone()
        others[p] = float("-inf")
        nearest = int(others.argmax())
        self.readout.value = (
            f"<b>position {p}, D = {D}</b>: most similar other position {nearest} "
            f"(cosine {others[nearest]:.3f}); least similar {int(self.similarity.argmin())} "
            f"(cosine {self.similarity.min():.3f})"
        )


class RopeExplorer(Explorer):
    """Lesson 04: move a query (m), a key (n) and both together (s); RoPE vs sinusoidal added.

    One fixed random query token and key token (width D = 16, head width 16). With RoPE,
    q = x_q W_q and k = x_k W_k are rotated to positions m + s and n + s; with "sinusoidal
    added", the encodings of those positions are added to x_q and x_k before W_q and W_k.
    Left: pair 0 of q and of k (faint: before any position). Right: the score q . k as a
    function of the offset m - n, key held at n + s (positions below 0 are allowed: sin
    and cos take any angle).
    """

    D = 16
    OFFSETS = torch.arange(-31, 32)  # (63,)
    MODES = (("RoPE", "rope"), ("sinusoidal added", "sinusoidal"))

    def __init__(self, seed: int = 7):  # 7: pair 0 of both q and k long enough to see
        g = torch.Generator().manual_seed(seed)
        D = self.D
        self.x_q, self.x_k = torch.randn(D, generator=g), torch.randn(D, generator=g)  # (D,) each
        self.w_q = torch.randn(D, D, generator=g) / D**0.5  # (D, d)
        self.w_k = torch.randn(D, D, generator=g) / D**0.5  # (D, d)
        self.q, self.k = self.x_q @ self.w_q, self.x_k @ self.w_k  # (D,) @ (D, d) -> (d,)
        self.readout = widgets.HTML()
        fig, (self.ax_pair, self.ax_score) = viz.new_figure(
            10.5, 4.0, ncols=2, width_ratios=[1, 1.6]
        )
        limit = self._pair_limit()
        viz.setup_pair_axes(self.ax_pair, limit)
        for vector, color in ((self.q, "tab:blue"), (self.k, "tab:orange")):  # before positions
            viz.pair_arrow(self.ax_pair, vector[:2], color=color, alpha=0.3, lw=1.5, linestyle="--")
        self.q_arrow = viz.pair_arrow(self.ax_pair, self.q[:2], color="tab:blue", lw=2.5, label="q")
        self.k_arrow = viz.pair_arrow(
            self.ax_pair, self.k[:2], color="tab:orange", lw=2.5, label="k"
        )
        self.ax_pair.legend(fontsize=9, loc="upper right")
        offsets = self.OFFSETS.numpy()
        (self.reference,) = self.ax_score.plot(
            offsets, offsets * 0.0, "--", color="0.5", lw=1.5, label="shift s = 0"
        )
        (self.curve,) = self.ax_score.plot(
            offsets, offsets * 0.0, color="tab:purple", lw=2, label="shift s now"
        )
        (self.marker,) = self.ax_score.plot([0], [0], "o", ms=10, mfc="none", mec="red", mew=2.5)
        high = self._score_limit()
        self.ax_score.set_ylim(-1.1 * high, 1.1 * high)
        self.ax_score.set_xlim(offsets[0] - 0.5, offsets[-1] + 0.5)
        self.ax_score.set_xlabel("offset m - n (query minus key position)")
        self.ax_score.set_ylabel("score q . k")
        self.ax_score.set_title("score by offset (circle: m, n now)")
        self.ax_score.legend(fontsize=9, loc="lower left")
        self.ax_score.grid(True, alpha=0.3)
        controls = {
            "m": slider("query position m", 7, 0, 31),
            "n": slider("key position n", 3, 0, 31),
            "shift": slider("shift both by s", 0, 0, 96),
            "mode": widgets.ToggleButtons(
                options=self.MODES,
                value="rope",
                description="position by",
                style={"description_width": "initial"},
            ),
        }
        super().__init__(
            controls,
            fig,
            dynamic=[self.q_arrow, self.k_arrow, self.curve, self.reference, self.marker],
        )
        self.widget.children = (*self.widget.children[:1], self.readout, *self.widget.children[1:])

    def pairs(self, mode: str, query_at: int, key_at: int):
        """Pair 0 of q and of k, (2,) each, with position put in the given way."""
        where = torch.tensor([query_at, key_at])
        if mode == "rope":
            q = apply_rope(self.q[None], where[:1])[0]  # (d,)
            k = apply_rope(self.k[None], where[1:])[0]  # (d,)
            return q[:2], k[:2]
        pe = sinusoidal_at(where, self.D)  # (2, D)
        return ((self.x_q + pe[0]) @ self.w_q)[:2], ((self.x_k + pe[1]) @ self.w_k)[:2]

    def scores(self, mode: str, m, n) -> torch.Tensor:
        """Scores q . k for query positions m and key positions n (ints or tensors)."""
        if mode == "rope":
            return rope_scores(self.q, self.k, m, n)
        return additive_scores(self.x_q, self.x_k, self.w_q, self.w_k, m, n)

    def _pair_limit(self) -> float:
        where = torch.arange(-31, 160)
        pe = sinusoidal_at(where, self.D)  # (P, D)
        q, k = (self.x_q + pe) @ self.w_q, (self.x_k + pe) @ self.w_k  # (P, d) each
        norms = torch.cat(
            [
                q[:, :2].norm(dim=-1),
                k[:, :2].norm(dim=-1),
                self.q[:2].norm()[None],
                self.k[:2].norm()[None],
            ]
        )
        return 1.15 * float(norms.max())

    def _score_limit(self) -> float:
        keys = torch.arange(0, 128).repeat_interleave(len(self.OFFSETS))  # (128 * 63,)
        queries = keys + self.OFFSETS.repeat(128)  # (128 * 63,)
        both = torch.cat(
            [self.scores("rope", queries, keys), self.scores("sinusoidal", queries, keys)]
        )
        return float(both.abs().max())

    def update(self) -> None:
        v = self.values()
        m, n, s, mode = v["m"], v["n"], v["shift"], v["mode"]
        q_pair, k_pair = self.pairs(mode, m + s, n + s)
        self.q_arrow.set_data([0, float(q_pair[0])], [0, float(q_pair[1])])
        self.k_arrow.set_data([0, float(k_pair[0])], [0, float(k_pair[1])])
        key = torch.tensor([n + s])
        self.curve_now = self.scores(mode, key + self.OFFSETS, key)  # (63,)
        self.curve_unshifted = self.scores(mode, n + self.OFFSETS, torch.tensor([n]))  # (63,)
        self.curve.set_ydata(self.curve_now.numpy())
        self.reference.set_ydata(self.curve_unshifted.numpy())
        self.score = float(self.scores(mode, m + s, n + s)[0])
        self.score_unshifted = float(self.scores(mode, m, n)[0])
        self.marker.set_data([m - n], [self.score])
        name = dict((value, label) for label, value in self.MODES)[mode]
        self.readout.value = (
            f"<b>{name}</b>: query at m + s = {m + s}, key at n + s = {n + s}, offset {m - n}: "
            f"q . k = {self.score:.4f}; unshifted (s = 0) {self.score_unshifted:.4f}; "
            f"change {self.score - self.score_unshifted:+.1e}"
        )


# ---------------------------------------------------------------- lesson 06

# short sentences that each lean on one skill, and one that needs all three
TRAINED_EXAMPLES = {
    "song (previous token)": "Dogs near the cat sing bone run bone run bone run .",
    "brackets and quotes": 'Cat with the dog sleeps ( the bird " the boys " and the girl ) .',
    "agreement past two nouns": "Girls behind the dog near the cat read the book .",
    "all three": 'Dogs near the girl sing bone run bone run [ the bird " the boys " ] .',
}
# sentences a benchmark types into the text box: the last has an unknown word
TYPED_SAMPLES = (
    "Birds with the dog eat the apple ( the cat ) .",
    "Boy near the fishes sings ball stone ball stone ball .",
    "Dogs chase the cat .",
)


def fresh_sentences(count: int, seed: int = 6) -> list[str]:
    """`count` different stretches of the toy language, 8 to 32 tokens, none of them typed
    before: what benchmarks.explorers types to time a new sentence (lesson 06)."""
    from course_lib import data

    lines = data.generate_sequences(count, data.SEQ_LEN, seed)
    return list(dict.fromkeys(" ".join(line[: 8 + (7 * i) % 25]) for i, line in enumerate(lines)))


DETECTOR_MARKERS = {"previous": ("o", "white"), "bracket": ("s", "red"), "subject": ("D", "orange")}


class TrainedHeadsExplorer(Explorer):
    """Lesson 06: where each head of a trained TinyTransformer looks, on examples or your text.

    Examples are run once at construction; a typed sentence costs one forward pass. Marks on
    the map are the (query, key) cells each detector scores: a head doing that job lights them.
    """

    MAX_T = 32

    def __init__(self, model=None, examples=None):
        from course_lib import data
        from course_lib.model import load_pretrained

        self.data = data
        self.model = load_pretrained("rope-h4") if model is None else model
        self.examples = {
            name: self._run(data.encode(text).tolist())
            for name, text in (examples or TRAINED_EXAMPLES).items()
        }
        self.typed = {}  # sentences typed so far, by ids
        first = next(iter(self.examples))
        self.current = self.examples[first]
        self.message = widgets.HTML()
        self.readout = widgets.HTML()
        cfg = self.model.config
        fig, (self.ax_map, self.ax_bars) = viz.new_figure(11.0, 4.6, ncols=2, width_ratios=[1, 1.1])
        self.image_map = self.ax_map.imshow(
            torch.zeros(2, 2).numpy(), vmin=0, vmax=1, cmap="viridis", aspect="auto"
        )
        self.row_box = Rectangle((-0.5, -0.5), 1, 1, fill=False, edgecolor="red", linewidth=2)
        self.ax_map.add_patch(self.row_box)
        self.marks = {
            name: self.ax_map.scatter([], [], s=30, marker=m, facecolors="none", edgecolors=c,
                                      linewidths=1.3, label=name)
            for name, (m, c) in DETECTOR_MARKERS.items()
        }  # fmt: skip
        self.bars = self.ax_bars.bar(range(self.MAX_T), [0.0] * self.MAX_T, color="tab:blue")
        self.ax_bars.set_ylim(0, 1)
        self.ax_bars.set_ylabel("attention weight")
        self.ax_bars.set_xlabel("key position")
        controls = {
            "example": widgets.Dropdown(
                options=list(self.examples), value=first, description="example",
                style={"description_width": "initial"},
            ),
            "sentence": widgets.Text(
                value="", placeholder="or type a sentence in the toy vocabulary, then Enter",
                description="your sentence", continuous_update=False,
                style={"description_width": "initial"}, layout={"width": "560px"},
            ),
            "layer": widgets.ToggleButtons(
                options=list(range(cfg.num_layers)), value=0, description="layer",
                style={"description_width": "initial", "button_width": "40px"},
            ),
            "head": widgets.ToggleButtons(
                options=list(range(cfg.num_heads)), value=0, description="head",
                style={"description_width": "initial", "button_width": "40px"},
            ),
            "query": slider("query position", 6, 0, self.MAX_T - 1),
        }  # fmt: skip
        # for benchmarks.explorers: every change types a sentence never seen, the slow case
        controls["sentence"].sample_values = (*fresh_sentences(40), *TYPED_SAMPLES)
        self._seen = {"example": first, "sentence": ""}
        self._shown = None
        # tick labels are stamped from pictures of the vocabulary (viz.TickStamp): drawing 64
        # words with matplotlib took most of the time of showing a new sentence
        self.words = viz.TickStamp(fig, fontsize=8)
        self.numbers = viz.TickStamp(fig)
        self._base = None  # the figure without the sentence's ticks, see _freeze_base
        self._reserve_label_room()
        super().__init__(
            controls, fig, dynamic=[self.image_map, self.row_box, *self.bars, *self.marks.values()]
        )
        self._freeze_base()
        self.widget.children = (
            self.widget.children[0], self.message, self.readout, *self.widget.children[1:]
        )  # fmt: skip

    def _run(self, ids: list[int]) -> dict:
        """Tokens, per-layer (H, T, T) weights and detector pairs of one sentence."""
        with one_thread(), torch.no_grad():
            _, weights = self.model(torch.tensor([ids]), return_weights=True)  # [(1, H, T, T)]
        tokens = self.data.to_tokens(ids)
        pairs = {
            "previous": self.data.previous_token_pairs(tokens),
            "bracket": self.data.bracket_pairs(tokens),
            "subject": self.data.subject_pairs(tokens),
        }
        return {"tokens": tokens, "weights": [w[0] for w in weights], "pairs": pairs}

    def _pick_source(self, v) -> None:
        if v["example"] != self._seen["example"]:
            self._seen["example"] = v["example"]
            self.current = self.examples[v["example"]]
            self.message.value = ""
        elif v["sentence"] != self._seen["sentence"]:
            self._seen["sentence"] = v["sentence"]
            if not v["sentence"].strip():
                return
            try:
                ids = self.data.encode(v["sentence"], max_len=self.MAX_T).tolist()
            except ValueError as err:
                text = str(err).split("; the vocabulary")[0].removeprefix("text: ")
                self.message.value = (
                    f"<span style='color:#b00'><b>Not shown:</b> {html.escape(text)}. "
                    'Use only the toy vocabulary (e.g. Dogs, near, the, cat, sing, ( ) [ ] " .)'
                    "; the picture still shows the previous sentence.</span>"
                )
                return
            key = tuple(ids)
            if key not in self.typed:  # one forward pass per new sentence
                self.typed[key] = self._run(ids)
            self.current = self.typed[key]
            self.message.value = "<i>Showing your sentence.</i>"

    def update(self) -> None:
        v = self.values()
        self._pick_source(v)
        tokens, T = self.current["tokens"], len(self.current["tokens"])
        if self._shown is not self.current:  # a new sentence: new size and labels
            self._shown = self.current
            self._set_static(self.current)
        query = min(v["query"], T - 1)
        weights = self.current["weights"][v["layer"]][v["head"]]  # (T, T)
        self.image_map.set_data(weights.numpy())
        self.row_box.set_bounds(-0.5, query - 0.5, T, 1)
        row = weights[query]  # (T,)
        for i, bar in enumerate(self.bars):
            bar.set_height(float(row[i]) if i < T else 0.0)
        top = row.topk(min(3, T))
        pairs = zip(top.values.tolist(), top.indices.tolist(), strict=True)
        listed = ", ".join(f"'{tokens[k]}' ({k}) {w:.2f}" for w, k in pairs)
        self.readout.value = (
            f"<b>layer {v['layer']}, head {v['head']}, query {query} '{tokens[query]}'</b>"
            f"{' (slider past the end: last token)' if v['query'] > query else ''} "
            f"looks most at: {listed}<br><small>marks on the map: white circles previous-token, "
            "red squares bracket, orange diamonds subject (query row, needed key column)</small>"
        )
        self.ax_map.set_title("rows: queries, columns: keys (red box: the query)", fontsize=10)
        self.ax_bars.set_title("the query's weights over the keys", fontsize=10)

    def _set_static(self, entry: dict) -> None:
        """Size and marks of a new sentence; its tick labels are stamped by the next redraw."""
        T = len(entry["tokens"])
        self.image_map.set_extent((-0.5, T - 0.5, T - 0.5, -0.5))
        self.ax_map.set_xlim(-0.5, T - 0.5)
        self.ax_map.set_ylim(T - 0.5, -0.5)
        self.ax_bars.set_xlim(-0.6, T - 0.4)
        for name, scatter in self.marks.items():
            pairs = entry["pairs"][name]
            scatter.set_offsets([(k, q) for q, k in pairs] if pairs else torch.empty(0, 2))
        self.invalidate()

    def redraw(self) -> None:
        if self._background is None and self._base is not None:
            # a new sentence: its ticks and words over the base, a few milliseconds
            self.canvas.restore_region(self._base)
            renderer = self.canvas.get_renderer()
            tokens = self.current["tokens"]
            self.words.stamp(renderer, self.ax_map, "x90", tokens)
            self.words.stamp(renderer, self.ax_map, "y", tokens)
            every = range(0, len(tokens), 5)  # key positions; the map names them
            self.numbers.stamp(renderer, self.ax_bars, "x", every, positions=every)
            self._background = self.canvas.copy_from_bbox(self.fig.bbox)
        super().redraw()

    def _reserve_label_room(self) -> None:
        """Before the layout is frozen: ticks with the widest words, so any sentence fits."""
        vocab = self.data.VOCAB
        wide_x, wide_y = self.words.widest(vocab, "x90"), self.words.widest(vocab, "y")
        self.ax_map.set_xticks(range(self.MAX_T), [wide_x] * self.MAX_T, rotation=90, fontsize=8)
        self.ax_map.set_yticks(range(self.MAX_T), [wide_y] * self.MAX_T, fontsize=8)
        self.ax_bars.set_xticks(range(0, self.MAX_T, 5))

    def _freeze_base(self) -> None:
        """Once the layout is frozen: draw everything no sentence changes, without ticks."""
        label = self.ax_bars.xaxis.label  # placed below its tick labels; keep it there
        top = label.get_transform().transform(label.get_position())[1]
        self.ax_bars.xaxis.set_label_coords(
            0.5, self.ax_bars.transAxes.inverted().transform((0, top))[1]
        )
        self.ax_map.set_xticks([])
        self.ax_map.set_yticks([])
        self.ax_bars.set_xticks([])
        self.canvas.draw()
        self._base = self.canvas.copy_from_bbox(self.fig.bbox)
        self.invalidate()
        self.redraw()


class AblationExplorer(Explorer):
    """Lesson 06: shipped checkpoints side by side: position scheme, heads, and the scale.

    Everything is computed once at construction on 100 validation sequences. The scale has
    two ablations: a checkpoint trained without 1/sqrt(d), and (unticking "as trained") any
    checkpoint's own weights run with the scale flipped, see model.flip_scale.
    """

    SETTINGS = (
        ("RoPE, 4 heads (the recipe)", "rope-h4"),
        ("sinusoidal positions, 4 heads", "sinusoidal-h4"),
        ("no positions, 4 heads", "none-h4"),
        ("RoPE, 1 head", "rope-h1"),
        ("RoPE, 2 heads", "rope-h2"),
        ("RoPE, 8 heads", "rope-h8"),
        ("RoPE, 4 heads, trained without the scale", "rope-h4-noscale"),
    )
    DETECTORS = ("previous", "bracket", "subject")

    def __init__(self, num_sequences: int = 100):
        from course_lib import data, heads, train
        from course_lib.model import flip_scale, load_pretrained

        ids = data.load_split("valid")[:num_sequences]  # (N, T)
        self.results = {}
        with one_thread():
            for _, name in self.SETTINGS:
                model = load_pretrained(name)
                for as_trained in (True, False):
                    m = model if as_trained else flip_scale(model)
                    self.results[(name, as_trained)] = {
                        "scale": m.config.scale,
                        "val_loss": train.evaluate(m, ids),
                        "scores": heads.detector_scores(m, ids),
                    }
        self.readout = widgets.HTML()
        ref = self.results[("rope-h4", True)]
        fig, (self.ax_det, self.ax_loss, self.ax_map) = viz.new_figure(
            12.0, 3.6, ncols=3, width_ratios=[1, 0.5, 1.4]
        )
        x = range(len(self.DETECTORS))
        self.det_bars = self.ax_det.bar(x, [0.0] * 3, color=["tab:blue", "tab:red", "tab:orange"])
        # references drawn after the bars (dynamic artists), so a taller bar never hides them
        ref_marks = self.ax_det.scatter(
            x, [float(ref["scores"][d].max()) for d in self.DETECTORS], marker="_", s=900,
            color="black", zorder=3,
        )  # fmt: skip
        self.ax_det.set_xticks(list(x), self.DETECTORS)
        self.ax_det.set_ylim(0, 1.05)
        self.ax_det.set_ylabel("best head's score")
        self.ax_det.set_title("detector scores (black: RoPE, 4 heads)", fontsize=10)
        losses = [r["val_loss"] for r in self.results.values()]
        (self.loss_bar,) = self.ax_loss.bar([0], [0.0], color="tab:gray")
        ref_line = self.ax_loss.axhline(
            ref["val_loss"], color="black", ls="--", label="RoPE, 4 heads"
        )
        self.ax_loss.set_ylim(1.0, max(losses) * 1.15)  # room for the legend above every bar
        self.ax_loss.set_xticks([])
        self.ax_loss.set_ylabel("validation loss (nats)")
        self.ax_loss.legend(fontsize=8, loc="upper left")
        self.ax_loss.set_title("loss", fontsize=10)
        rows = [f"{d} L{layer}" for d in self.DETECTORS for layer in range(2)]
        self.mesh = self.ax_map.imshow(torch.zeros(6, 8).numpy(), vmin=0, vmax=1, cmap="viridis",
                                       aspect="auto")  # fmt: skip
        self.ax_map.set_yticks(range(6), rows, fontsize=8)
        self.ax_map.set_xticks(range(8), [str(h) for h in range(8)])
        self.ax_map.set_xlabel("head (blank: the model has fewer)")
        self.ax_map.set_title("every head's score", fontsize=10)
        fig.colorbar(self.mesh, ax=self.ax_map)
        controls = {
            "setting": widgets.Dropdown(
                options=self.SETTINGS, value="rope-h4", description="model",
                style={"description_width": "initial"},
            ),
            "scale": widgets.Checkbox(
                value=True, description="1/sqrt(d) scale as trained (untick: flip it)",
                style={"description_width": "initial"},
            ),
        }  # fmt: skip
        super().__init__(
            controls, fig, dynamic=[*self.det_bars, ref_marks, self.loss_bar, ref_line, self.mesh]
        )
        self.widget.children = (*self.widget.children[:1], self.readout, *self.widget.children[1:])

    def update(self) -> None:
        v = self.values()
        result = self.results[(v["setting"], v["scale"])]
        best = [float(result["scores"][d].max()) for d in self.DETECTORS]
        for bar, height in zip(self.det_bars, best, strict=True):
            bar.set_height(height)
        self.loss_bar.set_height(result["val_loss"])
        table = torch.full((6, 8), float("nan"))
        for i, d in enumerate(self.DETECTORS):
            scores = result["scores"][d]  # (layers, H)
            table[2 * i : 2 * i + 2, : scores.shape[1]] = scores
        self.mesh.set_data(table.numpy())
        label = next(label for label, name in self.SETTINGS if name == v["setting"])
        flipped = "" if v["scale"] else ", same weights with the scale flipped"
        self.readout.value = (
            f"<b>{label}{flipped}: attention "
            f"{'with' if result['scale'] else 'without'} 1/sqrt(d)</b>; "
            f"validation loss {result['val_loss']:.3f}; best previous {best[0]:.2f}, "
            f"bracket {best[1]:.2f}, subject {best[2]:.2f}"
        )
