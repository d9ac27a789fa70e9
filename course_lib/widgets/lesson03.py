"""Lesson 03's explorer: each head's attention in the trained rope-h1 / h2 / h4 / h8 models."""

import numpy as np
import torch
from torch import nn

from course_lib import viz
from course_lib.attention import causal_mask
from course_lib.runtime import one_thread
from course_lib.widgets.base import Explorer, choice_buttons, compare_learner, toggle_buttons
from course_lib.widgets.ticks import TickStamp

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


def attention_inputs(model, ids: torch.Tensor) -> tuple[list, list]:
    """Run a TinyTransformer on ids (T,): each layer's attention weights (1, H, T, T) and the
    input each layer's attention gets, after its norm (1, T, D) (lesson 03)."""
    seen = []
    hooks = [block.attn.register_forward_pre_hook(lambda _, args: seen.append(args[0]))
             for block in model.blocks]  # fmt: skip
    try:
        _, weights = model(ids[None], return_weights=True)  # per layer (1, H, T, T)
    finally:
        for hook in hooks:
            hook.remove()
    return weights, seen


class HeadsExplorer(Explorer):
    """Lesson 03: each head's attention in the trained rope-h1 / h2 / h4 / h8 models.

    Every model's attention on every example is computed here, once (a few ms each), so a
    change only hands new numbers to the images. Titles carry each head's best detector
    score from the model's card; the heading carries its validation loss. Up to four heads
    fill one row, and the picture then stops below it.

    `HeadsExplorer(multihead=multihead)` draws the maps through the learner's lesson 03
    multihead instead (see `weights_through`) and says in the readout whether, and how far,
    they differ from the model's own at the setting shown.
    """

    PICTURE = (
        "Attention maps of every head of one layer of the trained model on one sentence (rows"
        " queries, columns keys)"
    )

    HEADS = (1, 2, 4, 8)
    NCOLS = 4

    def __init__(self, examples=None, *, multihead=None):
        from course_lib import data
        from course_lib.model import load_card, load_pretrained

        if multihead is not None and not callable(multihead):
            raise TypeError(
                "multihead: expected your multihead function (or None for the course's "
                f"maps), got {type(multihead).__name__}"
            )
        self.multihead = multihead
        self.examples = heads_examples() if examples is None else list(examples)
        self.cards = {H: load_card(f"rope-h{H}") for H in self.HEADS}
        self.maps = {}  # (H, example index) -> (layers, H, T, T)
        self.layers = {}  # H -> each layer's attention module (qkv, out, rope)
        self.inputs = {}  # (H, example index) -> what each layer's attention gets, (1, T, D)
        self.learner = {}  # (H, example, layer) -> (maps to draw (H, T, T), readout note)
        with one_thread(), torch.no_grad():
            for H in self.HEADS:
                model = load_pretrained(f"rope-h{H}")
                self.layers[H] = [block.attn for block in model.blocks]
                for i, (_, ids) in enumerate(self.examples):
                    weights, self.inputs[H, i] = attention_inputs(model, ids)
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
        # token labels drawn from cached pictures of the vocabulary (TickStamp)
        self.words = TickStamp(fig, fontsize=8, tick_length=0)
        tallest = self.words.reach(self.words.widest(data.VOCAB, "x90"), "x90")
        # up to four heads fill one row: the picture then ends below that row's labels
        below_row = top_row.y0 * fig.bbox.height - self.words.gap - tallest - 8
        self.one_row_height = int(fig.bbox.height - below_row)
        self.shown = None  # the (H, example) whose axes are arranged
        controls = {
            "heads": toggle_buttons("heads H", [(str(H), H) for H in self.HEADS], 4),
            "layer": toggle_buttons("layer", [(str(i), i) for i in range(num_layers)], 0),
            "example": choice_buttons(
                "sentence", [(label, i) for i, (label, _) in enumerate(self.examples)], 0
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
        self.show_picture(viz.canvas_png(self.canvas, height))

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

    def weights_through(self, multihead, H: int, example: int, layer: int) -> torch.Tensor:
        """Each head's attention weights (H, T, T) in one layer, read through a multihead(x,
        qkv, out, num_heads, mask, rope) on the input that layer's attention gets.

        q and k are the layer's own, the mask causal, rope the model's RoPE. The values are
        one-hot (key s's value is unit vector s) and out is the identity, so row t of a head's
        output is its weight row for query t. A head has only d value slots, so keys are read
        d at a time.
        """
        attn = self.layers[H][layer]
        x = self.inputs[H, example][layer]  # (1, T, D)
        T, D = x.shape[1], x.shape[2]
        d = D // H
        queries_keys = attn.qkv(x)[..., : 2 * D]  # (1, T, 2D): [q | k] of the trained layer
        columns = []
        for start in range(0, T, d):
            width = min(d, T - start)
            one_hot = torch.zeros(T, d)  # key start + j -> slot j
            one_hot[start : start + width, :width] = torch.eye(width)
            values = one_hot.repeat(1, H)[None]  # (1, T, D): the same slots in every head
            y = multihead(x, lambda _, v=values: torch.cat([queries_keys, v], dim=-1),
                          nn.Identity(), H, causal_mask(T), attn.rope)  # fmt: skip
            if not isinstance(y, torch.Tensor) or tuple(y.shape) != (1, T, D):
                got = tuple(y.shape) if isinstance(y, torch.Tensor) else type(y).__name__
                raise ValueError(f"expected one tensor of shape (1, {T}, {D}), it returned {got}")
            columns.append(y[0].reshape(T, H, d).transpose(0, 1)[..., :width])  # (H, T, width)
        return torch.cat(columns, dim=-1)  # (H, T, T)

    def _learner_maps(self, H: int, example: int, layer: int):
        """(maps to draw, note): the learner's weights where their multihead runs."""
        key = (H, example, layer)
        if key not in self.learner:
            label = self.examples[example][0]
            setting = f"heads {H}, layer {layer}, sentence '{label}'"
            with one_thread(), torch.no_grad():
                maps, note = compare_learner(
                    lambda: self.weights_through(self.multihead, H, example, layer), (),
                    self.maps[H, example][layer], "multihead", setting,
                )  # fmt: skip
            if note.startswith(("DIFFERS from", "Your multihead agrees")):
                note += " Compared: each head's weights, read through your multihead."
            self.learner[key] = maps, note
        return self.learner[key]

    def _show(self, H: int, layer: int, example: int) -> None:
        if (H, example) != self.shown:
            self._arrange(H, example)
        self.layer = layer
        self.current = self.maps[H, example][layer]  # (H, T, T)
        self.note = ""
        if self.multihead is not None:
            self.current, self.note = self._learner_maps(H, example, layer)
        for i in range(H):
            self.images[i].set_data(self.current[i].numpy())
            name, score = best_detector(self.cards[H], layer, i)
            self.titles[i].set_text(f"head {i}: {name} {score:.2f}")

    def update(self) -> None:
        v = self.values()
        self._show(v["heads"], v["layer"], v["example"])
        H, layer = v["heads"], v["layer"]
        head, name, score = max(
            ((i, *best_detector(self.cards[H], layer, i)) for i in range(H)), key=lambda t: t[2]
        )
        sharpness = self.current.amax(-1).mean(-1)  # (H,): each head's largest weight per query
        self.show_readout(
            f"{H} head{'s' if H > 1 else ''}, layer {layer}",
            f": strongest detector in this layer {name} {score:.2f} (head {head}); each head's "
            "largest weight per query, on average: "
            + ", ".join(f"{x:.2f}" for x in sharpness.tolist()),
            note=self.note,
        )

    def state(self) -> dict:
        """Adds the maps shown ("maps", (H, T, T)), their titles, the heading and the tokens."""
        _, example = self.shown
        shown = [image for image in self.images if image.get_visible()]
        return super().state() | {
            "maps": np.stack([np.asarray(image.get_array(), dtype=float) for image in shown]),
            "titles": [title.get_text() for title in self.titles if title.get_visible()],
            "heading": self.heading.get_text(),
            "tokens": list(self.labels[example]),
        }
