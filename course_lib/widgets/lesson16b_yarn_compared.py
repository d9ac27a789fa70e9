"""Lesson 16b's explorer: a scaling method and factor, each RoPE pair's angle against position,
and the measured excess loss by position of the three shipped models."""

import torch
from matplotlib.figure import Figure

from course_lib import rope_scaling as rs
from course_lib.exercises.stub import attempt
from course_lib.viz.lesson16a_interpolation_and_ntk import METHOD_STYLES, draw_excess
from course_lib.viz.lesson16b_yarn_compared import draw_angles
from course_lib.viz.style import DPI
from course_lib.widgets.base import Explorer, choice_buttons, choice_slider

D_HEAD, MAX_LEN = 16, 128  # the shipped models' head width and longest sequence
LABELS = {"position interpolation": "pi", "NTK-aware": "ntk", "YaRN": "yarn"}


class RopeScalingExplorer(Explorer):
    """The explorer of lesson 16b. Method and factor s: left, pair i's angle p theta'_i against p
    (trained positions shaded, each pair's largest trained angle as a thin line); right, the excess
    loss by position, the mean of the three shipped models, against the unscaled one. The angles
    come from your pi_angles, ntk_frequencies and yarn_frequencies where they run, the losses from
    the stored grid (data/rope_scaling.json)."""

    PICTURE = "Angles of each RoPE pair against position, and excess loss by position"

    def __init__(self, *, pi_angles=None, ntk_frequencies=None, yarn_frequencies=None,
                 grid=None):  # fmt: skip
        self.grid = rs.load_grid() if grid is None else grid
        self.yours = {"pi": pi_angles, "ntk": ntk_frequencies, "yarn": yarn_frequencies}
        factors = [float(f) for f in self.grid["factors"]]
        controls = {
            "method": choice_buttons("method", list(LABELS), "NTK-aware"),
            "factor": choice_slider("factor s", [(f"{f:g}", f) for f in factors], 4.0),
        }
        self.trained = rs.angles_of(rs.frequencies(D_HEAD), MAX_LEN)
        self.fig = Figure(figsize=(11.0, 4.2), dpi=DPI, layout="constrained")  # 880 px
        left, right = self.fig.subplots(1, 2)
        self.angle_lines = draw_angles(left, self.trained, self.trained, rs.TRAINED_LEN)
        left.set_ylim(1e-5, 1000)
        left.set_title("each pair's angle: pair 0 on top, pair 7 at the bottom")
        seeds = self.grid["runs"]
        self.unscaled = torch.stack([rs.grid_excess(self.grid, int(s), "none", 1) for s in seeds])
        curves = {"as trained": self.unscaled.mean(0), "NTK-aware": self.unscaled.mean(0)}
        lines = draw_excess(right, curves, rs.TRAINED_LEN)
        self.excess_line = lines.pop("NTK-aware")
        top = max(float(self._mean(m, f).max()) for m in LABELS.values() for f in factors)
        right.set_ylim(-0.2, top * 1.05)
        self.legend = right.get_legend()
        right.set_title("excess loss by position, mean of 3 seeds")
        self.source, self.past = "", {}
        super().__init__(controls, self.fig, dynamic=[*self.angle_lines, self.excess_line,
                                                      self.legend])  # fmt: skip

    def _mean(self, method, factor):
        runs = [rs.grid_excess(self.grid, int(s), method, factor) for s in self.grid["runs"]]
        return torch.stack(runs).mean(0)

    def _angles(self, method: str, factor: float) -> tuple[torch.Tensor, str]:
        """The (MAX_LEN, d/2) angle table of method at factor: yours where it runs."""
        positions = torch.arange(MAX_LEN)
        course = rs.angles_of(rs.scaled_frequencies(method, factor, D_HEAD), MAX_LEN)

        def call(fn):
            if method == "pi":
                return fn(positions, D_HEAD, factor)
            if method == "ntk":
                return rs.angles_of(fn(D_HEAD, factor), MAX_LEN)
            return rs.angles_of(fn(D_HEAD, factor, rs.TRAINED_LEN), MAX_LEN)

        name = {"pi": "pi_angles", "ntk": "ntk_frequencies", "yarn": "yarn_frequencies"}[method]
        fn = self.yours[method]
        if fn is None:
            return course, "the course's angles"
        tried = attempt(name, call, fn)
        if not tried.ran or not isinstance(tried.value, torch.Tensor) or \
                tuple(tried.value.shape) != tuple(course.shape):  # fmt: skip
            return (
                course,
                f"the course's angles ({name}: {tried.reason if not tried.ran else 'wrong shape'})",
            )
        return tried.value.double(), f"your {name}"

    def update(self) -> None:
        label, factor = self.controls["method"].value, float(self.controls["factor"].value)
        method = LABELS[label]
        angles, self.source = self._angles(method, factor)
        for i, line in enumerate(self.angle_lines):
            line.set_ydata(angles[1:, i].clamp(min=1e-12).numpy())
        excess = self._mean(method, factor)
        self.excess_line.set_ydata(excess.numpy())
        style = METHOD_STYLES[label]
        self.excess_line.set_color(style["color"])
        self.excess_line.set_linestyle(style["linestyle"])
        named = f"{label}, s = {factor:g}"  # the legend names the factor, not only the method
        self.excess_line.set_label(named)
        handle = self.legend.legend_handles[1]
        handle.set_color(style["color"])
        handle.set_linestyle(style["linestyle"])
        self.legend.get_texts()[1].set_text(named)
        said = rs.summary(excess)
        base = rs.summary(self.unscaled.mean(0))
        self.past = rs.past_trained(angles, MAX_LEN - 2)  # the longest distance a line predicts
        new = ", ".join(f"{i} ({r:.2f}x)" for i, r in self.past.items()) or "none"
        self.show_readout(
            f"{label}, s = {factor:g}: ",
            f"excess inside the trained length {said['inside']:.2f} nats (as trained "
            f"{base['inside']:.2f}), positions 32-63 {said['to 2L']:.2f} ({base['to 2L']:.2f}), "
            f"64-126 {said['beyond 2L']:.2f} ({base['beyond 2L']:.2f}). Pairs past their "
            f"largest trained angle at distance {MAX_LEN - 2}: {new}",
            f"Angles: {self.source}. Losses: the stored grid, mean of the three shipped models.",
        )

    def state(self) -> dict:
        label, factor = self.controls["method"].value, float(self.controls["factor"].value)
        return {
            **super().state(),
            "angles": [line.get_ydata().tolist() for line in self.angle_lines],
            "excess": self.excess_line.get_ydata().tolist(),
            "source": self.source,
            "past": {str(pair): times for pair, times in self.past.items()},  # JSON keys
            "summary": rs.summary(self._mean(LABELS[label], factor)),
        }
