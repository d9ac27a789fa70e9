"""Lesson 10's explorer: temperature and top-k against the next-token distribution of a
trained model, and the lines it samples, read against the toy language's rules."""

import numpy as np
import torch

from course_lib import corpus, viz
from course_lib.exercises.stub import attempt
from course_lib.model import generate as course_generate
from course_lib.sampling import WINDOW, language_next, rule_check
from course_lib.widgets.base import Explorer, choice_buttons, choice_slider

# line starts of the valid split, each ending where the next token asks for another skill
PROMPTS = (
    ("object", "Dogs with cats eat"),  # exactly one object is right
    ("verb", "Fishes with dog near fish"),  # another preposition, or one of fishes' verbs
    ("free noun", "Fishes with dog near"),  # any of 8 nouns, equally likely
)
SHOWN = 10  # bars: the model's 10 most likely next tokens
LINES, LINE_LEN = 8, 20  # sampled lines shown, each cut at this many tokens
FONT = 8.0  # the lines' monospace size, points; DejaVu Sans Mono advances 0.602 em a character


class SamplingExplorer(Explorer):
    """The explorer of lesson 10: choose a temperature, a top-k and a prompt; see the distribution
    the sampler draws the next token from (bars) beside the language's own (diamonds), and 8 lines
    sampled after the prompt (below), each read by the toy language's generator: the first token it
    could never have written is marked, and the readout counts the lines that keep every rule.

    The model is the shipped base model of seed 0 unless `model` is given; the lines come from
    your `generate` when it is given and runs, else from the course's (the note says which).
    """

    PICTURE = (
        "Bar chart of the model's 10 most likely next tokens after the prompt, at the chosen "
        "temperature and top-k, with the language's own probability of each as a diamond; "
        "below it, 8 lines sampled after the prompt, the first token that breaks a rule marked"
    )

    TEMPERATURES = (0, 0.2, 0.5, 0.8, 1.0, 1.2, 1.5, 2.0)
    TOP_K = (("all", 0), ("1", 1), ("2", 2), ("3", 3), ("5", 5), ("10", 10))  # 0: all

    def __init__(self, *, generate=None, model=None, seed: int = 0):
        if generate is not None and not callable(generate):
            raise TypeError(
                "generate: expected your generate function (or None for the course's), got "
                f"{type(generate).__name__}"
            )
        if model is None:
            from course_lib.variants import load_trained

            model = load_trained("base", 0)
        self.model, self.mine, self.seed = model, generate, seed
        self._lines = {}
        self._prompt_data = {name: self._read_prompt(text) for name, text in PROMPTS}
        fig, (self.ax, self.ax_lines) = viz.new_figure(7.6, 6.2, nrows=2, height_ratios=[3.0, 2.4])
        x = np.arange(SHOWN)
        self.bars = self.ax.bar(x, np.zeros(SHOWN), color=viz.BLUE, edgecolor="black",
                                linewidth=0.8, label="the sampler draws from")  # fmt: skip
        (self.truth,) = self.ax.plot(x, np.zeros(SHOWN), "D", color="black", ms=7,
                                     linestyle="none", label="the language writes")  # fmt: skip
        self.ax.set_ylim(0, 1.05)
        self.ax.set_xlim(-0.6, SHOWN - 0.4)
        self.ax.set_ylabel("probability of the next token")
        self.ax.legend(loc="upper right", fontsize=9)
        self.ax.grid(True, axis="y", alpha=0.3)
        self.title = self.ax.set_title("")
        self.ax_lines.set_axis_off()
        self.ax_lines.set_xlim(0, 1)
        self.ax_lines.set_ylim(LINES, -1)
        self.lines_title = self.ax_lines.text(0, -0.9, "", fontsize=8.5)
        text = {"fontsize": FONT, "family": "DejaVu Sans Mono", "va": "center"}
        self.line_texts = [self.ax_lines.text(0, i + 0.3, "", **text) for i in range(LINES)]
        self.broken_texts = [
            self.ax_lines.annotate(
                "",
                (0, i + 0.3),
                textcoords="offset points",
                xytext=(0, 0),
                color="white",
                fontweight="bold",
                **text,
                bbox={"facecolor": viz.VERMILLION, "edgecolor": "none", "pad": 0.6},
            )  # fmt: skip
            for i in range(LINES)
        ]
        controls = {
            "temperature": choice_slider("temperature", self.TEMPERATURES, 1.0),
            "top_k": choice_slider("top-k", self.TOP_K, 0),
            "prompt": choice_buttons("prompt", [(n, n) for n, _ in PROMPTS], "object"),
        }
        super().__init__(controls, fig, dynamic=[*self.bars, self.truth, self.title,
                                                 *self.line_texts, *self.broken_texts])  # fmt: skip

    def _read_prompt(self, text: str) -> dict:
        ids = corpus.encode(text)[None]  # (1, T0)
        with torch.no_grad():
            logits = self.model(ids)[0, -1]  # (V,)
        order = torch.argsort(logits, descending=True)
        truth = language_next(text.split())
        return {"ids": ids, "logits": logits, "order": order, "truth": truth,
                "labels": corpus.to_tokens(order[:SHOWN])}  # fmt: skip

    def distribution(self, prompt: str, temperature, top_k) -> torch.Tensor:
        """The (V,) distribution the sampler draws from after the prompt: one-hot at
        temperature 0, else softmax(logits / temperature) over the top_k largest logits."""
        logits = self._prompt_data[prompt]["logits"]
        if top_k is not None:
            logits = logits.masked_fill(logits < torch.topk(logits, top_k).values[-1], -torch.inf)
        if temperature == 0:
            return torch.nn.functional.one_hot(logits.argmax(), len(logits)).float()
        return torch.softmax(logits / temperature, dim=-1)

    def lines(self, prompt: str, temperature, top_k) -> tuple[torch.Tensor, str]:
        """LINES sampled lines after the prompt (kept per setting), and whose sampler drew them."""
        key = (prompt, temperature, top_k)
        if key not in self._lines:
            ids = self._prompt_data[prompt]["ids"].repeat(LINES, 1)  # (LINES, T0)
            args = (self.model, ids, LINE_LEN - ids.shape[1])
            kwargs = {"temperature": temperature, "top_k": top_k, "seed": self.seed}
            whose = "the course's generate"
            if self.mine is not None:
                tried = attempt("generate", self.mine, *args, **kwargs)
                ok = tried.ran and isinstance(tried.value, torch.Tensor)
                ok = ok and tried.value.shape == (LINES, LINE_LEN)
                if ok:
                    self._lines[key] = (tried.value, "your generate")
                    return self._lines[key]
                why = tried.reason if not tried.ran else "it returned another shape"
                whose = f"the course's generate (yours: {why})"
            self._lines[key] = (course_generate(*args, **kwargs), whose)
        return self._lines[key]

    def update(self) -> None:
        values = self.values()
        prompt, temperature = values["prompt"], values["temperature"]
        top_k = values["top_k"] or None  # 0 keeps every token
        data = self._prompt_data[prompt]
        if getattr(self, "_ticks_for", None) != prompt:
            self.ax.set_xticks(np.arange(SHOWN), data["labels"], rotation=30, fontsize=9)
            self._ticks_for = prompt
            self.invalidate(key=prompt)
        probs = self.distribution(prompt, temperature, top_k)
        shown = probs[data["order"][:SHOWN]].tolist()
        for bar, p in zip(self.bars, shown, strict=True):
            bar.set_height(p)
        self.truth.set_ydata([data["truth"].get(t, 0.0) for t in data["labels"]])
        never = sum(p for i, p in enumerate(probs.tolist())
                    if corpus.VOCAB[i] not in data["truth"])  # fmt: skip
        text = dict(PROMPTS)[prompt]
        k = "all" if top_k is None else top_k
        self.title.set_text(f'after "{text}": temperature {temperature:g}, top-k {k}')
        ids, whose = self.lines(prompt, temperature, top_k)
        checks = [rule_check(corpus.to_tokens(row)) for row in ids]
        kept = sum(c.broken is None for c in checks)
        head = slice(data["ids"].shape[1], data["ids"].shape[1] + WINDOW)  # the table's starts
        starts = len({tuple(row[head].tolist()) for row in ids})
        self.lines_title.set_text(
            f'{LINES} lines sampled after "{text}"; x: a broken rule, its first token in vermillion'
        )
        self._draw_lines(ids, checks, data["ids"].shape[1])
        lead = f"temperature {temperature:g}, top-k {k}, prompt {prompt}"
        rest = (
            f": {100 * never:.1f}% of the next token's probability is on tokens the language "
            f"never writes here; {kept} of {LINES} sampled lines keep every rule; "
            f"{starts} different start{'' if starts == 1 else 's'} (first {WINDOW} new tokens)"
        )
        self._kept, self._never, self._distinct = kept, never, starts
        self.show_readout(lead, rest, note=f"Lines drawn by {whose}, seed {self.seed}.")

    def _draw_lines(self, ids, checks, prompt_len: int) -> None:
        self._lines_shown = []
        for row, check, line, broken in zip(ids, checks, self.line_texts, self.broken_texts,
                                            strict=True):  # fmt: skip
            tokens = corpus.to_tokens(row)
            mark = "ok" if check.broken is None else "x "
            head = f"{mark}  "
            said = head + " ".join(tokens[prompt_len:])
            line.set_text(said)
            self._lines_shown.append(said)
            if check.broken is None:
                broken.set_text("")
                continue
            before = len(head) + len(" ".join(tokens[prompt_len : check.broken]))
            before += 1 if check.broken > prompt_len else 0  # the space before the token
            broken.set_text(tokens[check.broken])
            broken.xyann = (before * 0.602 * FONT, 0)

    def state(self) -> dict:
        """Adds the bars, the dots, the tick labels and the counts behind the readout."""
        return super().state() | {
            "bars": [bar.get_height() for bar in self.bars],
            "truth": [float(y) for y in self.truth.get_ydata()],
            "labels": [t.get_text() for t in self.ax.get_xticklabels()],
            "kept": self._kept,
            "never": self._never,
            "distinct": self._distinct,
            "lines": list(self._lines_shown),
            "broken": [t.get_text() for t in self.broken_texts],
        }
