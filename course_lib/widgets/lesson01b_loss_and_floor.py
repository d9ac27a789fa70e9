"""Lesson 01b_loss_and_floor's explorer: walk along a line and set the first model's
next-token distribution beside the exact one, with what it pays there above the floor."""

import math

import torch

from course_lib import bigram, corpus, language, viz
from course_lib.widgets.base import Explorer, slider

ROWS = 8  # tokens shown at each position: the likeliest under either distribution


class NextTokenExplorer(Explorer):
    """Lesson 01b_loss_and_floor: at each position of a validation line, the exact
    next-token distribution (the program's) and a model's, for the tokens either finds likely.

    model: a callable from ids (1, T) to logits (1, T, V), such as the lesson's trained
    Bigram; by default a Bigram of the course's pieces, trained with bigram.RECIPE from seed 0.
    """

    PICTURE = "Paired bar chart of the exact and the model's next-token probabilities"

    def __init__(self, model=None, *, line: int = 2):
        ids = corpus.load_split("valid")
        if isinstance(line, bool) or not isinstance(line, int) or not 0 <= line < len(ids):
            raise ValueError(f"line: expected a line number in [0, {len(ids)}), got {line!r}")
        if model is not None and not callable(model):
            raise TypeError(f"model: expected a callable model, got {type(model).__name__}")
        if model is None:
            with torch.random.fork_rng(devices=[]):  # the lesson's own random state is left alone
                torch.manual_seed(bigram.RECIPE.seed)
                model = bigram.Bigram()
            bigram.train_bigram(model)
        self.tokens = corpus.to_tokens(ids[line])
        self.exact, self.skills = language.next_token_distributions(self.tokens)
        with torch.no_grad():
            logits = model(ids[line : line + 1])[0, :-1]  # (T - 1, V)
        self.model_probs = torch.softmax(logits.double(), dim=-1)  # (T - 1, V)
        fig, self.ax = viz.new_figure(7.2, 3.9)
        rows = range(ROWS)
        self.exact_bars = self.ax.barh([r + 0.2 for r in rows], [0] * ROWS, height=0.4,
                                       color=viz.BLUE, label="exact (the program's)")  # fmt: skip
        self.model_bars = self.ax.barh([r - 0.2 for r in rows], [0] * ROWS, height=0.4,
                                       color=viz.ORANGE, hatch="//",
                                       label="the model's")  # fmt: skip
        self.ax.set_xlim(0, 1.05)
        self.ax.set_ylim(-0.6, ROWS - 0.4)
        self.ax.set_xlabel("probability of the next token")
        self.ax.legend(fontsize=8, loc="lower right")
        self.ax.grid(True, axis="x", alpha=0.3)
        # fixed margins, wide enough for the longest label ("chases (next)") at every position
        fig.set_layout_engine("none")
        self.ax.set_position([0.19, 0.13, 0.78, 0.78])  # left, bottom, width, height
        controls = {"position": slider("position t", 16, 0, len(self.exact) - 1)}
        super().__init__(controls, fig, dynamic=[*self.exact_bars, *self.model_bars])

    def shown(self, t: int) -> list[str]:
        """The tokens drawn at position t: the exact distribution's, likeliest first, then the
        model's likeliest, up to ROWS; the line's own next token always among them."""
        exact = sorted(self.exact[t].items(), key=lambda kv: (-kv[1], kv[0]))
        chosen = [token for token, _ in exact][:ROWS]
        for i in self.model_probs[t].argsort(descending=True).tolist():
            if len(chosen) >= ROWS:
                break
            if corpus.VOCAB[i] not in chosen:
                chosen.append(corpus.VOCAB[i])
        nxt = self.tokens[t + 1]
        if nxt not in chosen:
            chosen[-1] = nxt
        return chosen

    def gap(self, t: int) -> dict:
        """At position t: the true next token's exact and model probabilities, the losses they
        mean, and KL(exact || model), the excess the model pays there on average."""
        nxt = self.tokens[t + 1]
        p = self.exact[t][nxt]
        q = float(self.model_probs[t, corpus.TOKEN_ID[nxt]])
        kl = sum(pe * (math.log(pe) - math.log(float(self.model_probs[t, corpus.TOKEN_ID[tok]])))
                 for tok, pe in self.exact[t].items() if pe > 0)  # fmt: skip
        floor, loss = max(0.0, -math.log(p)), max(0.0, -math.log(q))  # p = 1 gives 0, not -0
        return {"next": nxt, "p": p, "q": q, "floor": floor, "loss": loss, "kl": max(0.0, kl)}

    def update(self) -> None:
        t = self.controls["position"].value
        tokens = self.shown(t)[::-1]  # the likeliest on top
        gap = self.gap(t)
        for bar, token in zip(self.exact_bars, tokens, strict=True):
            bar.set_width(self.exact[t].get(token, 0.0))
        for bar, token in zip(self.model_bars, tokens, strict=True):
            bar.set_width(float(self.model_probs[t, corpus.TOKEN_ID[token]]))
        labels = [f"{token} (next)" if token == gap["next"] else token for token in tokens]
        self.ax.set_yticks(range(ROWS), labels, fontsize=9)
        context = " ".join(self.tokens[max(0, t - 5) : t + 1])
        self.ax.set_title(f"position {t}, after '{context}' ({self.skills[t]})", fontsize=10)
        self.invalidate(key=t)  # the ticks and the title change with the position
        self.show_readout(
            f"position {t}: '{gap['next']}' comes next ({self.skills[t]})",
            f": exact p {gap['p']:.3f}, the model's {gap['q']:.3f}; it pays {gap['loss']:.2f} "
            f"nats where the floor is {gap['floor']:.2f}; KL(exact || model) {gap['kl']:.2f}",
        )

    def state(self) -> dict:
        """Adds the tokens drawn, top to bottom, and both bars' lengths for each."""
        t = self.controls["position"].value
        tokens = self.shown(t)
        exact = {b.get_y(): b.get_width() for b in self.exact_bars}
        return super().state() | {
            "tokens": tokens,
            "exact": [self.exact[t].get(tok, 0.0) for tok in tokens],
            "model": [float(self.model_probs[t, corpus.TOKEN_ID[tok]]) for tok in tokens],
            "drawn_exact": [exact[y] for y in sorted(exact, reverse=True)],
            **self.gap(t),
        }

    def settings(self) -> dict[str, list]:
        return super().settings(position=list(range(len(self.exact))))
