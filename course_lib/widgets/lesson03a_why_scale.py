"""Lesson 03a_why_scale's explorer: grow d_k with and without the 1/sqrt(d_k) scale."""

import numpy as np
import torch

from course_lib import viz
from course_lib.exercises.lesson03a_why_scale import softmax_jacobian_reference
from course_lib.saturation import random_scores, softmax_entropy, typical_jacobian_norm
from course_lib.widgets.base import Explorer, checkbox, choice_slider, compare_learner


def _setting(d_k: int, scale: bool) -> str:
    return f"d_k = {d_k}, {'scaled by 1/sqrt(d_k)' if scale else 'unscaled'}"


class ScalingExplorer(Explorer):
    """Lesson 03a_why_scale: grow d_k with and without the 1/sqrt(d_k) scale; watch the softmax
    saturate and its Jacobian vanish. The Jacobian at the current setting is your
    softmax_jacobian's, where you pass it and it runs."""

    PICTURE = (
        "Three panels: one attention map, a histogram of the scores the softmax sees, and the"
        " typical size of the softmax's Jacobian against d_k with and without the scale"
    )

    D_KS = tuple(2**i for i in range(11))  # 1 .. 1024
    BINS = 32  # histogram bars across +-4 standard deviations of the scores the softmax sees

    def __init__(self, softmax_jacobian=None, T: int = 8, n: int = 256):
        self.T, self.n = T, n
        self.yours = softmax_jacobian
        # every setting's scores made once: a slider step then only reads them
        self._scores = {
            (d, scale): random_scores(d, scale=scale, n=n, T=T, seed=d)
            for d in self.D_KS
            for scale in (True, False)
        }
        # both curves are the course's Jacobian (autograd's); the circle is yours where it runs
        self.curves = {
            scale: [
                typical_jacobian_norm(self.scores(d, scale), softmax_jacobian_reference)
                for d in self.D_KS
            ]
            for scale in (True, False)
        }
        fig, (self.ax_map, self.ax_hist, self.ax_grad) = viz.new_figure(11.0, 4.2, ncols=3)
        # a wider gap between panels, so the colour bar's label and the histogram's y label
        # read as two labels, not one
        fig.get_layout_engine().set(wspace=0.08)
        self.title = fig.suptitle(_setting(64, True), fontsize=12)
        labels = [f"{i}" for i in range(T)]
        viz.draw_attention(self.ax_map, torch.zeros(T, T), labels, labels)
        self.mesh = self.ax_map.collections[0]
        # where unit-variance scores (the scaled ones) fall: narrow once the axis is wide
        self.ax_hist.axvspan(-2, 2, color="0.85", label="±2: most unit-variance scores")
        self.steps = self.ax_hist.stairs(
            [0.0] * self.BINS, self.edges(64, True).tolist(), fill=True, color=viz.PALETTE[0]
        )
        self.ax_hist.set_ylim(0, 0.16)
        self.ax_hist.legend(loc="upper right", fontsize=8)
        self.ax_hist.set_xlabel("score fed to the softmax (axis: ±4 std)")
        self.ax_hist.set_ylabel("share of scores")
        self.lines = {}
        for scale, label in ((True, "scaled"), (False, "unscaled")):
            style = {"marker": viz.MARKERS[label], "color": viz.COLOURS[label], "label": label}
            (self.lines[scale],) = self.ax_grad.plot(self.D_KS, self.curves[scale], ms=3, **style)
        self.ax_grad.set_xscale("log", base=2)
        self.ax_grad.set_yscale("log")
        (self.marker,) = self.ax_grad.plot([1], [1], "o", ms=12, mfc="none", mec="red", mew=2.5)
        self.ax_grad.set_xlabel("d_k")
        self.ax_grad.set_ylabel("typical size of the Jacobian\n(median over rows)")
        self.ax_grad.legend(loc="lower left")
        self.ax_grad.grid(True, alpha=0.3)
        self.ax_map.set_title("weights of one sample")
        self.ax_hist.set_title("every score the softmax sees")
        self.ax_grad.set_title("softmax Jacobian (circle: now)")
        controls = {
            "d_k": choice_slider("d_k", self.D_KS, 64),
            "scale": checkbox("scale by 1/sqrt(d_k)", True),
        }
        super().__init__(
            controls,
            fig,
            dynamic=[self.mesh, self.steps, *self.lines.values(), self.marker, self.title],
        )

    def scores(self, d_k: int, scale: bool) -> torch.Tensor:
        """(n, T, T) scores of the explorer's n random problems at this setting: with n = 256,
        the lesson's Jacobian table's (seed d_k)."""
        return self._scores[d_k, scale]

    def update(self) -> None:
        d_k, scale = self.controls["d_k"].value, self.controls["scale"].value
        scores = self.scores(d_k, scale)
        weights = torch.softmax(scores, dim=-1)  # (n, T, T)
        setting = _setting(d_k, scale)
        course = softmax_jacobian_reference(scores)  # (n, T, T, T)
        jacobian, note = compare_learner(self.yours, (scores,), course, "softmax_jacobian",
                                         setting)  # fmt: skip
        self.jacobian_norm = typical_jacobian_norm(scores, lambda _: jacobian)
        self.mesh.set_array(weights[0].numpy())
        edges = self.edges(d_k, scale)
        low, high = edges[0].item(), edges[-1].item()
        # scores beyond 4 std (a few in a thousand) are counted in the end bars
        counts = torch.histc(scores.clamp(low, high), bins=self.BINS, min=low, max=high)
        self.steps.set_data(values=(counts / counts.sum()).tolist(), edges=edges.tolist())
        if self.ax_hist.get_xlim() != (low, high):
            self.ax_hist.set_xlim(low, high)
            self.invalidate(key=(low, high))  # the tick labels move; each range drawn once
        for key, line in self.lines.items():
            line.set_linewidth(3.0 if key == scale else 1.0)
            line.set_alpha(1.0 if key == scale else 0.35)
        self.marker.set_data([d_k], [max(self.jacobian_norm, 1e-30)])
        self.title.set_text(setting)
        self.largest = weights.amax(-1).mean().item()
        self.show_readout(
            setting,
            f": largest weight {self.largest:.2f}, "
            f"entropy {softmax_entropy(weights).mean():.2f} nats, "
            f"score std {scores.std():.1f}, typical Jacobian size {self.jacobian_norm:.2g}",
            note,
        )

    def edges(self, d_k: int, scale: bool) -> torch.Tensor:
        """Bin edges over +-4 standard deviations of the scores: sqrt(d_k) unscaled, 1 scaled."""
        spread = 4.0 if scale else 4.0 * d_k**0.5
        return torch.linspace(-spread, spread, self.BINS + 1)

    def state(self) -> dict:
        """Adds one sample's map ("weights", (T, T)), the histogram's bar heights and edges,
        the marker (d_k, Jacobian size), both curves over d_k, which one is drawn bold, the
        largest weight per query averaged over every sample, and the figure's title."""
        T = self.T
        thick = max(self.lines, key=lambda key: self.lines[key].get_linewidth())
        return super().state() | {
            "weights": np.asarray(self.mesh.get_array(), dtype=float).reshape(T, T).copy(),
            "histogram": np.asarray(self.steps.get_data().values, dtype=float).copy(),
            "edges": np.asarray(self.steps.get_data().edges, dtype=float).copy(),
            "marker": tuple(float(x) for x in self.marker.get_xydata()[0]),
            "curves": {
                "d_k": list(self.D_KS),
                "scaled": [float(y) for y in self.lines[True].get_ydata()],
                "unscaled": [float(y) for y in self.lines[False].get_ydata()],
            },
            "bold": "scaled" if thick else "unscaled",
            "largest_weight": self.largest,
            "title": self.title.get_text(),
        }
