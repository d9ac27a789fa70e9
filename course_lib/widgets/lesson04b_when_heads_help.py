"""Lesson 04b's explorer: each head's attention in the one-layer models trained with 1, 2, 4
and 8 heads, and what the position before the mark reads."""

import numpy as np
import torch
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from torch import nn

from course_lib import viz
from course_lib.attention import causal_mask
from course_lib.runtime import one_thread
from course_lib.widgets.base import Explorer, choice_buttons, compare_learner, toggle_buttons
from course_lib.widgets.ticks import TickStamp

# validation rows whose first sentence is short, with three different kinds of noun at its
# end: a plain aside, a song between the nouns, and nested asides
HEADS_EXAMPLE_ROWS = (33, 16, 51)


def heads_examples(rows=HEADS_EXAMPLE_ROWS) -> list[tuple[str, torch.Tensor]]:
    """(label, ids) of the first sentence, mark included, of some validation rows of the toy
    language (lesson 04b). The label is its start and its mark: "Fish near cat ... .cdf"."""
    from course_lib import corpus, language

    valid = corpus.load_split("valid")  # (N, T)
    examples = []
    for row in rows:
        tokens = corpus.to_tokens(valid[row])
        end = next(t for t, token in enumerate(tokens) if token in language.MARKS) + 1
        label = " ".join(tokens[:3]) + " ... " + tokens[end - 1]
        examples.append((label, valid[row, :end].clone()))  # (T,)
    return examples


def attention_inputs(model, ids: torch.Tensor) -> tuple[list, list]:
    """Run a TinyTransformer on ids (T,): each layer's attention weights (1, H, T, T) and the
    input each layer's attention gets (1, T, D) (lesson 04b)."""
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
    """Lesson 04b: each head's attention in the one-layer models trained with 1, 2, 4 and 8
    heads (seed 0 of the variant table), on a sentence ending in its mark.

    The row of the position before the mark is outlined, and its last three nouns are marked
    by triangles above the maps: each head's title gives its weight on them, oldest first.
    The maps share a square-root colour scale, so low weights get colours of their own. It
    opens on 8 heads and the sentence with a song between its nouns. The heading names the
    model and its excess loss on the mark over the validation split. Every model's attention
    on every example is computed once, so a change only hands new numbers to the images.

    `HeadsExplorer(multihead=multihead)` draws the maps through the learner's lesson 04a
    multihead instead (see `weights_through`) and says in the readout whether, and how far,
    they differ from the model's own at the setting shown.
    """

    PICTURE = (
        "Attention maps of every head of a one-layer model on one sentence (rows queries, "
        "columns keys), the row before the mark outlined and its last three nouns marked"
    )
    START = {"heads": 8, "example": 1}  # the still: every head, the sentence with a song

    HEADS = (1, 2, 4, 8)
    NCOLS = 4

    def __init__(self, examples=None, *, multihead=None):
        from course_lib import corpus, mark_heads, variants

        if multihead is not None and not callable(multihead):
            raise TypeError(
                "multihead: expected your multihead function (or None for the course's "
                f"maps), got {type(multihead).__name__}"
            )
        self.multihead = multihead
        self.examples = heads_examples() if examples is None else list(examples)
        self.labels = [corpus.to_tokens(ids) for _, ids in self.examples]
        # the position before each example's mark, and its last three nouns
        self.marks = [mark_heads.mark_queries(tokens)[-1] for tokens in self.labels]
        self.cards = {H: variants.trained_card(mark_heads.variant(H), 0) for H in self.HEADS}
        self.maps = {}  # (H, example index) -> (H, T, T)
        self.layers = {}  # H -> the attention module (qkv, out, rope)
        self.inputs = {}  # (H, example index) -> what the attention gets, (1, T, D)
        self.learner = {}  # (H, example) -> (maps to draw (H, T, T), readout note)
        with one_thread(), torch.no_grad():
            for H in self.HEADS:
                model = variants.load_trained(mark_heads.variant(H), 0)
                self.layers[H] = model.blocks[0].attn
                for i, (_, ids) in enumerate(self.examples):
                    weights, (self.inputs[H, i],) = attention_inputs(model, ids)
                    self.maps[H, i] = weights[0][0]  # (H, T, T)
        T = max(len(ids) for _, ids in self.examples)
        grid = {"left": 0.08, "right": 0.9, "bottom": 0.11, "top": 0.8, "wspace": 0.15,
                "hspace": 0.55}  # fmt: skip
        fig, axes = viz.new_figure(10.5, 6.2, ncols=self.NCOLS, nrows=2, gridspec_kw=grid)
        fig.set_layout_engine("none")  # fixed places: every head count uses the same grid
        self.axes = list(axes.flat)
        norm = viz.weight_norm()  # low weights (0.05 against 0.2) get colours of their own
        self.images = [viz.draw_head_map(ax, torch.zeros(T, T), norm=norm) for ax in self.axes]
        for ax in self.axes:  # token labels are stamped per example, see _stamp_tokens
            ax.set_xticks([])
            ax.set_yticks([])
        self.titles = [ax.set_title(" ", fontsize=10, pad=14) for ax in self.axes]
        # the row before the mark, outlined, and its three nouns, marked on that row
        self.rows = [ax.add_patch(Rectangle((-0.5, -0.5), T, 1, fill=False, edgecolor="red",
                                            lw=1.5)) for ax in self.axes]  # fmt: skip
        # the nouns: triangles just above the map, over their columns, covering no cell
        self.nouns = [ax.add_line(Line2D([], [], ls="none", marker="v", ms=6, color="red",
                                         clip_on=False)) for ax in self.axes]  # fmt: skip
        top_row = self.axes[0].get_position()
        fig.colorbar(self.images[0], label="attention weight", ticks=viz.WEIGHT_TICKS,
                     cax=fig.add_axes((0.92, top_row.y0, 0.015, top_row.height)))  # fmt: skip
        self.heading = fig.suptitle(" ")
        fig.text(0.5, 0.9, "rows: the query token; columns: the key it looks at; red box: the "
                 "row before the mark; red triangles: its last three nouns\neach title: that "
                 "row's weight on the three nouns, oldest first", ha="center", va="center",
                 fontsize=10)  # fmt: skip
        # token labels drawn from cached pictures of the vocabulary (TickStamp)
        self.words = TickStamp(fig, fontsize=10, tick_length=0)
        tallest = self.words.reach(self.words.widest(corpus.VOCAB, "x90"), "x90")
        # up to four heads fill one row: the picture then ends below that row's labels
        below_row = top_row.y0 * fig.bbox.height - self.words.gap - tallest - 8
        self.one_row_height = int(fig.bbox.height - below_row)
        self.shown = None  # the (H, example) whose axes are arranged
        controls = {
            "heads": toggle_buttons(
                "heads H", [(str(H), H) for H in self.HEADS], self.START["heads"]
            ),
            "example": choice_buttons(
                "sentence",
                [(label, i) for i, (label, _) in enumerate(self.examples)],
                min(self.START["example"], len(self.examples) - 1),
            ),
        }  # fmt: skip
        self._bases = {}  # H -> the picture of H empty axes, heading and colour bar
        self._backgrounds = {}  # (H, example) -> the base with the example's tokens stamped
        self._title_strips = {}  # (H, example) -> the drawn titles, as small pixel regions
        dynamic = [*self.images, *self.titles, *self.rows, *self.nouns]
        super().__init__(controls, fig, dynamic=dynamic)
        start = self.values()
        for H in self.HEADS:  # one full draw per head count, now, so no change needs one later
            self._show(H, start["example"])
            self.redraw()
        self.update()
        self.redraw()

    def redraw(self) -> None:
        """Blit from caches: the arrangement's background, the titles' pixels, then the maps
        and their marks.

        Titles depend only on (H, example) and drawing text is slow (~4 ms a title), so each
        set of titles is drawn once and its pixels pasted back on later changes.
        """
        H = self.shown[0]
        if self.shown in self._backgrounds:
            self.canvas.restore_region(self._backgrounds[self.shown])
        else:
            if H in self._bases:
                self.canvas.restore_region(self._bases[H])
            else:
                self.canvas.draw()  # everything but the animated maps, marks and titles
                self._bases[H] = self.canvas.copy_from_bbox(self.fig.bbox)
            self._stamp_tokens()
            self._backgrounds[self.shown] = self.canvas.copy_from_bbox(self.fig.bbox)
        if self.shown in self._title_strips:
            for strip in self._title_strips[self.shown]:
                self.canvas.restore_region(strip)
        else:
            renderer = self.canvas.get_renderer()
            strips = []
            for title in self.titles[:H]:
                self.fig.draw_artist(title)
                box = title.get_window_extent(renderer).padded(2)
                strips.append(self.canvas.copy_from_bbox(box))
            self._title_strips[self.shown] = strips
        for artists in (self.images, self.rows, self.nouns):
            for artist in artists[:H]:
                self.fig.draw_artist(artist)
        height = self.one_row_height if H <= self.NCOLS else None
        self.show_picture(viz.canvas_png(self.canvas, height))

    def _arrange(self, H: int, example: int) -> None:
        """Show H axes (a row of up to four, then a second row) sized for the example."""
        T = len(self.labels[example])
        query, nouns = self.marks[example]
        parts = zip(self.axes, self.images, self.titles, self.rows, self.nouns, strict=True)
        for i, (ax, image, title, row, marks) in enumerate(parts):
            for artist in (ax, image, title, row, marks):
                artist.set_visible(i < H)
            image.set_extent((-0.5, T - 0.5, T - 0.5, -0.5))
            ax.set_xlim(-0.5, T - 0.5)
            ax.set_ylim(T - 0.5, -0.5)
            row.set_bounds(-0.5, query - 0.5, T, 1)
            marks.set_data(list(nouns), [-0.5 - 0.045 * T] * len(nouns))  # above the map
        card = self.cards[H]
        width = card["config"]["d_model"] // H
        self.heading.set_text(
            f"one layer, {H} head{'s' if H > 1 else ''} of width d = {width} (seed 0): excess "
            f"on the mark {card['excess']['valid']['mark']:.2f} nats, validation split"
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

    def weights_through(self, multihead, H: int, example: int) -> torch.Tensor:
        """Each head's attention weights (H, T, T), read through a multihead(x, qkv, out,
        num_heads, mask, rope) on the input the model's attention gets.

        q and k are the layer's own, the mask causal, rope the model's own (lesson 06). The
        values are one-hot (key s's value is unit vector s) and out is the identity, so row t
        of a head's output is its weight row for query t. A head has only d value slots, so
        keys are read d at a time.
        """
        attn = self.layers[H]
        x = self.inputs[H, example]  # (1, T, D)
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

    def _learner_maps(self, H: int, example: int):
        """(maps to draw, note): the learner's weights where their multihead runs."""
        key = (H, example)
        if key not in self.learner:
            setting = f"heads {H}, sentence '{self.examples[example][0]}'"
            with one_thread(), torch.no_grad():
                maps, note = compare_learner(
                    lambda: self.weights_through(self.multihead, H, example), (),
                    self.maps[H, example], "multihead", setting,
                )  # fmt: skip
            if note.startswith(("DIFFERS from", "Your multihead agrees")):
                note += " Compared: each head's weights, read through your multihead."
            self.learner[key] = maps, note
        return self.learner[key]

    def noun_weights(self) -> torch.Tensor:
        """(H, 3): each shown head's weight from the row before the mark on its three nouns."""
        query, nouns = self.marks[self.shown[1]]
        return self.current[:, query, list(nouns)]

    def _show(self, H: int, example: int) -> None:
        if (H, example) != self.shown:
            self._arrange(H, example)
        self.current = self.maps[H, example]  # (H, T, T)
        self.note = ""
        if self.multihead is not None:
            self.current, self.note = self._learner_maps(H, example)
        for i, weights in enumerate(self.noun_weights().tolist()):
            self.images[i].set_data(self.current[i].numpy())
            self.titles[i].set_text(f"head {i}: " + " / ".join(f"{w:.2f}" for w in weights))

    def update(self) -> None:
        v = self.values()
        self._show(v["heads"], v["example"])
        H = v["heads"]
        on_nouns = self.noun_weights()  # (H, 3)
        self.show_readout(
            f"{H} head{'s' if H > 1 else ''}, sentence '{self.examples[v['example']][0]}'",
            ": weight from the row before the mark on its last three nouns (oldest first), "
            "per head: "
            + "; ".join(" / ".join(f"{w:.2f}" for w in row) for row in on_nouns.tolist())
            + f". Most any head puts on one of them: {on_nouns.max():.2f}",
            note=self.note,
        )

    def state(self) -> dict:
        """Adds the maps shown ("maps", (H, T, T)), their titles, the heading, the tokens and
        the row before the mark with its three nouns ("mark": (query, nouns))."""
        _, example = self.shown
        shown = [image for image in self.images if image.get_visible()]
        return super().state() | {
            "maps": np.stack([np.asarray(image.get_array(), dtype=float) for image in shown]),
            "titles": [title.get_text() for title in self.titles if title.get_visible()],
            "heading": self.heading.get_text(),
            "tokens": list(self.labels[example]),
            "mark": self.marks[example],
        }
