"""Lesson 00's explorer: scale a row of scores and watch softmax sharpen or flatten."""

import torch

from course_lib import viz
from course_lib.widgets.base import Explorer, slider


class SoftmaxExplorer(Explorer):
    """Lesson 00: scale a row of scores up and down and watch softmax sharpen or flatten."""

    PICTURE = "Bar chart of the softmax weights of five words"

    SHARPNESS = (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0)  # for a static page

    def __init__(
        self, scores=(2.0, 1.0, 0.5, 0.0, -1.0), labels=("cat", "sat", "on", "the", "mat")
    ):
        if len(scores) != len(labels):
            raise ValueError(
                f"labels: expected one label per score ({len(scores)}), got {len(labels)}"
            )
        self.scores = torch.tensor(scores, dtype=torch.float32)
        self.labels = list(labels)
        fig, self.ax = viz.new_figure(5.5, 3.0)
        self.bars = self.ax.bar(self.labels, torch.zeros(len(labels)).tolist(), color="tab:blue")
        self.ax.set_ylim(0, 1)
        self.ax.set_ylabel("softmax weight")
        controls = {"sharpness": slider("sharpness (scores x)", 1.0, 0.0, 8.0, 0.25)}
        super().__init__(controls, fig, dynamic=[*self.bars, self.ax.title])

    def weights(self) -> torch.Tensor:
        return torch.softmax(self.scores * self.controls["sharpness"].value, dim=-1)

    def update(self) -> None:
        w = self.weights()
        for bar, height in zip(self.bars, w.tolist(), strict=True):
            bar.set_height(height)
        sharpness = self.controls["sharpness"].value
        self.ax.set_title(f"scores x {sharpness:g}: largest weight {w.max().item():.2f}")
        listed = ", ".join(
            f"{label} {x:.2f}" for label, x in zip(self.labels, w.tolist(), strict=True)
        )
        self.show_readout(f"scores x {sharpness:g}", f": weights {listed}")

    def state(self) -> dict:
        """Adds the bar heights ("weights") and the title above them."""
        weights = [bar.get_height() for bar in self.bars]
        return super().state() | {"weights": weights, "title": self.ax.get_title()}

    def settings(self) -> dict[str, list]:
        return super().settings(sharpness=self.SHARPNESS)
