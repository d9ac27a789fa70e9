"""Lesson 06's ablation explorers: the shipped checkpoints side by side (position scheme,
heads, the scale), and one head knocked out. They draw what course_lib.ablation measures."""

import numpy as np
import torch
from matplotlib.patches import Rectangle

from course_lib import viz
from course_lib.runtime import one_thread
from course_lib.widgets.base import Explorer, checkbox, choice_buttons


class AblationExplorer(Explorer):
    """Lesson 06: shipped checkpoints side by side: position scheme, heads, and the scale.

    It draws what ablation.scale_comparison measures on 100 validation sequences: pass its
    result as `results`, or the explorer runs it once on the shipped checkpoints. The scale has
    two ablations: a checkpoint trained without 1/sqrt(d), and (unticking "as trained") any
    checkpoint's own weights run with the scale flipped, see ablation.flip_scale.
    """

    PICTURE = (
        "Bar charts of the best head per detector and the validation loss, beside the table "
        "of detector scores per head"
    )

    SETTINGS = (
        ("RoPE, 4 heads (the recipe)", "rope-h4"),
        ("sinusoidal positions, 4 heads", "sinusoidal-h4"),
        ("no positions, 4 heads", "none-h4"),
        ("RoPE, 1 head", "rope-h1"),
        ("RoPE, 2 heads", "rope-h2"),
        ("RoPE, 8 heads", "rope-h8"),
        ("RoPE, 4 heads, trained without the scale", "rope-h4-noscale"),
    )

    def __init__(self, num_sequences: int = 100, results=None):
        from course_lib import ablation, data, heads
        from course_lib.model import load_pretrained

        self.detectors = tuple(heads.DETECTORS)
        ids = data.load_split("valid")[:num_sequences]  # (N, T)
        if results is None:
            models = {name: load_pretrained(name) for _, name in self.SETTINGS}
            with one_thread():
                results = ablation.scale_comparison(models, ids)
        self.results = results
        ref = self.results[("rope-h4", True)]
        chance = heads.chance_scores(ids)
        fig, (self.ax_det, self.ax_loss, self.ax_map) = viz.new_figure(
            11.0, 4.0, ncols=3, width_ratios=[1, 0.8, 1.4]
        )
        x = range(len(self.detectors))
        colors = [viz.DETECTOR_STYLES[d]["color"] for d in self.detectors]
        self.det_bars = self.ax_det.bar(x, [0.0] * len(x), color=colors)
        # references drawn after the bars (dynamic artists), so a taller bar never hides them
        ref_marks = self.ax_det.scatter(
            x, [float(ref["scores"][d].max()) for d in self.detectors], marker="_", s=900,
            color="black", zorder=3,
        )  # fmt: skip
        chance_marks = self.ax_det.hlines(
            [chance[d] for d in self.detectors], [i - 0.4 for i in x], [i + 0.4 for i in x],
            colors="white", linestyles="--", lw=1.5, zorder=3,
        )  # fmt: skip
        self.ax_det.set_xticks(list(x), self.detectors)
        self.ax_det.set_ylim(0, 1.05)
        self.ax_det.set_ylabel("best head's score")
        self.ax_det.set_title(
            "best head per detector\n(black: RoPE, 4 heads; white dashes: chance)", fontsize=10
        )
        # every checkpoint's loss, the chosen one dark: the default is no longer one bar alone
        names = [name for _, name in self.SETTINGS]
        self.loss_bars = self.ax_loss.bar(range(len(names)), [0.0] * len(names), color="#bbbbbb")
        # the losses differ in the second decimal, too little to see on bars from 0: each bar
        # carries its value, static per scale setting (two cached backgrounds, see update)
        self.loss_values = [
            self.ax_loss.text(i, 0, "", rotation=90, ha="center", va="bottom", fontsize=8)
            for i in range(len(names))
        ]
        self.ax_loss.set_ylim(0, max(r["val_loss"] for r in self.results.values()) * 1.25)
        self.ax_loss.set_xticks(range(len(names)), names, rotation=60, ha="right", fontsize=8)
        self.ax_loss.set_ylabel("validation loss (nats)")
        self.ax_loss.set_title("loss of every checkpoint\n(dark: the chosen one)", fontsize=10)
        rows = [f"{d}, layer {layer}" for d in self.detectors for layer in range(2)]
        self.mesh = self.ax_map.imshow(torch.zeros(6, 8).numpy(), vmin=0, vmax=1, cmap="viridis",
                                       aspect="auto")  # fmt: skip
        self.ax_map.set_yticks(range(6), rows, fontsize=8)
        self.ax_map.set_xticks(range(8), [str(h) for h in range(8)])
        self.ax_map.set_xlabel("head (blank: the model has fewer)")
        self.ax_map.set_title("every head's score", fontsize=10)
        low, high = min(chance.values()), max(chance.values())
        fig.colorbar(
            self.mesh, ax=self.ax_map, label=f"detector score\n(chance {low:.2f} to {high:.2f})"
        )
        controls = {
            "setting": choice_buttons("model", self.SETTINGS, "rope-h4"),
            "scale": checkbox("1/sqrt(d) scale as trained (untick: flip it)", True),
        }
        super().__init__(
            controls, fig,
            dynamic=[*self.det_bars, ref_marks, chance_marks, *self.loss_bars, self.mesh],
        )  # fmt: skip

    def update(self) -> None:
        v = self.values()
        result = self.results[(v["setting"], v["scale"])]
        best = [float(result["scores"][d].max()) for d in self.detectors]
        for bar, height in zip(self.det_bars, best, strict=True):
            bar.set_height(height)
        for bar, (_, name) in zip(self.loss_bars, self.SETTINGS, strict=True):
            bar.set_height(self.results[(name, v["scale"])]["val_loss"])
            bar.set_color("#444444" if name == v["setting"] else "#bbbbbb")
        for text, bar in zip(self.loss_values, self.loss_bars, strict=True):
            text.set_y(bar.get_height() + 0.04)
            text.set_text(f"{bar.get_height():.3f}")
        self.invalidate(key=v["scale"])
        self.val_loss = result["val_loss"]
        table = torch.full((6, 8), float("nan"))
        for i, d in enumerate(self.detectors):
            scores = result["scores"][d]  # (layers, H)
            table[2 * i : 2 * i + 2, : scores.shape[1]] = scores
        self.mesh.set_data(table.numpy())
        label = next(label for label, name in self.SETTINGS if name == v["setting"])
        flipped = "" if v["scale"] else ", same weights with the scale flipped"
        self.uses_scale = result["scale"]
        self.show_readout(
            f"{label}{flipped}: attention {'with' if result['scale'] else 'without'} 1/sqrt(d)",
            f"; validation loss {result['val_loss']:.3f}; best "
            + ", ".join(f"{d} {x:.2f}" for d, x in zip(self.detectors, best, strict=True)),
        )

    def state(self) -> dict:
        """Adds the bars: the best head's score per detector, the chosen checkpoint's
        validation loss and every checkpoint's ("losses", same scale setting); every
        head's scores as drawn ("table", (detectors x layers, 8), NaN where no head); and
        whether the attention shown runs with the 1/sqrt(d) scale."""
        return super().state() | {
            "detector_scores": {
                d: bar.get_height() for d, bar in zip(self.detectors, self.det_bars, strict=True)
            },
            "val_loss": self.val_loss,
            "losses": {
                name: bar.get_height()
                for bar, (_, name) in zip(self.loss_bars, self.SETTINGS, strict=True)
            },
            "table": np.asarray(self.mesh.get_array(), dtype=float).copy(),
            "uses_scale": bool(self.uses_scale),
        }


class KnockoutExplorer(Explorer):
    """Lesson 06: knock one head of the shipped rope-h4 out and watch each skill's loss and
    the sampled text change (course_lib.ablation).

    It draws ablation.knockout_tables (every head knocked out in both modes, the losses on 200
    validation sequences: pass them as `tables`, or the explorer measures them once). A
    setting's samples (ablation.knockout_samples) and its picture are made the first time it
    is shown, then kept, so coming back to it only switches pictures.
    """

    PICTURE = (
        "Bar chart of the loss on each skill's positions with the chosen head knocked out, "
        "baseline marked, beside the table of loss increases for every head"
    )

    # a prompt that leans on each skill, continued by sampling (same seed for every setting);
    # all eight tokens long, so the three are sampled as one batch
    PROMPTS = {
        "agreement": ". Dogs near the cat with the girl",
        "brackets": 'Cat sleeps ( the bird " the boys',
        "song": "Girls near the cat sing bone run bone",
    }
    NUM_TOKENS = 8
    MODES = (("zero its output", "zero"), ("its pattern averaged over the text", "mean"))

    def __init__(self, model=None, num_sequences: int = 200, tables=None):
        from course_lib import ablation, data
        from course_lib.model import load_pretrained

        self.ablation, self.data = ablation, data
        self.model = load_pretrained("rope-h4") if model is None else model
        self.skills = ablation.ALL_SKILLS
        cfg = self.model.config
        self.heads = [(layer, h) for layer in range(cfg.num_layers) for h in range(cfg.num_heads)]
        if tables is None:
            ids = data.load_split("valid")[:num_sequences]  # (N, T)
            modes = tuple(mode for _, mode in self.MODES)
            with one_thread():
                _, tables = ablation.knockout_tables(self.model, ids, modes=modes,
                                                     skills=self.skills)  # fmt: skip
        self.tables = tables  # mode -> (1 + heads, skills), row 0 the baseline
        self.prompts = torch.stack([data.encode(text) for text in self.PROMPTS.values()])  # (3, 8)
        self.samples, self._pictures = {}, {}  # by (head, mode), made when first shown
        self.prompt_len = self.prompts.shape[1]
        fig, axes = viz.new_figure(
            11.0, 5.2, ncols=2, nrows=2, width_ratios=[1, 1.25], height_ratios=[3.4, 1]
        )
        (self.ax_bars, self.ax_map), bottom = axes
        for ax in bottom:
            ax.remove()
        # the samples, in the picture itself so that a static page shows them too
        self.ax_text = fig.add_subplot(axes[0, 0].get_gridspec()[1, :])
        self.ax_text.set_axis_off()
        self.ax_text.set_title(
            "sampled, one seed for every setting: the prompt, then | and the model's words",
            fontsize=10, loc="left",
        )  # fmt: skip
        self.lines = {
            skill: self.ax_text.text(0.0, 0.8 - 0.35 * i, "", fontsize=9, family="monospace",
                                     transform=self.ax_text.transAxes, va="center")
            for i, skill in enumerate(self.PROMPTS)
        }  # fmt: skip
        x = np.arange(len(self.skills))
        colours = [self.SKILL_COLOURS[s] for s in self.skills]
        self.bars = self.ax_bars.bar(x, [0.0] * len(x), color=colours, width=0.6)
        self.base_marks = self.ax_bars.scatter(
            x, self.tables["zero"][0].numpy(), marker="_", s=1200, linewidths=2.5,
            color="black", zorder=3, label="nothing knocked out",
        )  # fmt: skip
        top = max(float(t.max()) for t in self.tables.values())
        self.ax_bars.set_ylim(0, top * 1.08)
        self.ax_bars.set_xticks(x, self.skills)
        self.ax_bars.set_ylabel("loss on the skill's positions (nats)")
        self.ax_bars.legend(fontsize=9, loc="upper left", markerscale=0.4)
        self.ax_bars.set_title("loss per skill with the chosen head knocked out", fontsize=10)
        self.limit = 1.0
        self.mesh = self.ax_map.imshow(
            np.zeros((len(self.heads), len(self.skills))), cmap="RdBu_r", vmin=-self.limit,
            vmax=self.limit, aspect="auto",
        )  # fmt: skip
        self.row_box = Rectangle((-0.5, -0.5), len(self.skills), 1, fill=False, lw=2.5,
                                 edgecolor="black")  # fmt: skip
        self.ax_map.add_patch(self.row_box)
        self.ax_map.set_xticks(x, self.skills)
        self.ax_map.set_yticks(range(len(self.heads)), [f"L{a} H{b}" for a, b in self.heads])
        self.ax_map.set_xlabel("skill")
        self.ax_map.set_ylabel("head knocked out (box: the chosen one)")
        self.ax_map.set_title("every head: loss increase", fontsize=10)
        fig.colorbar(self.mesh, ax=self.ax_map, extend="both", label="loss increase (nats)")
        options = [("none", "none")] + [(f"L{a} H{b}", (a, b)) for a, b in self.heads]
        controls = {
            "head": choice_buttons("knock out", options, "none"),
            "mode": choice_buttons("how", self.MODES, "zero"),
        }
        super().__init__(
            controls, fig,
            dynamic=[*self.bars, self.base_marks, self.mesh, self.row_box, *self.lines.values()],
        )  # fmt: skip

    # a skill drawn in the colour of the detector that scores its head (viz.DETECTOR_STYLES)
    SKILL_COLOURS = {
        "overall": "#999999",  # grey: every position, no one skill
        "agreement": viz.DETECTOR_STYLES["subject"]["color"],
        "brackets": viz.DETECTOR_STYLES["bracket"]["color"],
        "song": viz.DETECTOR_STYLES["previous"]["color"],
    }

    def update(self) -> None:
        v = self.values()
        head = None if v["head"] == "none" else v["head"]
        table = self.tables[v["mode"]]
        row = table[0 if head is None else 1 + self.heads.index(head)]  # (skills,)
        for bar, height in zip(self.bars, row.tolist(), strict=True):
            bar.set_height(height)
        self.mesh.set_data((table[1:] - table[0]).numpy())
        # no box when nothing is knocked out: the row of zeros is not in the table
        self.row_box.set_visible(head is not None)
        if head is not None:
            self.row_box.set_y(self.heads.index(head) - 0.5)
        rise = row - table[0]
        self.rise = rise
        samples = self._samples(head, v["mode"])
        for skill, tokens in samples.items():
            n = self.prompt_len
            said = f"{skill + ':':11s}{' '.join(tokens[:n])} | {' '.join(tokens[n:])}"
            self.lines[skill].set_text(said)
        self.sampled = {skill: " ".join(tokens) for skill, tokens in samples.items()}
        what = "nothing knocked out" if head is None else f"layer {head[0]}, head {head[1]}"
        how = "" if head is None else f" ({dict((m, t) for t, m in self.MODES)[v['mode']]})"
        self.show_readout(
            f"{what}{how}: ",
            "loss "
            + ", ".join(
                f"{s} {float(x):.2f} ({float(d):+.2f})"
                for s, x, d in zip(self.skills, row, rise, strict=True)
            ),
            "in brackets: the change from nothing knocked out; the samples use one seed",
        )

    def _samples(self, head, mode: str) -> dict:
        """The prompts continued with `head` knocked out, by skill: sampled when first shown."""
        if (head, mode) not in self.samples:
            with one_thread():
                sampled = self.ablation.knockout_samples(
                    self.model, self.prompts, self.NUM_TOKENS, [head] if head else [], mode
                )  # (3, 16)
            tokens = map(self.data.to_tokens, sampled)
            self.samples[(head, mode)] = dict(zip(self.PROMPTS, tokens, strict=True))
        return self.samples[(head, mode)]

    def redraw(self) -> None:
        """Each setting's picture is drawn the first time it is shown, then kept: the samples'
        text is slow to draw (about 20 ms a line)."""
        v = self.values()
        key = (v["head"], v["mode"])
        if key in self._pictures:
            self.show_picture(self._pictures[key])
            return
        super().redraw()
        self._pictures[key] = bytes(self.image.value)

    def state(self) -> dict:
        """Adds the bars (loss per skill with the chosen knock-out), the baseline marks, the
        increase table shown ((heads, skills)), the boxed rows (none or the chosen head's), the
        increases of the chosen knock-out, and the sampled texts by skill."""
        boxed = [round(self.row_box.get_y() + 0.5)] if self.row_box.get_visible() else []
        return super().state() | {
            "losses": {s: bar.get_height() for s, bar in zip(self.skills, self.bars, strict=True)},
            "baseline": dict(zip(self.skills, map(float, self.tables["zero"][0]), strict=True)),
            "table": np.asarray(self.mesh.get_array(), dtype=float).copy(),
            "boxed_rows": boxed,
            "rise": dict(zip(self.skills, map(float, self.rise), strict=True)),
            "samples": dict(self.sampled),
        }
