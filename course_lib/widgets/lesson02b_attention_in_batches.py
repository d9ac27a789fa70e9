"""Lesson 02b's explorer: one query's attention weights beside the whole map.

`AttentionExplorer(attention=attention)` draws the map from the learner's own attention (the
lesson's exercise) and says in the readout where it differs from the course's.
"""

import numpy as np
import torch
from matplotlib.colors import PowerNorm
from matplotlib.patches import Rectangle

from course_lib import corpus, viz
from course_lib.attention import causal_mask, scaled_dot_product_attention
from course_lib.attention_demos import lesson_line, untrained_embedding
from course_lib.runtime import one_thread
from course_lib.toy import project_qkv
from course_lib.widgets.base import Explorer, checkbox, choice_slider, compare_learner, slider


class AttentionExplorer(Explorer):
    """Lesson 02b: pick a query token of lesson 02a's line; see its weights beside the whole
    map, from an untrained embedding (random rows) and random projections of width d
    (d_k = d_v = d).

    With `attention` (a function `attention(q, k, v, mask=None) -> (output, weights)`, the
    lesson's exercise) the picture shows that function's weights, and the readout's note says
    whether they agree with the course's at the current setting, and by how much they differ;
    the picture's title says whose weights it shows and whether they agree, so a still
    picture (a static page) carries it too.

    The map's colour scale runs from 0 to 1 as a square root: untrained weights, mostly below
    0.3, stay apart in colour, and a weight of 1 (the first row under the causal mask) is
    not clipped.
    """

    PICTURE = (
        "Attention map of the lesson's line (rows queries, columns keys, brighter is more "
        "weight) with the chosen query's weights as bars"
    )

    WIDTHS = (1, 2, 4, 8, 16, 32, 64)
    START_QUERY = 5  # the verb, 'eats'

    def __init__(self, words=None, D: int = 16, *, attention=None):
        if attention is not None and not callable(attention):
            raise TypeError(
                "attention: expected your attention function (or None for the course's), "
                f"got {type(attention).__name__}"
            )
        self.attention = attention
        self.words = lesson_line() if words is None else list(words)
        self.x = untrained_embedding(D)[corpus.encode(self.words)]  # (T, D): rows of its ids
        T = len(self.words)
        fig, (self.ax_bars, self.ax_map) = viz.new_figure(
            10.5, 4.4, ncols=2, width_ratios=[1, 1.15]
        )
        self.bars = viz.draw_weight_bars(self.ax_bars, [0.0] * T, self.words)
        viz.draw_attention(self.ax_map, torch.zeros(T, T), self.words, self.words, cbar=False)
        self.mesh = self.ax_map.collections[0]
        self.mesh.set_norm(PowerNorm(0.5, vmin=0.0, vmax=1.0))
        fig.colorbar(self.mesh, ax=self.ax_map, shrink=0.8, ticks=[0, 0.02, 0.1, 0.25, 0.5, 1],
                     label="attention weight (square-root scale)")  # fmt: skip
        self.row_box = Rectangle((0, 0), T, 1, fill=False, edgecolor="red", linewidth=2.5)
        self.ax_map.add_patch(self.row_box)
        self.ax_map.set_title("every query (rows) over every key")
        self.setting_title = fig.suptitle(" ", fontsize=11)
        controls = {
            "query": choice_slider(  # positions in order: arrow keys walk along the sentence
                "query token",
                [(f"{i}: {w}", i) for i, w in enumerate(self.words)],
                min(self.START_QUERY, T - 1),
            ),
            "width": choice_slider("width d = d_k = d_v", self.WIDTHS, 8),
            "seed": slider("projection seed", 0, 0, 9),
            "causal": checkbox("causal mask", False),
        }
        super().__init__(
            controls,
            fig,
            dynamic=[self.mesh, *self.bars, self.row_box, self.ax_bars.title, self.setting_title],
        )

    def update(self) -> None:
        v = self.values()
        row, word = v["query"], self.words[v["query"]]
        mask_said = "causal mask" if v["causal"] else "no mask"
        with one_thread():
            q, k, val = project_qkv(self.x, v["width"], seed=v["seed"])  # each (T, d)
            mask = causal_mask(len(self.words)) if v["causal"] else None
            _, course = scaled_dot_product_attention(q, k, val, mask)  # (T, T)
            weights, note = compare_learner(
                None if self.attention is None else self._learners_weights,
                (q.clone(), k.clone(), val.clone(), None if mask is None else mask.clone()),
                course,
                "attention",
                f"d = {v['width']}, seed {v['seed']}, {mask_said}",
            )
        if note.startswith("DIFFERS") and weights is not course:  # the picture shows yours
            gap = (weights[row].detach().double() - course[row].double()).abs()  # (T,)
            gap = gap.nan_to_num(float("inf")).max()
            note += f" In the row of query {row} '{word}': {gap:.3g}."
            blank = torch.isnan(weights).any(dim=-1).nonzero().flatten().tolist()  # query rows
            if blank:
                note += f" Your weights hold NaN in the rows of queries {blank} (left blank)."
        self.weights = weights.detach().float()  # (T, T)
        self.mesh.set_array(self.weights.numpy())
        for bar, height in zip(self.bars, self.weights[row].tolist(), strict=True):
            bar.set_height(height)
        self.row_box.set_y(row)
        self.ax_bars.set_title(f"weights of query {row}: '{word}'")
        if self.attention is None:
            whose = "the course's attention"
        elif weights is course:
            whose = "the course's attention (yours: see the line above the picture)"
        elif note.startswith("Your"):
            whose = "your attention, which agrees with the course's"
        else:
            whose = "your attention, which DIFFERS from the course's"
        self.setting_title.set_text(
            f"untrained embedding, random projections: d = {v['width']}, projection seed "
            f"{v['seed']}, {mask_said}\nweights of {whose}"
        )
        top = self.weights[row].topk(min(3, len(self.words)))
        pairs = zip(top.values.tolist(), top.indices.tolist(), strict=True)
        listed = ", ".join(f"'{self.words[k]}' ({k}) {w:.2f}" for w, k in pairs)
        self.show_readout(
            f"query {row} '{word}', d = {v['width']}, seed {v['seed']}, {mask_said}",
            f": looks most at {listed}",
            note=note,
        )

    def _learners_weights(self, q, k, v, mask):
        """The weights from the learner's attention(q, k, v, mask) -> (output, weights)."""
        got = self.attention(q, k, v, mask)
        return got[1] if isinstance(got, tuple | list) and len(got) == 2 else got

    def state(self) -> dict:
        """Adds the map ("weights", (T, T)), the query's bars and the outlined row."""
        T = len(self.words)
        return super().state() | {
            "weights": np.asarray(self.mesh.get_array(), dtype=float).reshape(T, T).copy(),
            "bars": [bar.get_height() for bar in self.bars],
            "outlined_row": int(self.row_box.get_y()),
            "title": self.ax_bars.get_title(),
        }

    def settings(self) -> dict[str, list]:
        """Every query and the causal switch; widths 1, 8 and 64, seeds 0-2: 216 settings."""
        return super().settings(width=[1, 8, 64], seed=[0, 1, 2])
