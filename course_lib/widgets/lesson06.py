"""Lesson 06's first explorer: a trained model's heads on examples or typed text (the
ablations are in lesson06_ablation)."""

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
    choice_buttons,
    slider,
    text_box,
    toggle_buttons,
)
from course_lib.widgets.ticks import TickStamp

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

    Each example and each typed sentence costs one forward pass the first time it is shown
    (heads.sentence_attention), then it is kept. Marks on the map are the (query, key) cells
    each detector scores: a head doing that job lights them.
    """

    PICTURE = (
        "Attention map of one head of the trained model on the sentence (rows queries, "
        "columns keys), with the chosen query's weights as bars"
    )

    MAX_T = 32

    def __init__(self, model=None, examples=None):
        from course_lib import data, heads
        from course_lib.model import load_pretrained

        self.data, self.heads, self.detectors = data, heads, heads.DETECTORS
        self.model = load_pretrained("rope-h4") if model is None else model
        self.example_ids = {
            name: data.encode(text).tolist()
            for name, text in (examples or TRAINED_EXAMPLES).items()
        }
        self.seen = {}  # every sentence shown so far (examples and typed), by ids
        first = next(iter(self.example_ids))
        self.current = self._run(self.example_ids[first])
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
            "example": choice_buttons("example", list(self.example_ids), first),
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
        # tick labels are stamped from pictures of the vocabulary (TickStamp): drawing 64
        # words with matplotlib took most of the time of showing a new sentence
        self.words = TickStamp(fig, fontsize=8)
        self.numbers = TickStamp(fig)
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
        """Tokens, per-layer (H, T, T) weights and detector pairs of one sentence: one forward
        pass the first time it is shown, kept after."""
        key = tuple(ids)
        if key not in self.seen:
            with one_thread():
                self.seen[key] = self.heads.sentence_attention(self.model, ids)
        return self.seen[key]

    def _pick_source(self, v) -> None:
        if v["example"] != self._seen["example"]:
            self._seen["example"] = v["example"]
            self.current = self._run(self.example_ids[v["example"]])
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
            self.current = self._run(ids)  # one forward pass per new sentence
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
        shortest = min(len(ids) for ids in self.example_ids.values())
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
