"""Lesson 06's explorers: a trained model's heads on examples or typed text; the ablations."""

import html
import re

import ipywidgets
import numpy as np
import torch
from matplotlib.patches import Rectangle

from course_lib import viz
from course_lib.runtime import one_thread
from course_lib.widgets.base import (
    Explorer,
    checkbox,
    choice_buttons,
    slider,
    text_box,
    toggle_buttons,
)

# short sentences that each lean on one skill, and one that needs all three
TRAINED_EXAMPLES = {
    "song (previous token)": "Dogs near the cat sing bone run bone run bone run .",
    "brackets and quotes": 'Cat with the dog sleeps ( the bird " the boys " and the girl ) .',
    "agreement past two nouns": "Girls behind the dog near the cat read the book .",
    "all three": 'Dogs near the girl sing bone run bone run [ the bird " the boys " ] .',
}
# sentences to type into the text box, all in the toy vocabulary (a static page offers them)
SAMPLE_SENTENCES = (
    "Birds with the dog eat the apple ( the cat ) .",
    "Boy near the fishes sings ball stone ball stone ball .",
)
# what a benchmark types: the samples, then a sentence with an unknown word
TYPED_SAMPLES = (*SAMPLE_SENTENCES, "Dogs chase the cat .")


def fresh_sentences(count: int, seed: int = 6) -> list[str]:
    """`count` different stretches of the toy language, 8 to 32 tokens, none of them typed
    before: what benchmarks.explorers types to time a new sentence (lesson 06)."""
    from course_lib import data

    lines = data.generate_sequences(count, data.SEQ_LEN, seed)
    return list(dict.fromkeys(" ".join(line[: 8 + (7 * i) % 25]) for i, line in enumerate(lines)))


class TrainedHeadsExplorer(Explorer):
    """Lesson 06: where each head of a trained TinyTransformer looks, on examples or your text.

    Examples are run once at construction; a typed sentence costs one forward pass. Marks on
    the map are the (query, key) cells each detector scores: a head doing that job lights them.
    """

    PICTURE = (
        "Attention map of one head of the trained model on the sentence (rows queries, "
        "columns keys), with the chosen query's weights as bars"
    )

    MAX_T = 32

    def __init__(self, model=None, examples=None):
        from course_lib import data, heads
        from course_lib.model import load_pretrained

        self.data, self.detectors = data, heads.DETECTORS
        self.model = load_pretrained("rope-h4") if model is None else model
        self.examples = {
            name: self._run(data.encode(text).tolist())
            for name, text in (examples or TRAINED_EXAMPLES).items()
        }
        self.typed = {}  # sentences typed so far, by ids
        first = next(iter(self.examples))
        self.current = self.examples[first]
        self.message = ipywidgets.HTML()
        cfg = self.model.config
        fig, (self.ax_map, self.ax_bars) = viz.new_figure(11.0, 4.6, ncols=2, width_ratios=[1, 1.1])
        self.image_map = self.ax_map.imshow(
            torch.zeros(2, 2).numpy(), vmin=0, vmax=1, cmap="viridis", aspect="auto"
        )
        fig.colorbar(self.image_map, ax=self.ax_map, fraction=0.05, pad=0.02).set_label(
            "attention weight"
        )
        fig.get_layout_engine().set(wspace=0.06)  # the colour bar's label apart from the bars'
        self.row_box = Rectangle((-0.5, -0.5), 1, 1, fill=False, edgecolor="red", linewidth=2)
        self.ax_map.add_patch(self.row_box)
        styles = {name: viz.DETECTOR_STYLES[name] for name in self.detectors}
        self.marks = {
            name: self.ax_map.scatter([], [], s=30, marker=style["marker"], facecolors="none",
                                      edgecolors=style["edge"], linewidths=1.3, label=name)
            for name, style in styles.items()
        }  # fmt: skip
        self.legend = ", ".join(f"{style['mark']} {name}" for name, style in styles.items())
        self.bars = self.ax_bars.bar(range(self.MAX_T), [0.0] * self.MAX_T, color="tab:blue")
        self.ax_bars.set_ylim(0, 1)
        self.ax_bars.set_ylabel("attention weight")
        self.ax_bars.set_xlabel("key position")
        controls = {
            "example": choice_buttons("example", list(self.examples), first),
            "sentence": text_box(
                "your sentence", "or type a sentence in the toy vocabulary, then Enter", "560px"
            ),
            "layer": toggle_buttons("layer", list(range(cfg.num_layers)), 0, button_width="40px"),
            "head": toggle_buttons("head", list(range(cfg.num_heads)), 0, button_width="40px"),
            "query": slider("query position", 6, 0, self.MAX_T - 1),
        }
        # for benchmarks.explorers: every change types a sentence never seen, the slow case
        controls["sentence"].sample_values = (*fresh_sentences(40), *TYPED_SAMPLES)
        self._seen = {"example": first, "sentence": ""}
        self._shown = None
        # tick labels are stamped from pictures of the vocabulary (viz.TickStamp): drawing 64
        # words with matplotlib took most of the time of showing a new sentence
        self.words = viz.TickStamp(fig, fontsize=8)
        self.numbers = viz.TickStamp(fig)
        self._base = None  # the figure without the sentence's ticks, see _freeze_base
        self._reserve_label_room()
        self._refitting = False  # True while the query slider's range follows a new sentence
        super().__init__(
            controls,
            fig,
            dynamic=[self.image_map, self.row_box, *self.bars, *self.marks.values()],
            above_readout=[self.message],
            rows=[["example"], ["sentence"], ["layer", "head", "query"]],
        )
        self._freeze_base()

    def _run(self, ids: list[int]) -> dict:
        """Tokens, per-layer (H, T, T) weights and detector pairs of one sentence."""
        with one_thread(), torch.no_grad():
            _, weights = self.model(torch.tensor([ids]), return_weights=True)  # [(1, H, T, T)]
        tokens = self.data.to_tokens(ids)
        pairs = {name: find(tokens) for name, find in self.detectors.items()}
        return {"tokens": tokens, "weights": [w[0] for w in weights], "pairs": pairs}

    def _pick_source(self, v) -> None:
        if v["example"] != self._seen["example"]:
            self._seen["example"] = v["example"]
            self.current = self.examples[v["example"]]
            self.message.value = ""
        elif v["sentence"] != self._seen["sentence"]:
            self._seen["sentence"] = v["sentence"]
            if not v["sentence"].strip():
                return
            try:
                ids = self.data.encode(v["sentence"], max_len=self.MAX_T).tolist()
            except ValueError as err:
                text = str(err).split("; the vocabulary")[0].removeprefix("text: ")
                self.message.value = (
                    f"<span style='color:#b00'><b>Not shown:</b> {html.escape(text)}. "
                    'Use only the toy vocabulary (e.g. Dogs, near, the, cat, sing, ( ) [ ] " .)'
                    "; the picture still shows the previous sentence.</span>"
                )
                return
            key = tuple(ids)
            if key not in self.typed:  # one forward pass per new sentence
                self.typed[key] = self._run(ids)
            self.current = self.typed[key]
            self.message.value = "<i>Showing your sentence.</i>"

    def update(self) -> None:
        v = self.values()
        self._pick_source(v)
        tokens, T = self.current["tokens"], len(self.current["tokens"])
        if self._shown is not self.current:  # a new sentence: new size and labels
            self._shown = self.current
            self._set_static(self.current)
            self._fit_query(T)
            v = self.values()
        query = v["query"]
        weights = self.current["weights"][v["layer"]][v["head"]]  # (T, T)
        self.image_map.set_data(weights.numpy())
        self.row_box.set_bounds(-0.5, query - 0.5, T, 1)
        row = weights[query]  # (T,)
        for i, bar in enumerate(self.bars):
            bar.set_height(float(row[i]) if i < T else 0.0)
        top = row.topk(min(3, T))
        pairs = zip(top.values.tolist(), top.indices.tolist(), strict=True)
        listed = ", ".join(f"'{tokens[k]}' ({k}) {w:.2f}" for w, k in pairs)
        self.show_readout(
            f"layer {v['layer']}, head {v['head']}, query {query} '{tokens[query]}'",
            f" looks most at: {listed}",
            f"marks on the map: {self.legend} (query row, needed key column)",
        )
        self.ax_map.set_title("rows: queries, columns: keys (red box: the query)", fontsize=10)
        self.ax_bars.set_title("the query's weights over the keys", fontsize=10)

    def state(self) -> dict:
        """Adds the sentence's tokens, the map shown ("weights", (T, T)), the query row it
        outlines and that row's bars, each detector's marked (query, key) cells, and the
        message line as plain text."""
        T = len(self.current["tokens"])
        marks = {
            name: [(int(q), int(k)) for k, q in np.asarray(scatter.get_offsets())]
            for name, scatter in self.marks.items()
        }
        return super().state() | {
            "tokens": list(self.current["tokens"]),
            "weights": np.asarray(self.image_map.get_array(), dtype=float).copy(),
            "query": round(self.row_box.get_y() + 0.5),
            "bars": [bar.get_height() for bar in self.bars[:T]],
            "marks": marks,
            "message": html.unescape(re.sub(r"<[^>]+>", "", self.message.value)),
        }

    def _fit_query(self, T: int) -> None:
        """The query slider spans the sentence shown, so every position it offers is a token
        (a shorter sentence pulls the value back to its last token)."""
        self._refitting = True
        try:
            self.controls["query"].max = T - 1
        finally:
            self._refitting = False

    def _on_change(self, change) -> None:
        if not self._refitting:  # the range just followed a new sentence: update() goes on
            super()._on_change(change)

    def settings(self) -> dict[str, list]:
        """Every example, layer and head; every other query position that all examples have,
        and the last of them: 224 settings. Typing a sentence needs a kernel, so a static page
        leaves the text box out."""
        shortest = min(len(entry["tokens"]) for entry in self.examples.values())
        queries = sorted({*range(0, shortest, 2), shortest - 1, self._start["query"]})
        return super().settings(sentence=None, query=queries)

    def _set_static(self, entry: dict) -> None:
        """Size and marks of a new sentence; its tick labels are stamped by the next redraw."""
        T = len(entry["tokens"])
        self.image_map.set_extent((-0.5, T - 0.5, T - 0.5, -0.5))
        self.ax_map.set_xlim(-0.5, T - 0.5)
        self.ax_map.set_ylim(T - 0.5, -0.5)
        self.ax_bars.set_xlim(-0.6, T - 0.4)
        for name, scatter in self.marks.items():
            pairs = entry["pairs"][name]
            scatter.set_offsets([(k, q) for q, k in pairs] if pairs else torch.empty(0, 2))
        self.invalidate()

    def redraw(self) -> None:
        if self._background is None and self._base is not None:
            # a new sentence: its ticks and words over the base, a few milliseconds
            self.canvas.restore_region(self._base)
            renderer = self.canvas.get_renderer()
            tokens = self.current["tokens"]
            self.words.stamp(renderer, self.ax_map, "x90", tokens)
            self.words.stamp(renderer, self.ax_map, "y", tokens)
            every = range(0, len(tokens), 5)  # key positions; the map names them
            self.numbers.stamp(renderer, self.ax_bars, "x", every, positions=every)
            self._background = self.canvas.copy_from_bbox(self.fig.bbox)
        super().redraw()

    def _reserve_label_room(self) -> None:
        """Before the layout is frozen: ticks with the widest words, so any sentence fits."""
        vocab = self.data.VOCAB
        wide_x, wide_y = self.words.widest(vocab, "x90"), self.words.widest(vocab, "y")
        self.ax_map.set_xticks(range(self.MAX_T), [wide_x] * self.MAX_T, rotation=90, fontsize=8)
        self.ax_map.set_yticks(range(self.MAX_T), [wide_y] * self.MAX_T, fontsize=8)
        self.ax_bars.set_xticks(range(0, self.MAX_T, 5))

    def _freeze_base(self) -> None:
        """Once the layout is frozen: draw everything no sentence changes, without ticks."""
        label = self.ax_bars.xaxis.label  # placed below its tick labels; keep it there
        top = label.get_transform().transform(label.get_position())[1]
        self.ax_bars.xaxis.set_label_coords(
            0.5, self.ax_bars.transAxes.inverted().transform((0, top))[1]
        )
        self.ax_map.set_xticks([])
        self.ax_map.set_yticks([])
        self.ax_bars.set_xticks([])
        self.canvas.draw()
        self._base = self.canvas.copy_from_bbox(self.fig.bbox)
        self.invalidate()
        self.redraw()


class AblationExplorer(Explorer):
    """Lesson 06: shipped checkpoints side by side: position scheme, heads, and the scale.

    Everything is computed once at construction on 100 validation sequences. The scale has
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

    def __init__(self, num_sequences: int = 100):
        from course_lib import data, heads, train
        from course_lib.ablation import flip_scale
        from course_lib.model import load_pretrained

        self.detectors = tuple(heads.DETECTORS)
        ids = data.load_split("valid")[:num_sequences]  # (N, T)
        self.results = {}
        with one_thread():
            for _, name in self.SETTINGS:
                model = load_pretrained(name)
                for as_trained in (True, False):
                    m = model if as_trained else flip_scale(model)
                    self.results[(name, as_trained)] = {
                        "scale": m.config.scale,
                        "val_loss": train.evaluate(m, ids),
                        "scores": heads.detector_scores(m, ids),
                    }
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

    Every head, in both modes, is knocked out once at construction (the losses on 200
    validation sequences and the samples) and its picture drawn, so each move only switches
    pictures.
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

    def __init__(self, model=None, num_sequences: int = 200):
        from course_lib import ablation, data
        from course_lib.model import generate, load_pretrained

        self.model = load_pretrained("rope-h4") if model is None else model
        self.skills = ablation.ALL_SKILLS
        cfg = self.model.config
        self.heads = [(layer, h) for layer in range(cfg.num_layers) for h in range(cfg.num_heads)]
        ids = data.load_split("valid")[:num_sequences]  # (N, T)
        prompts = torch.stack([data.encode(text) for text in self.PROMPTS.values()])  # (3, 8)
        self.tables, self.samples, self._pictures = {}, {}, {}
        with one_thread():
            for _, mode in self.MODES:
                labels, table = ablation.ablation_table(self.model, ids, mode=mode,
                                                        skills=self.skills)  # fmt: skip
                self.tables[mode] = table  # (1 + heads, skills), row 0 the baseline
                for label in labels:
                    with ablation.knockout(self.model, [label] if label else [], mode):
                        sampled = generate(self.model, prompts, self.NUM_TOKENS)  # (3, 16)
                    self.samples[(label, mode)] = dict(
                        zip(self.PROMPTS, map(data.to_tokens, sampled), strict=True)
                    )
        self.prompt_len = prompts.shape[1]
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
        # draw every setting now (18 pictures): text is slow to draw, a move then only swaps
        for mode in (value for _, value in self.MODES):
            for _, head in options:
                self.controls["mode"].value, self.controls["head"].value = mode, head
        self.controls["mode"].value, self.controls["head"].value = "zero", "none"

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
        samples = self.samples[(head, v["mode"])]
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

    def redraw(self) -> None:
        """Each setting's picture is drawn once, then kept: the samples' text is slow to draw
        (about 20 ms a line)."""
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
