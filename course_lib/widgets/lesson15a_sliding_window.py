"""Lesson 15a's explorer: the sliding-window mask, and how far back one query reaches through
the layers."""

import numpy as np
from matplotlib.patches import Rectangle

from course_lib import viz
from course_lib.sliding_window import receptive_field, window_mask
from course_lib.widgets.base import Explorer, choice_buttons, compare_learner, slider

T = 48  # positions drawn: long enough for three layers of a window of 8 to show their reach


class WindowExplorer(Explorer):
    """The explorer of lesson 15a: choose a window W, a number of layers L and sinks; see the mask
    (left) and, for one query, which input positions can reach it after each layer (right).

    With `mask`, your sliding_window_mask(T, window, sinks), the left picture and the reach are
    drawn from yours, and the note says whether it agrees with the course's."""

    PICTURE = (
        "Left, the sliding-window mask, queries down and keys across; right, one row per layer: "
        "the input positions that can reach the chosen query after that layer"
    )

    def __init__(self, *, mask=None):
        if mask is not None and not callable(mask):
            raise TypeError(
                "mask: expected your sliding_window_mask function (or None for the course's), "
                f"got {type(mask).__name__}"
            )
        self.mask_fn = mask
        fig, (self.ax_m, self.ax_r) = viz.new_figure(11.0, 4.6, ncols=2, width_ratios=[1, 1.5])
        self.mask_image = self.ax_m.imshow(np.zeros((T, T)), cmap="viridis", vmin=0, vmax=1,
                                           interpolation="nearest")  # fmt: skip
        # the chosen query's row, outlined so the mask under it stays visible
        box = Rectangle((-0.5, -0.5), T, 1, fill=False, edgecolor=viz.ORANGE, linewidth=2)
        self.query_box = self.ax_m.add_patch(box)
        self.ax_m.set_xlabel("key position")
        self.ax_m.set_ylabel("query position")
        self.ax_m.set_title("the mask (yellow: may read)")
        self.reach_image = self.ax_r.imshow(np.zeros((4, T)), cmap="viridis", vmin=0, vmax=1,
                                            aspect="auto", interpolation="nearest")  # fmt: skip
        (self.reach_mark,) = self.ax_r.plot([], [], "v", color=viz.ORANGE, ms=9)
        self.ax_r.set_yticks(range(4), [f"after layer {n}" for n in range(1, 5)])
        self.ax_r.set_xlabel("input position")
        self.ax_r.set_ylim(3.5, -0.7)
        self.blank_note = self.ax_r.text(T / 2, 3, "", ha="center", va="center", color="grey")
        self.setting_title = fig.suptitle("", fontsize=11)
        controls = {
            "window": slider("window W", 8, 1, 16),
            "layers": slider("layers L", 2, 1, 4),
            "sinks": choice_buttons("sinks", (("none", 0), ("1 sink", 1)), 0),
            "query": slider("query", T - 1, 0, T - 1),
        }
        super().__init__(
            controls, fig,
            dynamic=[self.mask_image, self.query_box, self.reach_image, self.reach_mark,
                     self.blank_note, self.ax_r.title, self.setting_title],
        )  # fmt: skip

    def _mask(self, window, sinks):
        course = window_mask(T, window, sinks)
        setting = f"T {T}, window {window}, sinks {sinks}"
        drawn, note = compare_learner(self.mask_fn, (T, window, sinks), course,
                                      "sliding_window_mask", setting)  # fmt: skip
        if drawn.dtype != course.dtype:  # a float 0/1 mask: drawn as is, reached as > 0
            drawn = drawn > 0
        return drawn, note

    def update(self) -> None:
        values = self.values()
        window, layers, sinks, q = (values[k] for k in ("window", "layers", "sinks", "query"))
        mask, note = self._mask(window, sinks)
        reach = receptive_field(mask, 4)[:, q]  # (4, T): what reaches query q after each layer
        shown = reach.float().numpy()
        shown[layers:] = np.nan  # layers beyond L are left blank
        self.mask_image.set_data(mask.float().numpy())
        self.query_box.set_y(q - 0.5)
        self.reach_image.set_data(shown)
        self.reach_mark.set_data([q], [-0.45])
        window_part = reach[:layers, sinks:]  # (L, T - sinks): the sinks left out
        back = [q - sinks - int(row.nonzero().min()) if row.any() else 0 for row in window_part]
        self.blank_note.set_text(f"L = {layers}: layers {layers + 1} to 4 not drawn"
                                 if layers < 4 else "")  # fmt: skip
        self.blank_note.set_y((layers + 3) / 2)  # centred on the blank rows
        self.ax_r.set_title(f"yellow: what can reach query {q} (orange triangle), layer by layer")
        lead = f"window {window}, {layers} layer{'s' if layers > 1 else ''}, sinks {sinks}: "
        steps = ", ".join(f"{b}" for b in back)
        rest = (
            f"query {q} reaches back {back[-1]} positions through the window "
            f"(after each layer: {steps}); L x (W - 1) = {layers * (window - 1)}"
        )
        if layers * (window - 1) > q - sinks >= 0:  # the bound is longer than the line so far
            rest += f"; it stops at position {sinks}: nothing earlier is left to reach"
        if sinks and q >= 1:
            rest += "; the sink (position 0) reaches it directly, at every layer"
        self.setting_title.set_text(lead.rstrip(": "))
        self.show_readout(lead, rest, note=note)

    def settings(self, **chosen):
        return super().settings(window=[1, 2, 4, 8, 12, 16], query=[T - 1, 20], **chosen)

    def state(self) -> dict:
        """Adds the mask and the reach drawn now."""
        reach = self.reach_image.get_array()
        return super().state() | {
            "mask": np.asarray(self.mask_image.get_array()).tolist(),
            "reach": np.nan_to_num(np.asarray(reach, dtype=float), nan=-1.0).tolist(),
            "setting": self.setting_title.get_text(),
        }
