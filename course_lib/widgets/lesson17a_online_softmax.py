"""Lesson 17a's explorer: one query's attention taken tile by tile, the running maximum, the
running sum and the output corrected as each tile of keys arrives."""

import math

import numpy as np
import torch
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from course_lib import viz
from course_lib.tiled_attention import tile_steps
from course_lib.widgets.base import Explorer, choice_buttons, choice_slider, compare_learner, slider

# one query's scores against 12 keys: the running maximum rises in tiles 2 and 3 at tile size
# 4, and stays put in the last one
SCORES = (0.5, 1.2, -0.3, 0.8, 2.5, 0.1, -1.0, 1.9, 3.1, 0.4, 2.2, -0.5)
EARLIER, THIS, UNREAD = viz.BLUE, viz.ORANGE, "#FFFFFF"
HATCH = {"earlier": "", "this": "//", "unread": ".."}


class TileExplorer(Explorer):
    """The explorer of lesson 17a: step through the key tiles of one query's attention; see the
    running maximum m, each key's term exp(score - m), the running sum l and the output acc / l
    after each.

    The query and keys have width 1, so the scores are the keys themselves (SCORES) and the
    scale is 1; the values are three random numbers per key. The numbers are the course's
    tile_steps. With `attention`, your online_attention(q, k, v, mask, tile_size), the final
    output (the diamonds) is yours, and the note under the readout says whether it agrees with
    the course's at that setting.
    """

    PICTURE = (
        "Three bar charts after one tile of keys: the query's scores with the running maximum, "
        "each key's term exp(score - m) with the running sum, and the output so far beside "
        "the final one"
    )

    TILES = (2, 3, 4, 5, 12)
    MASKS = (("none", "none"), ("keys 0-4 hidden", "front"))

    def __init__(self, *, attention=None, seed: int = 0):
        if attention is not None and not callable(attention):
            raise TypeError(
                "attention: expected your online_attention function (or None for the course's), "
                f"got {type(attention).__name__}"
            )
        self.attention = attention
        T = len(SCORES)
        self.q = torch.ones(1, 1)  # (T_q, d): width 1, so each score is its key
        self.k = torch.tensor(SCORES).reshape(T, 1)  # (T, d)
        self.v = torch.randn(T, 3, generator=torch.Generator().manual_seed(seed))  # (T, d_v)
        self._steps = {}
        fig, (self.ax_s, self.ax_p, self.ax_o) = viz.new_figure(
            11.0, 4.4, ncols=3, width_ratios=[1.25, 1.25, 0.7]
        )
        keys = np.arange(T)
        self.score_bars = self.ax_s.bar(keys, SCORES, edgecolor="black", linewidth=0.8)
        self.max_line = self.ax_s.axhline(0.0, color="black", linestyle="--", linewidth=1.5)
        (self.hidden,) = self.ax_s.plot([], [], "x", color="black", ms=8, mew=2, linestyle="none")
        self.ax_s.set_ylim(min(SCORES) - 0.6, max(SCORES) + 0.6)
        self.ax_s.axhline(0.0, color="grey", linewidth=0.6)
        for ax in (self.ax_s, self.ax_p):
            ax.set_xticks(keys)
        self.ax_s.set_xlabel("key")
        self.ax_s.set_ylabel("score")
        self.ax_s.legend(
            handles=[
                Patch(facecolor=EARLIER, edgecolor="black", hatch=HATCH["earlier"],
                      label="read in earlier tiles"),
                Patch(facecolor=THIS, edgecolor="black", hatch=HATCH["this"], label="this tile"),
                Patch(facecolor=UNREAD, edgecolor="black", hatch=HATCH["unread"],
                      label="not read yet"),
                Line2D([], [], color="black", linestyle="--", label="running max m"),
                Line2D([], [], color="black", marker="x", linestyle="none", label="masked key"),
            ],
            loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3, fontsize=8,
        )  # fmt: skip
        self.term_bars = self.ax_p.bar(keys, np.zeros(T), edgecolor="black", linewidth=0.8)
        (self.before,) = self.ax_p.plot([], [], "_", color="black", ms=14, mew=2, linestyle="none")
        self.ax_p.set_ylim(0, 1.15)
        self.ax_p.set_xlabel("key")
        self.ax_p.set_ylabel("exp(score - m)")
        self.ax_p.legend(
            handles=[
                Patch(facecolor=EARLIER, edgecolor="black", label="earlier keys, corrected"),
                Patch(facecolor=THIS, edgecolor="black", hatch=HATCH["this"], label="this tile"),
                Line2D([], [], color="black", marker="_", ms=10, mew=2, linestyle="none",
                       label="earlier keys, before"),
            ],
            loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3, fontsize=8,
        )  # fmt: skip
        dims = np.arange(self.v.shape[1])
        self.out_bars = self.ax_o.bar(dims, np.zeros(len(dims)), color=EARLIER, label="so far")
        (self.final,) = self.ax_o.plot(
            dims, np.zeros(len(dims)), "D", color="black", linestyle="none", label="final"
        )
        top = float(self.v.abs().max()) * 1.15
        self.ax_o.set_ylim(-top, top)
        self.ax_o.axhline(0.0, color="grey", linewidth=0.6)
        self.ax_o.set_xticks(dims, [f"out[{i}]" for i in dims])
        self.ax_o.set_ylabel("output")
        self.ax_o.set_title("output acc / l")
        self.ax_o.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, fontsize=8)
        self.boundaries = []
        self.setting_title = fig.suptitle("", fontsize=11)  # the setting, in the picture too
        controls = {
            "tile": choice_slider("tile size", self.TILES, 4),
            "step": slider("after tile", 2, 1, max(math.ceil(T / t) for t in self.TILES)),
            "mask": choice_buttons("mask", self.MASKS, "none"),
        }
        super().__init__(
            controls,
            fig,
            dynamic=[
                *self.score_bars, self.max_line, self.hidden, *self.term_bars, self.before,
                *self.out_bars, self.final, self.ax_s.title, self.ax_p.title,
                self.setting_title,
            ],
        )  # fmt: skip

    def _mask(self, which: str):
        if which == "none":
            return None
        mask = torch.ones(1, len(SCORES), dtype=torch.bool)  # (T_q, T_k)
        mask[:, :5] = False
        return mask

    def steps(self, tile: int, which: str) -> list:
        """The course's TileStep after each tile, for this tile size and mask (kept)."""
        if (tile, which) not in self._steps:
            self._steps[tile, which] = list(
                tile_steps(self.q, self.k, self.v, self._mask(which), tile_size=tile)
            )
        return self._steps[tile, which]

    def _draw_boundaries(self, tile: int) -> None:
        for line in self.boundaries:
            line.remove()
        edges = [start - 0.5 for start in range(tile, len(SCORES), tile)]
        self.boundaries = [
            ax.axvline(x, color="grey", linestyle=":", linewidth=1.2)
            for ax in (self.ax_s, self.ax_p)
            for x in edges
        ]
        self.invalidate(key=tile)

    def update(self) -> None:
        values = self.values()
        tile, which = values["tile"], values["mask"]
        steps = self.steps(tile, which)
        shown = min(values["step"], len(steps))
        step, previous = steps[shown - 1], steps[shown - 2] if shown > 1 else None
        if getattr(self, "_tile_drawn", None) != tile:
            self._draw_boundaries(tile)
            self._tile_drawn = tile
        mask = self._mask(which)
        allowed = [True] * len(SCORES) if mask is None else mask[0].tolist()
        m = float(step.running_max[0])
        for j, bar in enumerate(self.score_bars):
            part = "earlier" if j < step.start else "this" if j < step.stop else "unread"
            colour = {"earlier": EARLIER, "this": THIS, "unread": UNREAD}[part]
            bar.set_height(SCORES[j] if allowed[j] else 0.0)
            bar.set_facecolor(colour)
            bar.set_hatch(HATCH[part])
        self.hidden.set_data([j for j in range(len(SCORES)) if not allowed[j]],
                             [0.0] * allowed.count(False))  # fmt: skip
        met = math.isfinite(m)
        self.max_line.set_ydata([m, m] if met else [np.nan, np.nan])
        terms = [
            math.exp(SCORES[j] - m) if met and allowed[j] and j < step.stop else 0.0
            for j in range(len(SCORES))
        ]
        for j, (bar, term) in enumerate(zip(self.term_bars, terms, strict=True)):
            bar.set_height(term)
            this = step.start <= j < step.stop
            bar.set_facecolor(THIS if this else EARLIER)
            bar.set_hatch(HATCH["this"] if this else "")
        old_m = float(previous.running_max[0]) if previous is not None else -math.inf
        before = [
            (j, math.exp(SCORES[j] - old_m))
            for j in range(step.start)
            if allowed[j] and math.isfinite(old_m)
        ]
        self.before.set_data([j for j, _ in before], [h for _, h in before])
        total = float(step.running_sum[0])
        output = step.output[0]  # (d_v,)
        for bar, height in zip(self.out_bars, output.tolist(), strict=True):
            bar.set_height(height)
        last = steps[-1].output[0]  # (d_v,) the course's final output
        label = next(name for name, key in self.MASKS if key == which)
        shown, note = last, ""
        if self.attention is not None:  # the diamonds show yours when it runs
            args = (self.q.clone(), self.k.clone(), self.v.clone(),
                    None if mask is None else mask.clone(), tile)  # fmt: skip
            drawn, note = compare_learner(self.attention, args, last[None], "online_attention",
                                          f"tile size {tile}, mask {label}")  # fmt: skip
            shown = drawn.detach()[0].float()
            if note.startswith("DIFFERS"):
                note = note.replace("The picture shows yours.", "The diamonds show yours.")
        self.final.set_ydata(shown.tolist())
        self.ax_s.set_title(f"scores; running max m = {m:.2f}" if met else "scores; m = -inf")
        self.ax_p.set_title(f"running sum l = {total:.3f}")
        self._readout_for(values, steps, step, old_m, label, note)

    def _readout_for(self, values, steps, step, old_m, label, note) -> None:
        tile, n = values["tile"], len(steps)
        shown = min(values["step"], n)
        lead = (
            f"tile size {tile}, mask {label}: after tile {shown} of {n} "
            f"(keys {step.start}-{step.stop - 1})"
        )
        m = float(step.running_max[0])
        if not math.isfinite(m):
            rest = ": no key the query may see has been read yet, so m = -inf, l = 0, no output"
        else:
            fix = float(step.rescale[0])
            was = (
                f"was {old_m:.2f}: earlier terms x {fix:.3f}"
                if math.isfinite(old_m)
                else "the first keys the query may see"
            )
            out = ", ".join(f"{x:.2f}" for x in step.output[0].tolist())
            rest = f": m = {m:.2f} ({was}), l = {float(step.running_sum[0]):.3f}, output ({out})"
        notes = []
        if values["step"] > n:
            notes.append(
                f"Tile size {tile} makes {n} tile{'s' if n > 1 else ''}: step "
                f"{values['step']} shows the last."
            )
        if note:
            notes.append(note)
        self.setting_title.set_text(lead)
        self.show_readout(lead, rest, note=" ".join(notes))

    def state(self) -> dict:
        """Adds the bars of each panel, the running max drawn and the final output."""
        return super().state() | {
            "scores": [bar.get_height() for bar in self.score_bars],
            "hatches": [bar.get_hatch() or "" for bar in self.score_bars],
            "terms": [bar.get_height() for bar in self.term_bars],
            "before": [float(y) for y in self.before.get_ydata()],
            "running_max": float(self.max_line.get_ydata()[0]),
            "output": [bar.get_height() for bar in self.out_bars],
            "final": [float(y) for y in self.final.get_ydata()],
            "titles": [self.ax_s.get_title(), self.ax_p.get_title()],
            "setting": self.setting_title.get_text(),
        }
