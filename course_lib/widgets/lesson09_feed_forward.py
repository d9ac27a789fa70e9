"""Lesson 09's explorer: GELU against ReLU, the feed-forward layer's bend, value and slope at an
input; GELU drawn through your own feed_forward if you pass one."""

import torch
from torch import nn

from course_lib import viz
from course_lib.feedforward import activation
from course_lib.widgets.base import Explorer, compare_learner, slider


def _unit_linear() -> nn.Linear:
    """Linear(1, 1) with weight 1 and bias 0: the identity on one number."""
    layer = nn.Linear(1, 1)
    with torch.no_grad():
        layer.weight.fill_(1.0)
        layer.bias.zero_()
    return layer


def through_feed_forward(feed_forward, xs: torch.Tensor) -> torch.Tensor:
    """(2, N): GELU's value and slope at each of xs (N,), computed by a feed_forward(x, lin1,
    lin2) whose two layers are the identity on one number (D = d_ff = 1), so that what it
    computes is its bend alone; the slope by autograd through it (lesson 09)."""
    z = xs.detach().float().requires_grad_(True)  # (N,) float32, the layers' dtype
    out = feed_forward(z[:, None], _unit_linear(), _unit_linear())[:, 0]  # (N, 1) -> (N,)
    (slope,) = torch.autograd.grad(out.sum(), z)
    return torch.stack([out.detach(), slope])  # (2, N)


class ActivationExplorer(Explorer):
    """Lesson 09: GELU against ReLU, the feed-forward layer's bend: value and slope at an input.

    Left, both curves with the point at the chosen input and the tangent line through it, and
    an enlarged view of the negative side, where GELU dips below zero; right, both slopes
    (derivatives), which are what backpropagation multiplies by.

    `feed_forward`, your feed_forward(x, lin1, lin2) from the lesson's exercise, draws the GELU
    curve: run with both layers the identity on one number, it computes its bend alone, and its
    slope comes from autograd through it. The note under the readout says whether it agrees
    with torch's GELU; while it is not written yet the picture shows torch's and says so.
    """

    PICTURE = (
        "Two plots against the input x: GELU and ReLU with their tangent lines at the chosen x, "
        "and their slopes"
    )

    LIMIT = 4.0  # inputs from -LIMIT to LIMIT
    STEP = 0.01  # the curves' grid: every slider position (steps of 0.25) lies on it
    STYLES = {"GELU": "-", "ReLU": "--"}  # told apart by dash as well as colour
    ZOOM_X, ZOOM_Y = (-4.0, 0.5), (-0.25, 0.55)  # the enlarged view: GELU's dip fills a third

    def __init__(self, feed_forward=None):
        if feed_forward is not None and not callable(feed_forward):
            raise TypeError(
                "feed_forward: expected a function like feed_forward(x, lin1, lin2), got "
                f"{type(feed_forward).__name__}"
            )
        per_unit, half = round(1 / self.STEP), round(self.LIMIT / self.STEP)
        # whole numbers divided, so that 0 and every slider position are exact grid points
        self.xs = torch.arange(-half, half + 1, dtype=torch.float64) / per_unit
        self.curves = {name: torch.stack(activation(name, self.xs)) for name in self.STYLES}
        self.note, self.drawn_from = "", "torch"
        if feed_forward is not None:
            name = getattr(feed_forward, "__name__", "")
            what = name if name.isidentifier() else "feed-forward function"
            course = self.curves["GELU"]
            shown, self.note = compare_learner(
                lambda: through_feed_forward(feed_forward, self.xs), (), course, what,
                "the inputs -4 to 4 with lin1 and lin2 the identity", atol=1e-4,
            )  # fmt: skip
            if shown is not course:
                self.curves["GELU"], self.drawn_from = shown.detach().double(), "yours"
        fig, (self.ax_value, self.ax_slope) = viz.new_figure(10.0, 4.0, ncols=2)
        # GELU's dip below zero (at most 0.17 deep) is lost on an axis that reaches 4: an
        # enlarged view of the negative side sits in the value panel's empty upper left
        self.ax_zoom = self.ax_value.inset_axes([0.16, 0.5, 0.4, 0.4])
        self.points, self.tangents, self.slope_points, self.zoom_points = {}, {}, {}, {}
        for name, dash in self.STYLES.items():
            value, slope = self.curves[name]
            yours = self.drawn_from == "yours" and name == "GELU"
            label = f"{name} (your feed_forward)" if yours else name
            style = {"color": viz.COLOURS[name], "linestyle": dash, "lw": 2}
            self.ax_value.plot(self.xs, value, label=label, **style)
            self.ax_zoom.plot(self.xs, value, **style)
            self.ax_slope.plot(self.xs, slope, label=f"{name} (slope)", **style)
            marker = {"color": viz.COLOURS[name], "marker": viz.MARKERS[name], "ms": 8}
            (self.points[name],) = self.ax_value.plot([], [], linestyle="none", **marker)
            (self.zoom_points[name],) = self.ax_zoom.plot([], [], linestyle="none", **marker)
            (self.tangents[name],) = self.ax_value.plot(
                [], [], color=viz.COLOURS[name], lw=1.5, linestyle=":"
            )
            (self.slope_points[name],) = self.ax_slope.plot([], [], linestyle="none", **marker)
        self.where = self.ax_slope.axvline(
            0.0, color="grey", lw=1, linestyle=":", label="the chosen x"
        )
        self.ax_value.set_ylim(-0.5, self.LIMIT)
        self.ax_slope.set_ylim(-0.2, 1.2)
        for ax, ylabel in ((self.ax_value, "output"), (self.ax_slope, "slope d out / dx")):
            ax.set_xlim(-self.LIMIT, self.LIMIT)
            ax.set_xlabel("input x")
            ax.set_ylabel(ylabel)
            ax.axhline(0.0, color="grey", lw=0.5)
            ax.grid(True, alpha=0.3)
        # below the enlarged view, over the flat left side: clear of every curve and point
        self.ax_value.legend(loc="center left", bbox_to_anchor=(0.02, 0.33), fontsize=10)
        self.ax_slope.legend(loc="upper left", fontsize=10)
        self.ax_zoom.set_xlim(*self.ZOOM_X)
        self.ax_zoom.set_ylim(*self.ZOOM_Y)
        self.ax_zoom.axhline(0.0, color="grey", lw=0.5)
        self.ax_zoom.grid(True, alpha=0.3)
        self.ax_zoom.tick_params(labelsize=9)
        self.ax_zoom.set_title("enlarged: x from -4 to 0.5", fontsize=9)
        self.ax_slope.set_title("its slope: what the gradient is multiplied by")
        # the title names the input drawn, so a stored picture says which it shows
        self.title = self.ax_value.set_title("the activation at x = -0.5 (dotted: its tangent)")
        controls = {"x": slider("input x", -0.5, -self.LIMIT, self.LIMIT, 0.25)}
        dynamic = [*self.points.values(), *self.tangents.values(), *self.slope_points.values(),
                   *self.zoom_points.values()]  # fmt: skip
        super().__init__(controls, fig, dynamic=[*dynamic, self.where, self.title])

    def update(self) -> None:
        x0 = float(self.controls["x"].value)
        at = round((x0 + self.LIMIT) / self.STEP)  # x0's place on the curves' grid
        self.numbers = {}
        for name in self.STYLES:
            value, slope = (float(c[at]) for c in self.curves[name])
            self.numbers[name] = (value, slope)
            self.points[name].set_data([x0], [value])
            self.zoom_points[name].set_data([x0], [value])  # clipped when outside the view
            self.slope_points[name].set_data([x0], [slope])
            span = torch.tensor([x0 - 1.5, x0 + 1.5])
            self.tangents[name].set_data(span, value + slope * (span - x0))
        self.where.set_xdata([x0, x0])
        self.title.set_text(f"the activation at x = {x0:g} (dotted: its tangent)")
        (gelu, gelu_slope), (relu, relu_slope) = self.numbers["GELU"], self.numbers["ReLU"]
        self.show_readout(
            f"x = {x0:g}",
            f": GELU {gelu:.3g} (slope {gelu_slope:.3g}), ReLU {relu:.3g} (slope {relu_slope:g})",
            note=self.note,
        )

    def state(self) -> dict:
        """Adds, per activation, (value, slope) at x as computed ("numbers") and as drawn
        (the marked points' heights, "drawn"), and whose GELU the picture shows ("drawn_from":
        "yours" or "torch")."""
        drawn = {
            name: (float(self.points[name].get_ydata()[0]),
                   float(self.slope_points[name].get_ydata()[0]))
            for name in self.STYLES
        }  # fmt: skip
        return super().state() | {
            "numbers": dict(self.numbers), "drawn": drawn, "drawn_from": self.drawn_from,
        }  # fmt: skip

    def settings(self) -> dict[str, list]:
        return super().settings(x=[i / 2 for i in range(-8, 9)])
