"""Lesson 08's explorer: stack 1 to 48 blocks and watch the gradient reaching each layer
(through your own block function if you pass one)."""

import numpy as np
import torch

from course_lib import viz
from course_lib.deep_stack import (
    StackProfile,
    activation_scales,
    build_stack,
    gradient_reaching,
    run_stack,
    stack_inputs,
)
from course_lib.exercises.stub import Attempt, attempt
from course_lib.runtime import one_thread
from course_lib.widgets.base import (
    Explorer,
    checkbox,
    choice_buttons,
    compare_learner,
    slider,
    toggle_buttons,
)


class BlockExplorer(Explorer):
    """Lesson 08: stack 1 to 48 blocks; watch the gradient reaching each layer, live.

    Each change runs a real backward pass through the stack. The forward passes are run
    here, once, through twelve stacks of 48 blocks (3 norms x pre/post x residual on/off,
    one seed, so the same weights in all twelve), keeping autograd's record: depth d is
    the first d blocks of a 48-block forward pass, so a change needs only the backward
    pass from block d down. The stack is tiny (D = 16, 2 heads, 2 sequences of 8 tokens).

    `block`, your prenorm_block(x, attn, ff, norm1, norm2) from the lesson's exercise, draws
    the pre-norm settings with residuals on: the stack then runs through your function, with
    the course's blocks' parts, and the note under the readout says whether and how far your
    output differs from the course's block at that setting. Your function runs here too, once
    per norm, 48 blocks each; the other settings show the course's blocks.
    """

    PICTURE = (
        "Two log-scale plots against block: the gradient reaching each block, and the size "
        "(RMS) of each block's output"
    )

    MAX_DEPTH = 48
    NORMS = (("layer norm", "layer"), ("batch norm", "batch"), ("no norm", "none"))
    # every setting looks different even where the numbers barely move (depth 1): colour and
    # marker = norm (as in viz.depth_profile_figure), solid / dashed = residual on / off,
    # filled / hollow markers = pre / post-norm
    STYLES = {norm: (viz.COLOURS[label], viz.MARKERS[label]) for label, norm in NORMS}

    def __init__(
        self, D: int = 16, heads: int = 2, B: int = 2, T: int = 8, seed: int = 0, block=None
    ):
        if block is not None and not callable(block):
            raise TypeError(
                f"block: expected a function like prenorm_block, got {type(block).__name__}"
            )
        # (B, T, D) each: the input, and the gradient fed in at the top (the lesson's own)
        self.x, self.probe = stack_inputs(seed, B, T, D)
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
            self.block = block
            name = getattr(block, "__name__", "")  # a lambda's is "<lambda>"
            self.block_name = name if name.isidentifier() else "block function"
            # norm -> [x, h_1, ..., h_48] through your block function, or the error it raised
            self.yours = {} if block is None else {n: self._run_yours(n) for _, n in self.NORMS}
        fig, (self.ax_grad, self.ax_scale) = viz.new_figure(11.0, 4.2, ncols=2)
        viz.setup_depth_axes(self.ax_grad, self.ax_scale, self.MAX_DEPTH)
        self.artists = {}
        for name, ax in (("grad", self.ax_grad), ("scale", self.ax_scale)):
            (line,) = ax.plot([], [], "o-", ms=4)
            # triangles take the line's colour in update(), as in viz.depth_profile_figure
            (below,) = ax.plot([], [], "v", ms=8)
            (above,) = ax.plot([], [], "^", ms=8)
            self.artists[name] = (line, below, above)
        # the legend names the setting drawn (its text and its line's look change with it), so
        # a stored picture says what it shows
        line = self.artists["grad"][0]
        pinned = self.ax_grad.plot([], [], "v", ms=8, color="0.4")[0]
        self.legend = fig.legend(
            [line, pinned], ["the setting drawn", "beyond the axis, pinned to its edge"],
            loc="outside lower center", ncols=2, fontsize=10,
        )  # fmt: skip
        controls = {
            "depth": slider("depth (blocks)", 24, 1, self.MAX_DEPTH),
            "residual": checkbox("residual (x + ...)", True),
            "norm": choice_buttons("norm", self.NORMS, "layer"),
            "prenorm": toggle_buttons(
                "norm placement", (("pre-norm", True), ("post-norm", False)), True
            ),
        }
        dynamic = [artist for group in self.artists.values() for artist in group]
        super().__init__(controls, fig, dynamic=[*dynamic, self.legend])

    def _run_yours(self, norm: str):
        """[x, h_1, ..., h_48]: the pre-norm, residual stack of this norm, every block computed
        by your block function from the course's block's parts (or an Attempt: why not)."""
        hidden = [self.x.detach().requires_grad_(True)]

        def stack():
            for part in self.stacks[(norm, True, True)]:
                out = self.block(hidden[-1], part.attn, part.ff, part.norm1, part.norm2)
                hidden.append(out)
                if not isinstance(out, torch.Tensor) or out.shape != self.x.shape:
                    break  # the next block could not read it: compare_learner names the shape
            return hidden

        tried = attempt(self.block_name, stack)  # your code may fail in any way: the note says how
        return tried.value if tried.ran else tried

    def _your_stack(self, v: dict, hidden: list) -> tuple[list, str]:
        """(the stack to draw, the note): yours where your function ran and returned the
        right shape at this setting, else the course's; the note says how they compare."""
        names, what = {norm: label for label, norm in self.NORMS}, self.block_name
        if any(isinstance(got, Attempt) and got.missing for got in self.yours.values()):
            return hidden, f"Your {what} is not written yet: the picture shows the course's."
        if not (v["prenorm"] and v["residual"]):
            return hidden, (
                f"Your {what} draws the pre-norm settings with residual on; this setting "
                "shows the course's blocks."
            )
        depth, yours = v["depth"], self.yours[v["norm"]]
        setting = f"depth {depth}, {names[v['norm']]}, pre-norm, residual on"

        def your_output():
            if isinstance(yours, Attempt):
                raise yours.error
            return yours[min(depth, len(yours) - 1)]

        course = hidden[depth]
        shown, note = compare_learner(your_output, (), course, what, setting, atol=1e-4)
        return (hidden, note) if shown is course else (yours[: depth + 1], note)

    def update(self) -> None:
        v = self.values()
        hidden = self.hidden[(v["norm"], v["prenorm"], v["residual"])][: v["depth"] + 1]
        course, note = hidden, ""
        if self.block is not None:
            hidden, note = self._your_stack(v, hidden)
        with one_thread():
            try:
                grads = gradient_reaching(hidden, self.probe)
            except RuntimeError as err:  # your output is detached, or made under no_grad
                if hidden is course:
                    raise
                hidden, note = (
                    course,
                    (
                        f"Your {self.block_name} gives an output that carries no gradient back to "
                        f"its input ({err}). The picture shows the course's."
                    ),
                )
                grads = gradient_reaching(hidden, self.probe)
        self.drawn_from = "course" if hidden is course else "yours"
        self.profile = StackProfile(grads, activation_scales(hidden))
        layers = list(range(1, v["depth"] + 1))
        for name, values, limits in (
            ("grad", self.profile.grad_norms, viz.GRAD_LIMITS),
            ("scale", self.profile.act_scales, viz.SCALE_LIMITS),
        ):
            line, below, above = self.artists[name]
            ys, low, high = viz.pin_to_limits(values, limits)
            line.set_data(layers, ys)
            color, marker = self.STYLES[v["norm"]]
            line.set_color(color)
            line.set_linestyle("-" if v["residual"] else "--")
            line.set_marker(marker)
            line.set_markerfacecolor(color if v["prenorm"] else "white")
            for pinned, mask in ((below, low), (above, high)):
                pinned.set_data(*viz.pinned_points(layers, ys, mask))
                pinned.set_color(color)
        names = {norm: label for label, norm in self.NORMS}
        setting = (
            f"{v['depth']} block(s), {'pre' if v['prenorm'] else 'post'}-norm, "
            f"{names[v['norm']]}, residual {'on' if v['residual'] else 'off'}"
        )
        whose = "the course's blocks"
        if self.drawn_from == "yours":
            agrees = "DIFFERS from" if note.startswith("DIFFERS") else "agrees with"
            whose = f"your {self.block_name} ({agrees} the course's)"
        key, _ = self.legend.legend_handles
        key.set_color(color)
        key.set_linestyle(line.get_linestyle())
        key.set_marker(line.get_marker())
        key.set_markerfacecolor(line.get_markerfacecolor())
        # the stored picture says what the readout says: the setting, whose, and the ratio
        self.legend.get_texts()[0].set_text(
            f"{setting}: {whose}\ngradient at block 1 / at block {v['depth']}: "
            f"{grads[0] / grads[-1]:.3g}"
        )
        if self.ax_grad.get_xlim() != (0.5, v["depth"] + 0.5):
            for ax in (self.ax_grad, self.ax_scale):
                ax.set_xlim(0.5, v["depth"] + 0.5)
            self.invalidate(key=v["depth"])
        self.show_readout(
            setting,
            f": gradient at block 1 = {grads[0]:.3g}, at block {v['depth']} = {grads[-1]:.3g} "
            f"(ratio {grads[0] / grads[-1]:.3g}); root-mean-square size of the output "
            f"{self.profile.act_scales[-1]:.3g}",
            note=note,
        )

    def state(self) -> dict:
        """Adds, per layer 1..depth, the gradient norms and activation scales computed
        ("grad_norms", "act_scales") and as drawn, pinned to the axes' limits ("grad_line",
        "scale_line"), the layers pinned below and above each axis, the line's style (with
        the colours of the pinned triangles), and whose blocks the picture shows ("drawn_from":
        "yours" or "course")."""
        drawn = {}
        for name, (line, below, above) in self.artists.items():
            drawn[f"{name}_line"] = np.asarray(line.get_ydata(), dtype=float).copy()
            drawn[f"{name}_pinned_below"] = [int(x) for x in below.get_xdata()]
            drawn[f"{name}_pinned_above"] = [int(x) for x in above.get_xdata()]
        line = self.artists["grad"][0]
        return super().state() | drawn | {
            "layers": [int(x) for x in line.get_xdata()],
            "drawn_from": self.drawn_from,
            "grad_norms": self.profile.grad_norms.numpy().copy(),
            "act_scales": self.profile.act_scales.numpy().copy(),
            "style": {
                "color": line.get_color(), "linestyle": line.get_linestyle(),
                "marker": line.get_marker(), "filled": line.get_markerfacecolor() != "white",
                "pinned_colors": [
                    pinned.get_color() for _, *both in self.artists.values() for pinned in both
                ],
            },
        }  # fmt: skip

    def settings(self) -> dict[str, list]:
        return super().settings(depth=[1, 2, 4, 8, 16, 24, 32, 48])
