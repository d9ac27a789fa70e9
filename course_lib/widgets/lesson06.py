"""Lesson 06's explorers: a trained model's heads on examples or typed text; the ablations."""

import html
import re

import ipywidgets
import numpy as np
import torch
from matplotlib.patches import Rectangle

from course_lib import viz
from course_lib.attention import one_thread
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
        super().__init__(
            controls,
            fig,
            dynamic=[self.image_map, self.row_box, *self.bars, *self.marks.values()],
            above_readout=[self.message],
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
        query = min(v["query"], T - 1)
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
            f"{' (slider past the end: last token)' if v['query'] > query else ''} "
            f"looks most at: {listed}",
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

    def settings(self) -> dict[str, list]:
        """Every example, layer and head, every 8th query: 192 settings. Typing a sentence
        needs a kernel, so a static page leaves the text box out."""
        return super().settings(sentence=None, query=self.every("query", 8))

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
    checkpoint's own weights run with the scale flipped, see model.flip_scale.
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
        from course_lib.model import flip_scale, load_pretrained

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
        fig, (self.ax_det, self.ax_loss, self.ax_map) = viz.new_figure(
            12.0, 3.6, ncols=3, width_ratios=[1, 0.5, 1.4]
        )
        x = range(len(self.detectors))
        colors = [viz.DETECTOR_STYLES[d]["color"] for d in self.detectors]
        self.det_bars = self.ax_det.bar(x, [0.0] * len(x), color=colors)
        # references drawn after the bars (dynamic artists), so a taller bar never hides them
        ref_marks = self.ax_det.scatter(
            x, [float(ref["scores"][d].max()) for d in self.detectors], marker="_", s=900,
            color="black", zorder=3,
        )  # fmt: skip
        self.ax_det.set_xticks(list(x), self.detectors)
        self.ax_det.set_ylim(0, 1.05)
        self.ax_det.set_ylabel("best head's score")
        self.ax_det.set_title("detector scores (black: RoPE, 4 heads)", fontsize=10)
        losses = [r["val_loss"] for r in self.results.values()]
        (self.loss_bar,) = self.ax_loss.bar([0], [0.0], color="tab:gray")
        ref_line = self.ax_loss.axhline(
            ref["val_loss"], color="black", ls="--", label="reference:\nRoPE, 4 heads"
        )
        self.ax_loss.set_ylim(1.0, max(losses) * 1.2)  # room for the legend above every bar
        self.ax_loss.set_xticks([])
        self.ax_loss.set_ylabel("validation loss (nats)")
        self.ax_loss.legend(fontsize=8, loc="upper left")
        self.ax_loss.set_title("loss", fontsize=10)
        rows = [f"{d} L{layer}" for d in self.detectors for layer in range(2)]
        self.mesh = self.ax_map.imshow(torch.zeros(6, 8).numpy(), vmin=0, vmax=1, cmap="viridis",
                                       aspect="auto")  # fmt: skip
        self.ax_map.set_yticks(range(6), rows, fontsize=8)
        self.ax_map.set_xticks(range(8), [str(h) for h in range(8)])
        self.ax_map.set_xlabel("head (blank: the model has fewer)")
        self.ax_map.set_title("every head's score", fontsize=10)
        fig.colorbar(self.mesh, ax=self.ax_map)
        controls = {
            "setting": choice_buttons("model", self.SETTINGS, "rope-h4"),
            "scale": checkbox("1/sqrt(d) scale as trained (untick: flip it)", True),
        }
        super().__init__(
            controls, fig, dynamic=[*self.det_bars, ref_marks, self.loss_bar, ref_line, self.mesh]
        )

    def update(self) -> None:
        v = self.values()
        result = self.results[(v["setting"], v["scale"])]
        best = [float(result["scores"][d].max()) for d in self.detectors]
        for bar, height in zip(self.det_bars, best, strict=True):
            bar.set_height(height)
        self.loss_bar.set_height(result["val_loss"])
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
        """Adds the bars: the best head's score per detector and the validation loss; every
        head's scores as drawn ("table", (detectors x layers, 8), NaN where no head); and
        whether the attention shown runs with the 1/sqrt(d) scale."""
        return super().state() | {
            "detector_scores": {
                d: bar.get_height() for d, bar in zip(self.detectors, self.det_bars, strict=True)
            },
            "val_loss": self.loss_bar.get_height(),
            "table": np.asarray(self.mesh.get_array(), dtype=float).copy(),
            "uses_scale": bool(self.uses_scale),
        }
