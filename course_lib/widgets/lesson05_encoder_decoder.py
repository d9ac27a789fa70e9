"""Lesson 05_encoder_decoder's explorer: the cross-attention map of a trained encoder-decoder,
output position against source word, as it aligns to the anti-diagonal during training."""

import numpy as np
import torch

from course_lib import viz
from course_lib.reversal import LENGTH, ReversalRun, trained_run, words
from course_lib.viz.lesson05_encoder_decoder import CHANCE_STYLE
from course_lib.widgets.base import Explorer, choice_buttons, choice_slider, toggle_buttons


def sentence_label(ids) -> str:
    """A probe sentence's button: its first three words and an ellipsis."""
    return " ".join(words(ids)[:3]) + " ..."


class CrossAttentionExplorer(Explorer):
    """Lesson 05_encoder_decoder: one head's cross-attention over a held-out sentence, at a
    recorded training step, beside that head's weight on the anti-diagonal over training.

    `CrossAttentionExplorer(run)` shows a run of `course_lib.reversal.train_reversal` (the
    lesson passes the one it trained through the learner's pieces); with no run it trains the
    course's model with the course's pieces, seed 0, first (a few seconds).
    """

    PICTURE = (
        "Cross-attention map of one head (rows: output positions, each labelled with the word "
        "it must write; columns: the source words), the anti-diagonal outlined, beside the "
        "head's weight on the anti-diagonal against training steps"
    )

    def __init__(self, run: ReversalRun | None = None):
        if run is None:
            _, run = trained_run(0)
        if not isinstance(run, ReversalRun) or not run.steps:
            raise TypeError(
                "run: expected what course_lib.reversal.train_reversal returns (a ReversalRun "
                f"with recorded steps), got {type(run).__name__}"
            )
        self.run = run
        self.maps = torch.stack(run.maps)  # (steps, probes, layers, H, T + 1, T)
        self.anti = torch.stack(run.anti_diagonal).numpy()  # (steps, layers, H)
        _, probes, layers, heads, T_out, T_src = self.maps.shape
        self.sources = [words(ids) for ids in run.probes]
        # row i writes source word T - 1 - i; the last row writes the end mark
        self.targets = [[*reversed(s), "</s>"] for s in self.sources]
        fig, (self.ax_map, self.ax_curve) = viz.new_figure(
            9.6, 4.4, ncols=2, gridspec_kw={"width_ratios": [1.0, 1.15]}
        )
        self.map_image, outlines = viz.draw_cross_map(
            self.ax_map, self.maps[0, 0, 0, 0], self.sources[0], self._row_labels(0)
        )
        fig.colorbar(self.map_image, ax=self.ax_map, shrink=0.75, label="attention weight")
        self.heading = self.ax_map.set_title(" ", fontsize=10)
        steps = run.steps
        (self.line,) = self.ax_curve.plot(
            steps,
            self.anti[:, 0, 0],
            marker="o",
            color=viz.BLUE,
            label="this head's weight on the anti-diagonal",
        )
        (self.accuracy,) = self.ax_curve.plot(
            steps,
            run.accuracy,
            marker="s",
            color=viz.ORANGE,
            linestyle="--",
            label="held-out words right",
        )
        self.ax_curve.axhline(run.chance, label=f"chance weight ({run.chance:.3f})", **CHANCE_STYLE)
        (self.now,) = self.ax_curve.plot(
            [steps[0]] * 2, [0, 1.02], color="black", lw=1.0, label="the step shown"
        )
        span = max(steps[-1] - steps[0], 1)  # room past the last step: its marker clears the frame
        self.ax_curve.set_xlim(steps[0] - 0.05 * span, steps[-1] + 0.08 * span)
        self.ax_curve.set_ylim(0, 1.02)
        self.ax_curve.set_xlabel("training step")
        self.ax_curve.set_ylabel("weight on the anti-diagonal; share of words right")
        self.ax_curve.set_title("during training", fontsize=10)
        self.ax_curve.legend(fontsize=8, loc="center right")
        self.ax_curve.grid(alpha=0.3)
        controls = {
            "sentence": choice_buttons(
                "sentence", [(sentence_label(ids), i) for i, ids in enumerate(run.probes)], 0
            ),
            "layer": toggle_buttons("decoder layer", [(str(i), i) for i in range(layers)], 0),
            "head": toggle_buttons("head", [(str(i), i) for i in range(heads)], 0),
            "step": choice_slider("training step", list(steps), steps[-1]),
        }
        super().__init__(
            controls,
            fig,
            dynamic=[self.map_image, *outlines, self.heading, self.line, self.now],
            rows=[["sentence"], ["layer", "head", "step"]],
        )

    STATIC_STEPS = (0, 10, 20, 40)  # with the last: the steps a static page precomputes

    def settings(self) -> dict[str, list]:
        """A static page keeps two sentences and five steps of training (each picture costs
        about 65 kB of the page); the notebook shows every recorded step of all four."""
        steps = self.run.steps
        kept = sorted(
            {s for s in self.STATIC_STEPS if s in steps} | {steps[-1], self._start["step"]}
        )
        return super().settings(sentence=[0, 1][: len(self.sources)], step=kept)

    def _row_labels(self, sentence: int) -> list[str]:
        return [f"{i}: {word}" for i, word in enumerate(self.targets[sentence])]

    def update(self) -> None:
        v = self.values()
        step_index = self.run.steps.index(v["step"])
        sentence, layer, head = v["sentence"], v["layer"], v["head"]
        if getattr(self, "_labelled", None) != sentence:  # tick labels are static parts
            self.ax_map.set_xticks(range(LENGTH), self.sources[sentence], rotation=90, fontsize=9)
            self.ax_map.set_yticks(range(LENGTH + 1), self._row_labels(sentence), fontsize=9)
            self._labelled = sentence
            self.invalidate(key=sentence)
        weights = self.maps[step_index, sentence, layer, head]  # (T + 1, T)
        self.map_image.set_data(weights.numpy())
        self.line.set_ydata(self.anti[:, layer, head])
        self.now.set_xdata([v["step"]] * 2)
        self.heading.set_text(
            f"sentence {sentence + 1}, decoder layer {layer}, head {head}, after {v['step']} steps"
        )
        rows = torch.arange(LENGTH)
        here = float(weights[rows, LENGTH - 1 - rows].double().mean())
        written = words(self.run.written[step_index][sentence])[:LENGTH]  # the end mark aside
        pairs = zip(written, self.targets[sentence][:LENGTH], strict=True)
        right = sum(w == t for w, t in pairs)
        self.show_readout(
            f"sentence {sentence + 1}, step {v['step']}, decoder layer {layer}, head {head}",
            f": weight on the anti-diagonal {here:.2f} in this map (chance {self.run.chance:.3f});"
            f" held-out words right at this step {self.run.accuracy[step_index]:.1%}",
            note=f"The model writes: {' '.join(written)} ({right} of {LENGTH} words right).",
        )

    def state(self) -> dict:
        """Adds the map shown ("map", (T + 1, T)), the heading and the tick labels."""
        return super().state() | {
            "map": np.asarray(self.map_image.get_array(), dtype=float),
            "heading": self.heading.get_text(),
            "sources": list(self.sources[self.values()["sentence"]]),
        }
