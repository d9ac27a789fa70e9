"""Lesson 06's explorers: sinusoidal encodings and their similarities; RoPE vs added positions."""

import numpy as np
import torch

from course_lib import viz
from course_lib.position_demos import additive_scores, rope_scores, sinusoidal_at
from course_lib.positional import apply_rope, sinusoidal_encoding
from course_lib.widgets.base import (
    Explorer,
    choice_slider,
    compare_learner,
    slider,
    toggle_buttons,
)


class PositionExplorer(Explorer):
    """Pick a position and a width; see its sinusoidal encoding and its similarities (lesson 06).

    encoding: the learner's sinusoidal_encoding (lesson 06's exercise 1), or None for the
    course's only. Each width's table comes from it where it runs and has the right shape;
    the readout says whether and how far it differs from the course's at that width.
    position, width: the setting it starts at (its stored picture shows that setting).
    """

    PICTURE = (
        "Two plots: the position's sinusoidal encoding pair by pair, and its cosine "
        "similarity to every position"
    )

    WIDTHS = (8, 16, 32, 64, 128)

    def __init__(self, T: int = 64, encoding=None, *, position: int = 20, width: int = 8):
        self.T = T
        course = {D: sinusoidal_encoding(T, D) for D in self.WIDTHS}  # D -> (T, D)
        self.encodings, self.notes = {}, {}
        for D, table in course.items():  # the learner's table where it runs, with a note
            self.encodings[D], self.notes[D] = compare_learner(
                encoding, (T, D), table, "sinusoidal_encoding", f"T = {T}, D = {D}"
            )
        fig, (self.ax_vec, self.ax_sim) = viz.new_figure(11.0, 3.6, ncols=2)
        # x = 2i / D, the exponent that sets pair i's speed: every width samples the same two
        # curves, wider models more finely (and the axis never changes); dots, not lines:
        # the pairs are separate numbers
        (self.sin_dots,) = self.ax_vec.plot([], [], "o", ms=5, label="sin (dim 2i)")
        (self.cos_dots,) = self.ax_vec.plot([], [], "s", ms=5, label="cos (dim 2i+1)")
        self.ax_vec.set_xlim(-0.03, 1.0)
        self.ax_vec.set_ylim(-1.15, 1.15)
        self.ax_vec.set_xlabel("2i / D  (pair i; left: fast hands, right: slow)")
        self.ax_vec.set_ylabel("value")
        self.ax_vec.legend(fontsize=10, loc="lower right")
        self.ax_vec.grid(True, alpha=0.3)
        (self.sim_line,) = self.ax_sim.plot(range(T), [0.0] * T, color="tab:green")
        (self.sim_mark,) = self.ax_sim.plot([0], [1.0], "o", ms=9, mfc="none", mec="red", mew=2)
        self.ax_sim.set_xlim(-0.5, T - 0.5)
        # every width's similarities lie in 0..1 at these T (the smallest, D = 8, 0.01)
        self.ax_sim.set_ylim(-0.05, 1.05)
        self.ax_sim.set_xlabel("other position")
        self.ax_sim.set_ylabel("cosine similarity")
        self.ax_sim.grid(True, alpha=0.3)
        controls = {
            "position": slider("position p", position, 0, T - 1),
            "width": choice_slider("model width D", self.WIDTHS, width),
        }
        # the titles state the setting, so a static picture says what it shows
        dynamic = [self.sin_dots, self.cos_dots, self.sim_line, self.sim_mark,
                   self.ax_vec.title, self.ax_sim.title]  # fmt: skip
        super().__init__(controls, fig, dynamic=dynamic)

    def update(self) -> None:
        p, D = self.controls["position"].value, self.controls["width"].value
        pe = self.encodings[D]  # (T, D)
        self.vector = pe[p]  # (D,)
        lengths = pe.norm(dim=-1).clamp(min=1e-12)  # (T,): a learner's all-zero row stays finite
        self.similarity = pe @ pe[p] / (lengths * lengths[p])  # (T, D) @ (D,) -> (T,)
        exponents = torch.arange(0, D, 2) / D  # (D/2,): 2i / D
        self.sin_dots.set_data(exponents.numpy(), self.vector[0::2].numpy())
        self.cos_dots.set_data(exponents.numpy(), self.vector[1::2].numpy())
        self.sim_line.set_ydata(self.similarity.numpy())
        self.sim_mark.set_data([p], [self.similarity[p].item()])
        self.ax_vec.set_title(f"encoding of position {p}, D = {D}")
        self.ax_sim.set_title(f"similarity of position {p} to every position, D = {D}")
        others = self.similarity.clone()
        others[p] = float("-inf")
        nearest = int(others.argmax())
        self.show_readout(
            f"position {p}, D = {D}",
            f": most similar other position {nearest} (cosine {others[nearest]:.3f}); "
            f"least similar {int(self.similarity.argmin())} (cosine {self.similarity.min():.3f})",
            note=self.notes[D],
        )

    def state(self) -> dict:
        """Adds the position's encoding ("encoding", (D,)), its sin and cos dots by 2i / D
        ("exponents", "sin", "cos"), the similarity curve, the circle (position, cosine) and the
        two panels' titles, which state the setting."""
        exponents, sin = (np.asarray(a, dtype=float) for a in self.sin_dots.get_data())
        return super().state() | {
            "encoding": self.vector.numpy().copy(),
            "exponents": exponents.copy(),
            "sin": sin.copy(),
            "cos": np.asarray(self.cos_dots.get_ydata(), dtype=float).copy(),
            "similarity": np.asarray(self.sim_line.get_ydata(), dtype=float).copy(),
            "marker": tuple(float(x) for x in self.sim_mark.get_xydata()[0]),
            "title": self.ax_vec.get_title(),
            "similarity_title": self.ax_sim.get_title(),
        }

    def settings(self) -> dict[str, list]:
        return super().settings(position=self.every("position", 8))


class RopeExplorer(Explorer):
    """Move a query (m), a key (n) and both together (s); RoPE vs sinusoidal added (lesson 06).

    One fixed random query token and key token (width D = 16, head width 16). With RoPE,
    q = W_q x_q and k = W_k x_k are rotated to positions m + s and n + s; with "sinusoidal
    added", the encodings of those positions are added to x_q and x_k before W_q and W_k.
    Left: pair 0 of q and of k (dashed: before any position). Right: the score q . k as a
    function of the offset m - n, key held at n + s (positions below 0 are allowed: sin
    and cos take any angle): black dashed at the shift now, over a wide grey line at shift 0,
    on an axis that fits each mode's scores. m, n, shift and mode set where it starts (its
    stored picture shows that setting).

    rope: the learner's rope_heads (lesson 07a's exercise 1), or None for the course's only.
    In RoPE mode it turns q and k at positions 0 .. n + s + 31, every position the picture
    needs, in one call on a (2, T, d) float64 tensor; arrows, curves and scores come from its
    result, and the readout says whether and how far it differs from the course's. Queries
    that the curve puts before position 0 are turned by the course's formula: rope_heads
    only makes positions from 0.
    """

    PICTURE = (
        "Two plots: pair 0 of the query and key as arrows, and the score q . k against the "
        "offset m - n"
    )

    D = 16
    OFFSETS = torch.arange(-31, 32)  # (63,)
    MODES = (("RoPE", "rope"), ("sinusoidal added", "sinusoidal"))

    # seed 7: pair 0 of q and k long enough to see
    def __init__(self, seed: int = 7, rope=None, *, m=7, n=3, shift=0, mode="rope"):
        self.rope = rope
        g = torch.Generator().manual_seed(seed)
        D = self.D
        self.x_q, self.x_k = torch.randn(D, generator=g), torch.randn(D, generator=g)  # (D,) each
        self.w_q = torch.randn(D, D, generator=g) / D**0.5  # (d, D): a row per output
        self.w_k = torch.randn(D, D, generator=g) / D**0.5  # (d, D)
        self.q, self.k = self.w_q @ self.x_q, self.w_k @ self.x_k  # (d, D) @ (D,) -> (d,)
        fig, (self.ax_pair, self.ax_score) = viz.new_figure(
            10.5, 4.0, ncols=2, width_ratios=[1, 1.6]
        )
        limit = self._pair_limit()
        viz.setup_pair_axes(self.ax_pair, limit)
        q_colour, k_colour = viz.COLOURS["q"], viz.COLOURS["k"]
        # dashed: before positions; q ends in a dot, k in a square (not colour alone)
        for name, vector, color, tip in (("q", self.q, q_colour, "o"),
                                         ("k", self.k, k_colour, "s")):  # fmt: skip
            viz.pair_arrow(self.ax_pair, vector[:2], color=color, alpha=0.45, lw=1.5,
                           linestyle="--", marker=tip,
                           label=f"{name}, before positions")  # fmt: skip
        self.q_arrow = viz.pair_arrow(self.ax_pair, self.q[:2], color=q_colour, lw=2.5, label="q")
        self.k_arrow = viz.pair_arrow(
            self.ax_pair, self.k[:2], color=k_colour, lw=2.5, label="k", marker="s"
        )
        self.ax_pair.legend(fontsize=9, loc="upper right")
        offsets = self.OFFSETS.numpy()
        # shift 0 wide and pale, the shift now dashed on top: where they agree, both show
        (self.reference,) = self.ax_score.plot(
            offsets, offsets * 0.0, "-", color="0.72", lw=7, label="shift s = 0"
        )
        (self.curve,) = self.ax_score.plot(
            offsets, offsets * 0.0, "--", color="black", lw=2, label="shift s now"
        )
        (self.marker,) = self.ax_score.plot([0], [0], "o", ms=10, mfc="none", mec="red", mew=2.5)
        self.limits = {mode: self._score_limits(mode) for _, mode in self.MODES}  # (low, high)
        self.ax_score.set_xlim(offsets[0] - 0.5, offsets[-1] + 0.5)
        self.ax_score.set_xlabel("offset m - n (query minus key position)")
        self.ax_score.set_ylabel("score q . k")
        self.ax_score.legend(fontsize=10, loc="upper right", ncols=2)  # room kept above the curves
        self.ax_score.grid(True, alpha=0.3)
        controls = {
            "m": slider("query position m", m, 0, 31),
            "n": slider("key position n", n, 0, 31),
            "shift": slider("shift both by s", shift, 0, 96),
            "mode": toggle_buttons("position by", self.MODES, mode),
        }
        super().__init__(
            controls,
            fig,
            # the titles state the setting, so a static picture says what it shows: the
            # score title changes with every move, the pair title only with the mode (kept
            # background per mode, see update), so only one text is drawn per move
            dynamic=[
                *(self.q_arrow, self.k_arrow, self.reference, self.curve, self.marker),
                self.ax_score.title,
            ],
        )

    def pairs(self, mode: str, query_at: int, key_at: int):
        """Pair 0 of q and of k, (2,) each, with position put in the given way."""
        where = torch.tensor([query_at, key_at])
        if mode == "rope":
            q = apply_rope(self.q[None], where[:1])[0]  # (d,)
            k = apply_rope(self.k[None], where[1:])[0]  # (d,)
            return q[:2], k[:2]
        pe = sinusoidal_at(where, self.D)  # (2, D)
        return (self.w_q @ (self.x_q + pe[0]))[:2], (self.w_k @ (self.x_k + pe[1]))[:2]

    def scores(self, mode: str, m, n) -> torch.Tensor:
        """Scores q . k for query positions m and key positions n (ints or tensors)."""
        if mode == "rope":
            return rope_scores(self.q, self.k, m, n)
        return additive_scores(self.x_q, self.x_k, self.w_q, self.w_k, m, n)

    def _pair_limit(self) -> float:
        where = torch.arange(-31, 160)
        pe = sinusoidal_at(where, self.D)  # (P, D)
        q, k = (self.x_q + pe) @ self.w_q.T, (self.x_k + pe) @ self.w_k.T  # (P, d) each
        norms = torch.cat(
            [
                q[:, :2].norm(dim=-1),
                k[:, :2].norm(dim=-1),
                self.q[:2].norm()[None],
                self.k[:2].norm()[None],
            ]
        )
        return 1.15 * float(norms.max())

    def _score_limits(self, mode: str) -> tuple[float, float]:
        """The score axis of one mode: every score its curves can draw (keys at 0..127, every
        offset), with a margin, so that each mode's differences fill its axis."""
        keys = torch.arange(0, 128).repeat_interleave(len(self.OFFSETS))  # (128 * 63,)
        queries = keys + self.OFFSETS.repeat(128)  # (128 * 63,)
        scores = self.scores(mode, queries, keys)  # (128 * 63,)
        low, high = float(scores.min()), float(scores.max())
        return low - 0.08 * (high - low), high + 0.3 * (high - low)  # the legend sits on top

    def turned(self, length: int) -> tuple:
        """(x, course): q and k repeated at positions 0..length-1, x (2, length, d) float64,
        and the course's RoPE of it (what the learner's rope_heads is compared with)."""
        x = torch.stack((self.q, self.k)).double()[:, None, :]  # (2, 1, d)
        x = x.expand(2, length, self.D).clone()  # (2, T, d)
        return x, apply_rope(x, torch.arange(length))  # (2, T, d)

    def table_scores(self, table, m, n) -> torch.Tensor:
        """Scores table[0, m] . table[1, n] (float32) for query positions m and key positions n;
        where a position is below 0, the course's score."""
        m, n = torch.broadcast_tensors(torch.as_tensor(m).view(-1), torch.as_tensor(n).view(-1))
        course = rope_scores(self.q, self.k, m, n)  # (P,)
        q_rows, k_rows = table[0, m.clamp(min=0)], table[1, n.clamp(min=0)]  # (P, d) each
        mine = (q_rows * k_rows).sum(dim=-1).to(course.dtype)  # (P,)
        return torch.where((m >= 0) & (n >= 0), mine, course)

    def update(self) -> None:
        v = self.values()
        m, n, s, mode = v["m"], v["n"], v["shift"], v["mode"]
        key = torch.tensor([n + s])
        note = ""
        if mode == "rope" and self.rope is not None:
            x, course = self.turned(n + s + 32)  # positions 0..n+s+31 hold all that is drawn
            setting = f"m = {m}, n = {n}, shift s = {s}"
            table, note = compare_learner(self.rope, (x,), course, "rope_heads", setting)
            q_pair, k_pair = table[0, m + s, :2], table[1, n + s, :2]
            self.curve_now = self.table_scores(table, key + self.OFFSETS, key)  # (63,)
            self.curve_unshifted = self.table_scores(table, n + self.OFFSETS, n)  # (63,)
            self.score = float(self.table_scores(table, m + s, n + s)[0])
            self.score_unshifted = float(self.table_scores(table, m, n)[0])
        else:
            if self.rope is not None:
                note = "Your rope_heads draws the RoPE picture; this one adds sinusoids."
            q_pair, k_pair = self.pairs(mode, m + s, n + s)
            self.curve_now = self.scores(mode, key + self.OFFSETS, key)  # (63,)
            self.curve_unshifted = self.scores(mode, n + self.OFFSETS, torch.tensor([n]))
            self.score = float(self.scores(mode, m + s, n + s)[0])
            self.score_unshifted = float(self.scores(mode, m, n)[0])
        self.q_arrow.set_data([0, float(q_pair[0])], [0, float(q_pair[1])])
        self.k_arrow.set_data([0, float(k_pair[0])], [0, float(k_pair[1])])
        self.curve.set_ydata(self.curve_now.numpy())
        self.reference.set_ydata(self.curve_unshifted.numpy())
        self.marker.set_data([m - n], [self.score])
        name = dict((value, label) for label, value in self.MODES)[mode]
        self.ax_pair.set_title(f"{name}: pair 0 of q and k")
        self.ax_score.set_ylim(*self.limits[mode])
        self.invalidate(key=mode)  # drawn once per mode (its title and score axis), then restored
        self.ax_score.set_title(f"circle: m = {m}, n = {n}, shift s = {s}")
        self.show_readout(
            name,
            f": query at m + s = {m + s}, key at n + s = {n + s}, offset {m - n}: "
            f"q . k = {self.score:.4f}; unshifted (s = 0) {self.score_unshifted:.4f}; "
            f"change {self.score - self.score_unshifted:+.1e}",
            note=note,
        )

    def state(self) -> dict:
        """Adds pair 0 of q and of k as drawn ("q_pair", "k_pair"), the score curves over the
        offsets ("curve": shift s now, "reference": s = 0), the score now and unshifted, the
        circle (offset, score) and the two panel titles, which state the setting."""
        return super().state() | {
            "q_pair": np.asarray(self.q_arrow.get_xydata(), dtype=float)[1].copy(),
            "k_pair": np.asarray(self.k_arrow.get_xydata(), dtype=float)[1].copy(),
            "offsets": self.OFFSETS.numpy().copy(),
            "curve": np.asarray(self.curve.get_ydata(), dtype=float).copy(),
            "reference": np.asarray(self.reference.get_ydata(), dtype=float).copy(),
            "score": self.score,
            "score_unshifted": self.score_unshifted,
            "marker": tuple(float(x) for x in self.marker.get_xydata()[0]),
            "titles": (self.ax_pair.get_title(), self.ax_score.get_title()),
        }

    def settings(self) -> dict[str, list]:
        """Positions every 16th (and where they start), the shift every 48th: 96 settings."""
        return super().settings(
            m=self.every("m", 16), n=self.every("n", 16), shift=self.every("shift", 48)
        )
