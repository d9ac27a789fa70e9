"""Lesson 12's explorers, on your model of lesson 11b: where each head looks after any saved
step of training (TrainedHeadsExplorer), and what knocking one head out does to each skill
and to the lines the model writes (KnockoutExplorer)."""

import html
import re

import ipywidgets
import numpy as np
import torch
from matplotlib.patches import Rectangle

from course_lib import viz
from course_lib.runtime import one_thread
from course_lib.widgets.base import Explorer, choice_buttons, slider, text_box, toggle_buttons
from course_lib.widgets.ticks import TickStamp

# stretches of the toy language that each ask for one skill, and one that asks for the copy
# twice (a preposition comes back, and the noun after its first use with it)
TRAINED_EXAMPLES = {  # lines 0, 9, 1 and 12 of the validation split, 32 tokens each
    "the copy": "Fishes with dog near fish see birds ( bird ) .fbb Dogs near fish eat fishes "
    "[ bird [ cat ( dog ) ] ] .bcd Bird with dog near fish near",
    "the song": "Fishes with bird near cats near cats sing mi fa re mi fa re mi fa re ( birds ) "
    ".ccb Fish near cats with bird sings so la so la [",
    "the subject": "Bird with birds near fishes chases cats [ fish ] .fcf Fishes with birds see "
    "cat ( bird [ fishes ] ) .cbf Fishes with birds hear cat [ cats ( cat",
    "brackets": "Fish near birds sees cats ( fish ( birds [ bird ] ) ) .fbb Dogs near birds with "
    "fishes near birds eat bird ( dog [ dogs [ cat ] ]",
}
# lines to type into the text box, in the toy vocabulary, then one with a word it lacks
SAMPLE_SENTENCES = (
    "Dogs near cat chase cats [ birds [ cats ] ] .cbc Cats near cat near cat",
    "Bird near dog sings mi ka mi ka ( cat ) .bdc",
)
TYPED_SAMPLES = (*SAMPLE_SENTENCES, "Dogs chase the cat .")


def fresh_sentences(count: int, seed: int = 6) -> list[str]:
    """`count` different stretches of the toy language, 8 to 32 tokens: what benchmarks type
    to time a sentence the explorer has not seen (lesson 12)."""
    import random

    from course_lib import corpus, language

    rng = random.Random(seed)
    lines = [language.sample_line(rng, corpus.SEQ_LEN)[0] for _ in range(count)]
    return list(dict.fromkeys(" ".join(line[: 8 + (7 * i) % 25]) for i, line in enumerate(lines)))


class TrainedHeadsExplorer(Explorer):
    """Lesson 12: where each head of your model looks on a line, after any saved step.

    `run` is lesson 11b's run read back (course_lib.capstone.load_run; without it, the course's
    stand-in, capstone.stand_in). Each line and step costs
    one forward pass the first time it is shown, then it is kept. Marks on the map are the
    (query, key) cells of each detector of course_lib.corpus: a head doing that job lights them.
    """

    PICTURE = (
        "Attention map of one head of your model on a line (rows queries, columns keys), with "
        "the chosen query's weights as bars"
    )
    MAX_T = 32
    SHOWN = ("previous", "induction", "subject", "bracket", "song")  # detectors marked

    def __init__(self, run=None, examples=None):
        from course_lib import capstone, corpus

        self.corpus = corpus
        self.run = capstone.stand_in() if run is None else run
        self.steps = sorted(self.run.steps)
        self.example_ids = {name: corpus.encode(text).tolist()
                            for name, text in (examples or TRAINED_EXAMPLES).items()}  # fmt: skip
        self.models, self.seen = {}, {}
        first = next(iter(self.example_ids))
        self.ids, self.line_name = self.example_ids[first], f"{first} line"
        self.message = ipywidgets.HTML()
        fig, (self.ax_map, self.ax_bars) = viz.new_figure(11.0, 6.4, ncols=2, width_ratios=[1, 1.1])
        self.image_map = self.ax_map.imshow(np.zeros((2, 2)), vmin=0, vmax=1, cmap="viridis",
                                            aspect="auto")  # fmt: skip
        fig.colorbar(self.image_map, ax=self.ax_map, fraction=0.05, pad=0.02).set_label(
            "attention weight"
        )
        fig.get_layout_engine().set(wspace=0.06)
        self.row_box = Rectangle((-0.5, -0.5), 1, 1, fill=False, edgecolor="white", linewidth=2)
        self.ax_map.add_patch(self.row_box)
        looks = {"previous": ("s", viz.ORANGE), "induction": ("o", viz.VERMILLION),
                 "subject": ("D", viz.PALETTE[5]), "bracket": ("^", viz.PALETTE[4]),
                 "song": ("v", viz.GREEN)}  # fmt: skip
        # small hollow marks, inside their cell: the weight under them stays visible
        self.marks = {
            name: self.ax_map.scatter([], [], s=34, marker=looks[name][0], facecolors="none",
                                      edgecolors=looks[name][1], linewidths=1.4, label=name)
            for name in self.SHOWN
        }  # fmt: skip
        self.ax_map.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncols=5, fontsize=9,
                           frameon=False, handletextpad=0.2, columnspacing=0.8,
                           markerscale=1.5)  # fmt: skip
        self.ax_map.set_xlabel("key")
        self.ax_map.set_ylabel("query")
        self.bars = self.ax_bars.bar(range(self.MAX_T), [0.0] * self.MAX_T, color=viz.BLUE)
        self.ax_bars.set_ylim(0, 1)
        self.ax_bars.set_ylabel("attention weight")
        self.ax_bars.set_xlabel("key")
        layers, heads = self.run.model.config.num_layers, self.run.model.config.num_heads
        controls = {
            "example": choice_buttons("line", list(self.example_ids), first),
            "sentence": text_box(
                "your line", "or type a line in the toy vocabulary, then Enter", "560px"
            ),
            "step": slider(
                "after training step",
                250 if 250 in self.steps else self.steps[-1],  # the step before the copy's jump
                self.steps[0],
                self.steps[-1],
                self.steps[1] - self.steps[0],
            ),  # fmt: skip
            "layer": toggle_buttons("layer", list(range(layers)), layers - 1, button_width="40px"),
            "head": toggle_buttons("head", list(range(heads)), heads - 1, button_width="40px"),
            "query": slider("query position", 27, 0, self.MAX_T - 1),
        }
        controls["sentence"].sample_values = (*fresh_sentences(40), *TYPED_SAMPLES)
        self._seen = {"example": first, "sentence": ""}
        self._shown = None
        self.words = TickStamp(fig, fontsize=10)
        self._base = None
        self._reserve_label_room()
        self._refitting = False
        super().__init__(
            controls, fig,
            dynamic=[self.image_map, self.row_box, *self.bars, *self.marks.values()],
            above_readout=[self.message],
            rows=[["example"], ["sentence"], ["step"], ["layer", "head", "query"]],
        )  # fmt: skip
        self._freeze_base()

    def _weights(self, step: int) -> list:
        """Per-layer (H, T, T) weights of the line shown, after `step`: kept once computed."""
        key = (tuple(self.ids), step)
        if key not in self.seen:
            if step not in self.models:
                self.models[step] = self.run.at(step)
            with one_thread(), torch.no_grad():
                _, weights = self.models[step](torch.tensor([self.ids]), return_weights=True)
            self.seen[key] = [w[0] for w in weights]
        return self.seen[key]

    def _pick_line(self, v) -> None:
        if v["example"] != self._seen["example"]:
            self._seen["example"] = v["example"]
            self.ids, self.line_name = self.example_ids[v["example"]], f"{v['example']} line"
            self.message.value = ""
        elif v["sentence"] != self._seen["sentence"]:
            self._seen["sentence"] = v["sentence"]
            if not v["sentence"].strip():
                return
            try:
                ids = self.corpus.encode(v["sentence"]).tolist()
                if len(ids) > self.MAX_T:
                    raise ValueError(f"text: {len(ids)} tokens, more than {self.MAX_T}")
            except ValueError as err:
                text = str(err).split("; the vocabulary")[0].removeprefix("text: ")
                self.message.value = (
                    f"<span style='color:#b00'><b>Not shown:</b> {html.escape(text)}. "
                    "Use the toy vocabulary (Dog, cats, near, with, eats, sing, la, ( ) [ ], "
                    ".dcb, ...); the picture still shows the previous line.</span>"
                )
                return
            self.ids, self.line_name = ids, "your line"
            self.message.value = "<i>Showing your line.</i>"

    def update(self) -> None:
        v = self.values()
        self._pick_line(v)
        tokens = self.corpus.to_tokens(self.ids)
        T = len(tokens)
        if self._shown != self.ids:  # a new line: new size, labels and marks
            self._shown = self.ids
            self._set_static(tokens)
            self._refitting = True
            try:
                self.controls["query"].max = T - 1
            finally:
                self._refitting = False
            v = self.values()
        query = v["query"]
        weights = self._weights(v["step"])[v["layer"]][v["head"]]  # (T, T)
        self.image_map.set_data(weights.numpy())
        self.row_box.set_bounds(-0.5, query - 0.5, T, 1)
        row = weights[query]  # (T,)
        for i, bar in enumerate(self.bars):
            bar.set_height(float(row[i]) if i < T else 0.0)
        top = row.topk(min(3, T))
        pairs = zip(top.values.tolist(), top.indices.tolist(), strict=True)
        listed = ", ".join(f"'{tokens[k]}' ({k}) {w:.2f}" for w, k in pairs)
        self.show_readout(
            f"after step {v['step']}, layer {v['layer']}, head {v['head']}, query {query} "
            f"'{tokens[query]}'",
            f" looks most at: {listed}",
            "marks: the (query, key) cells of each detector on this line",
        )
        self.ax_map.set_title(f"{self.line_name}: layer {v['layer']}, head {v['head']}, after "
                              f"step {v['step']}\n(white box: the query; marks: the detectors' "
                              "cells)", fontsize=10, pad=22)  # fmt: skip
        self.ax_bars.set_title(f"query {query} '{tokens[query]}': its weights over the keys",
                               fontsize=10)  # fmt: skip
        self.invalidate(key=(tuple(self.ids), v["step"], v["layer"], v["head"], query))

    def state(self) -> dict:
        """Adds the line's tokens, the map shown ("weights", (T, T)), the boxed query row and
        its bars, each detector's marked (query, key) cells, and the message as plain text."""
        T = len(self.ids)
        marks = {
            name: [(int(q), int(k)) for k, q in np.asarray(scatter.get_offsets())]
            for name, scatter in self.marks.items()
        }
        return super().state() | {
            "tokens": self.corpus.to_tokens(self.ids),
            "weights": np.asarray(self.image_map.get_array(), dtype=float).copy(),
            "query": round(self.row_box.get_y() + 0.5),
            "bars": [bar.get_height() for bar in self.bars[:T]],
            "marks": marks,
            "message": html.unescape(re.sub(r"<[^>]+>", "", self.message.value)),
        }

    def _on_change(self, change) -> None:
        if not self._refitting:  # the query's range just followed a new line
            super()._on_change(change)

    def settings(self) -> dict[str, list]:
        """Every line, layer and head; the steps before and after the copy's jump in lesson 11b
        and the last; queries 12 and 27, the copy line's repeated prepositions: 192 pictures.
        A static page cannot type, so no text box."""
        steps = sorted({*(s for s in (250, 300) if s in self.steps), self.steps[-1]})
        return super().settings(sentence=None, step=steps, query=[12, self._start["query"]])

    def _set_static(self, tokens) -> None:
        T = len(tokens)
        self.image_map.set_extent((-0.5, T - 0.5, T - 0.5, -0.5))
        self.ax_map.set_xlim(-0.5, T - 0.5)
        self.ax_map.set_ylim(T - 0.5, -0.5)
        self.ax_bars.set_xlim(-0.6, T - 0.4)
        for name, scatter in self.marks.items():
            pairs = self.corpus.DETECTORS[name](tokens)
            scatter.set_offsets([(k, q) for q, k in pairs] if pairs else np.empty((0, 2)))
        self.invalidate()

    def redraw(self) -> None:
        if self._background is None and self._base is not None:
            # a new picture: the line's words stamped over the base, a few milliseconds
            self.canvas.restore_region(self._base)
            renderer = self.canvas.get_renderer()
            tokens = self.corpus.to_tokens(self.ids)
            self.words.stamp(renderer, self.ax_map, "x90", tokens)
            self.words.stamp(renderer, self.ax_map, "y", tokens)
            self.words.stamp(renderer, self.ax_bars, "x90", tokens)
            for text in (self.ax_map.title, self.ax_bars.title):
                text.draw(renderer)
            self._background = self.canvas.copy_from_bbox(self.fig.bbox)
        super().redraw()

    def _reserve_label_room(self) -> None:
        vocab = self.corpus.VOCAB
        wide_x, wide_y = self.words.widest(vocab, "x90"), self.words.widest(vocab, "y")
        self.ax_map.set_xticks(range(self.MAX_T), [wide_x] * self.MAX_T, rotation=90, fontsize=10)
        self.ax_map.set_yticks(range(self.MAX_T), [wide_y] * self.MAX_T, fontsize=10)
        self.ax_bars.set_xticks(range(self.MAX_T), [wide_x] * self.MAX_T, rotation=90, fontsize=10)
        self.ax_map.set_title("the subject line: layer 0, head 0, after step 600\n(white box: "
                              "the query; marks: the detectors' cells)", fontsize=10,
                              pad=22)  # fmt: skip

    def _freeze_base(self) -> None:
        # the axis labels were placed beyond the room kept for the tick labels; keep them there
        # when the ticks go (the tokens are stamped per picture, see redraw)
        for ax in (self.ax_map, self.ax_bars):
            label = ax.xaxis.label
            top = label.get_transform().transform(label.get_position())[1]
            ax.xaxis.set_label_coords(0.5, ax.transAxes.inverted().transform((0, top))[1])
        label = self.ax_map.yaxis.label
        left = label.get_transform().transform(label.get_position())[0]
        self.ax_map.yaxis.set_label_coords(
            self.ax_map.transAxes.inverted().transform((left, 0))[0], 0.5
        )
        self.ax_map.set_xticks([])
        self.ax_map.set_yticks([])
        self.ax_bars.set_xticks([])
        titles = (self.ax_map.title, self.ax_bars.title)
        kept = [t.get_text() for t in titles]
        for t in titles:  # titles change with the setting: stamped per picture, see redraw
            t.set_text("")
        self.canvas.draw()
        self._base = self.canvas.copy_from_bbox(self.fig.bbox)
        for t, text in zip(titles, kept, strict=True):
            t.set_text(text)
        self.invalidate()
        self.redraw()


class KnockoutExplorer(Explorer):
    """Lesson 12: knock one head of your model out; each skill's excess over the floor (the
    axis follows the bars shown), and the lines your `generate` writes from four prompts, read
    by the language's rule check. Every head's rise is lesson 12's knock-out figure, not here.

    `table` is ablation.excess_table's (labels, table) for `skills`, as the lesson measured it
    (measured here when not given); without a model, the course's stand-in's (capstone). The
    lines are made the first time a setting is shown, then kept.
    """

    PICTURE = (
        "Bars of each skill's excess over the floor with the chosen head knocked out, nothing "
        "knocked out marked, and four lines the model wrote with the first broken rule marked"
    )
    PROMPTS = (  # starts of lines of the validation split, 6 tokens each
        "Cats near fish with dog near",
        "Fishes with dog near fish see",
        "Bird near dog sings mi ka",
        "Fish near birds sees cats (",
    )
    NUM_TOKENS = 14
    TEMPERATURES = (("0 (greedy)", 0.0), ("1", 1.0))

    SKILLS = ("all", "subject", "induction", "object", "song", "bracket", "mark")

    def __init__(self, model=None, table=None, skills=SKILLS, generate=None):
        from course_lib import ablation, capstone, corpus, sampling
        from course_lib.model import generate as course_generate

        self.ablation, self.corpus, self.sampling = ablation, corpus, sampling
        self.model = capstone.stand_in().model if model is None else model
        self.skills = tuple(skills)
        from course_lib.exercises import by_name

        # the course's own (earlier_work hands it out for a generate not written yet)
        self.yours = generate not in (None, course_generate, by_name("generate").reference)
        self.generate = course_generate if generate is None else generate
        if table is None:
            with one_thread():
                table = ablation.excess_table(self.model, skills=self.skills)
        labels, values = table
        self.heads = list(labels[1:])
        self.table = torch.as_tensor(values, dtype=torch.float64)  # (1 + heads, skills)
        self.lines, self._pictures, self.note = {}, {}, ""
        fig, (self.ax_bars, self.ax_text) = viz.new_figure(11.0, 6.0, nrows=2,
                                                           height_ratios=[3.2, 1.3])  # fmt: skip
        self.ax_text.set_axis_off()
        self.text_title = self.ax_text.set_title("", fontsize=10, loc="left")
        self.texts = [
            self.ax_text.text(0.0, 0.85 - 0.27 * i, "", fontsize=9.5, family="monospace",
                              transform=self.ax_text.transAxes, va="center")
            for i in range(len(self.PROMPTS))
        ]  # fmt: skip
        for text in self.texts:  # a long line must not widen the layout's margins
            text.set_in_layout(False)
        x = np.arange(len(self.skills))
        self.bars = self.ax_bars.bar(x, [0.0] * len(x), color=viz.PALETTE[0], width=0.6)
        self.base_marks = self.ax_bars.scatter(
            x, self.table[0].numpy(), marker="_", s=900, linewidths=2.5, color="black",
            zorder=3, label="nothing knocked out",
        )  # fmt: skip
        self.values_shown = [
            self.ax_bars.text(i, 0.0, "", ha="center", va="bottom", fontsize=9) for i in x
        ]  # each bar's excess, above it
        self.ax_bars.axhline(0, color="0.4", lw=1)
        self.ax_bars.set_xticks(x, self.skills)
        self.ax_bars.set_ylabel("excess over the floor (nats)")
        self.ax_bars.legend(fontsize=9, loc="upper left", markerscale=0.4)
        self.bars_title = self.ax_bars.set_title("each skill's excess, nothing knocked out",
                                                 fontsize=10)  # fmt: skip
        options = [("none", "none")] + [(f"L{a} H{b}", (a, b)) for a, b in self.heads]
        controls = {
            # the picture starts with the last head out: the copy's head in lesson 12's model
            "head": choice_buttons("knock out", options, self.heads[-1]),
            "temperature": choice_buttons("temperature", self.TEMPERATURES, 0.0),
        }
        super().__init__(controls, fig, dynamic=[*self.bars, *self.values_shown, self.base_marks,
                                                 self.bars_title, self.text_title,
                                                 *self.texts])  # fmt: skip

    def _lines(self, head, temperature: float) -> list:
        """(prompt tokens, new tokens, first broken position or None, its skill) per prompt,
        written with `head` knocked out: made when first shown."""
        key = (head, temperature)
        if key not in self.lines:
            prompts = torch.stack([self.corpus.encode(p) for p in self.PROMPTS])  # (4, 6)
            with one_thread(), self.ablation.knockout(self.model, [head] if head else []):
                tried = self._generate(prompts, temperature)
            rows = []
            for row in tried:
                tokens = self.corpus.to_tokens(row)
                at = self.sampling.rule_check(tokens).broken
                skill = None if at is None else self.sampling.broken_skill(tokens, at)
                rows.append((tokens[: prompts.shape[1]], tokens[prompts.shape[1] :], at, skill))
            self.lines[key] = rows
        return self.lines[key]

    def _generate(self, prompts, temperature):
        from course_lib.exercises.stub import attempt
        from course_lib.model import generate as course_generate

        tried = attempt("generate", self.generate, self.model, prompts, self.NUM_TOKENS,
                        temperature=temperature, seed=0)  # fmt: skip
        if tried.ran and isinstance(tried.value, torch.Tensor):
            whose = "your" if self.yours else "the course's"
            self.note = f"written by {whose} generate"
            return tried.value
        self.note = f"written by the course's generate ({tried.reason})"
        return course_generate(self.model, prompts, self.NUM_TOKENS, temperature=temperature,
                               seed=0)  # fmt: skip

    def update(self) -> None:
        v = self.values()
        head = None if v["head"] == "none" else tuple(v["head"])
        row = self.table[0 if head is None else 1 + self.heads.index(head)]  # (skills,)
        for bar, text, height in zip(self.bars, self.values_shown, row.tolist(), strict=True):
            bar.set_height(height)
            text.set_position((bar.get_x() + bar.get_width() / 2, max(height, 0.0)))
            text.set_text(f"{height:.2f}")
        self.ax_bars.set_ylim(*self.bar_limits(row))
        self.invalidate(key=self.ax_bars.get_ylim())  # the axis follows the bars shown
        self.rise = row - self.table[0]
        self.written = self._lines(head, v["temperature"])
        for text, (prompt, new, at, skill) in zip(self.texts, self.written, strict=True):
            n = len(prompt)
            shown = new if at is None else new[: at - n + 1]
            verdict = "keeps every rule" if at is None else f"x breaks the {skill} rule"
            text.set_text(f"{' '.join(prompt)} | {' '.join(shown)}   [{verdict}]")
            text.set_color("black" if at is None else viz.VERMILLION)
        what = "nothing knocked out" if head is None else f"layer {head[0]}, head {head[1]} out"
        chosen = "nothing" if head is None else f"L{head[0]} H{head[1]}"
        self.bars_title.set_text(f"each skill's excess, {chosen} knocked out")
        self.text_title.set_text(
            f"{what}, temperature {v['temperature']:g}: the prompt | the new tokens, up to the "
            f"first broken rule ({self.note})"
        )
        self.show_readout(
            f"{what}: ",
            "excess " + ", ".join(f"{s} {float(x):.2f} ({float(d):+.2f})"
                                  for s, x, d in zip(self.skills, row, self.rise, strict=True)),
            "in brackets: the change from nothing knocked out",
        )  # fmt: skip

    def bar_limits(self, row) -> tuple[float, float]:
        """The bar axis for `row`: from 0 (or below the lowest bar) to a little above the
        tallest of its bars and the nothing-knocked-out marks, with room for the numbers."""
        shown = torch.cat([row, self.table[0]])
        low, high = min(float(shown.min()), 0.0), max(float(shown.max()), 0.1)
        return (low - 0.05 * (high - low) if low < 0 else 0.0), 1.15 * high

    def redraw(self) -> None:
        """Each setting's picture is drawn the first time it is shown, then kept."""
        v = self.values()
        key = (v["head"], v["temperature"])
        if key in self._pictures:
            self.show_picture(self._pictures[key])
            return
        super().redraw()
        self._pictures[key] = bytes(self.image.value)

    def state(self) -> dict:
        """Adds the bars (each skill's excess with the chosen knock-out), the baseline, the bar
        axis's limits, the rises of the chosen knock-out and the lines: prompt, new tokens, the
        first broken position (-1: none) and the skill it needed ("": none)."""
        return super().state() | {
            "excess": {s: bar.get_height() for s, bar in zip(self.skills, self.bars, strict=True)},
            "baseline": dict(zip(self.skills, map(float, self.table[0]), strict=True)),
            "bar_axis": tuple(self.ax_bars.get_ylim()),
            "rise": dict(zip(self.skills, map(float, self.rise), strict=True)),
            "lines": [
                {
                    "prompt": " ".join(p),
                    "new": " ".join(n),
                    "broken": -1 if at is None else at,
                    "skill": skill or "",
                }
                for p, n, at, skill in self.written
            ],  # fmt: skip
        }
