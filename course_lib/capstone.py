"""The model you train in lesson 11b and read in lesson 12, and the course's stand-in for it.

Lesson 11b saves your run as MODEL_FILE in the folder it runs in: a dict with "model", the
state_dict after the last step, and "steps", the state_dict after every 50th step (step ->
state_dict), so that lesson 12 can watch the heads form. `load_run` reads it back into the
course's TinyTransformer (the names are the same, lesson 11a checked that it computes what
your MyTransformer computes) and hands out attention weights, which lesson 12 needs.

Where the file is missing (lesson 11b not run in this folder) or cannot be read, lesson 12
reads the stand-in: the file lesson 11b writes when it runs with the course's solutions,
shipped as STAND_IN. `python -m tools.lesson11_stand_in` writes it again by running lesson 11b.
A run on another CPU rounds differently, so its weights differ from the stand-in's in the
third decimal; lesson 12 prints only what such runs share.

The steps of lesson 11's two halves live here too, so that their cells stay short:
`your_model` (your MyTransformer once it has passed its check, else the course's
TinyTransformer, and which), `train_live` (the live run, measured skill by skill), `save_run`
(the file, saying whose class and loop trained it), and the copy skill's curves of the variant
table's three base runs.
"""

import json
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

from course_lib import corpus, train
from course_lib.model import CHECKPOINT_DIR, TinyTransformer
from course_lib.runtime import evaluating

MODEL_FILE = "my_model_11.pt"
STAND_IN = CHECKPOINT_DIR / "lesson11-stand-in.pt"
STEPS = 600  # lesson 11b's run: the variant table's recipe cut to 600 steps
SIZES = ("vocab_size", "d_model", "num_heads", "d_ff", "num_layers")  # MyTransformer's arguments


# ---------------------------------------------------------------- lesson 11b: your run


def your_model(cls, passed: bool, weights: dict, config=None):
    """(model, whose): your class `cls` built with config's five sizes (default: the base
    model's) and holding `weights`, when it has passed its check; else the course's
    TinyTransformer holding them. `whose` says which, in words (lesson 11a)."""
    from course_lib.variants import BASE

    config = BASE if config is None else config
    if passed:
        model = cls(**{name: getattr(config, name) for name in SIZES})
        model.load_state_dict(weights)  # strict: every name, every shape
        return model, "your MyTransformer"
    model = TinyTransformer.from_config(config)
    model.load_state_dict(weights)
    return model, "the course's TinyTransformer (your MyTransformer has not passed its check)"


@dataclass
class LiveRun:
    """Lesson 11b's live run: the model after it, each step's loss, the excess over the floor
    per skill before the first step and at every measurement, a copy of the weights then, and
    whose class and loop made it."""

    model: torch.nn.Module
    losses: list
    curve: dict = field(default_factory=dict)  # step -> {skill: excess over the floor}
    steps: dict = field(default_factory=dict)  # step -> state_dict
    trained_by: dict = field(default_factory=dict)  # "class", "loop": whose, in words


def train_live(model, whose: str, loop, train_ids, valid_ids, config) -> LiveRun:
    """Train `model` (whose: "your MyTransformer" or the stand-in, in words) with `loop`, your
    train_loop, or the course's train.train when loop is None; the excess over the floor of
    valid_ids per skill is measured at step 0 and at every callback, with a copy of the weights
    each time (lesson 11b)."""
    run = LiveRun(model, [], trained_by={"class": whose})

    def measure(step, m):
        run.curve[step] = corpus.excess_loss(train.token_losses(m, valid_ids), "valid")
        run.steps[step] = {k: v.detach().clone() for k, v in m.state_dict().items()}

    measure(0, model)
    if loop is not None:
        run.losses = loop(model, train_ids, config, measure)
        run.trained_by["loop"] = "your train_loop"
    else:
        history = train.train(model, train_ids, valid_ids[:2], config, progress=False,
                              callback=measure)  # fmt: skip
        run.losses = history.train_loss
        run.trained_by["loop"] = (
            "the course's train.train (your train_loop has not passed its check)"
        )
    model.eval()
    return run


def save_run(path, run: LiveRun) -> None:
    """Save lesson 11b's run for lesson 12: the last weights, those of every measured step, and
    whose class and loop trained them (lesson 11b)."""
    torch.save({"model": run.model.state_dict(), "steps": run.steps,
                "trained_by": dict(run.trained_by)}, path)  # fmt: skip


def shipped_copy_curves() -> dict:
    """seed -> [(step, excess on the copy positions)] of the variant table's three base runs,
    measured every 50 steps of their 2,000 (lesson 11b)."""
    from course_lib.variants import RESULTS

    table = json.loads(RESULTS.read_text(encoding="utf-8"))
    return {r["seed"]: [(p[0], p[1]) for p in r["curve"]] for r in table["runs"]
            if r["variant"] == "base"}  # fmt: skip


def first_within(curve, bound: float = 0.2):
    """The first step of [(step, excess)] whose excess is below bound; None if none is
    (lesson 11b)."""
    return next((step for step, excess in curve if excess < bound), None)


def largest_drop(curve, after: int = 100) -> tuple:
    """(step, nats): the largest fall of the excess between two measurements of [(step,
    excess)] after step `after` (the first steps' general fall left out), and the step that
    ends it (lesson 11b)."""
    falls = [(a[1] - b[1], b[0]) for a, b in zip(curve, curve[1:], strict=False) if a[0] >= after]
    nats, step = max(falls)
    return step, nats


@dataclass
class Run:
    """A run of lesson 11b read back: the final model, the saved steps, where it came from."""

    model: TinyTransformer  # after the last step, in eval mode
    steps: dict  # step -> state_dict, every 50th step (the stand-in's when your file has none)
    source: str  # one sentence for the learner: your file, or the stand-in and why

    def at(self, step: int) -> TinyTransformer:
        """The model as it was after `step` (one of `steps`), in eval mode (lesson 12)."""
        if step not in self.steps:
            raise ValueError(f"step: expected one of {sorted(self.steps)}, got {step!r}")
        return _model(self.steps[step])


def _model(state: dict) -> TinyTransformer:
    from course_lib.variants import BASE

    model = TinyTransformer.from_config(BASE)
    model.load_state_dict(state)  # strict: every name, every shape
    return model.eval()


def _read(path: Path) -> tuple[dict, dict, dict]:
    """(final state_dict, {step: state_dict}, whose class and loop trained it) of a saved run;
    a bare state_dict (what lesson 11 saved before it kept its steps) gives no steps, and a
    file saved before lesson 11 recorded who trained it gives no trained_by."""
    saved = torch.load(path, map_location="cpu", weights_only=True)
    if "model" in saved:
        return saved["model"], dict(saved.get("steps", {})), dict(saved.get("trained_by", {}))
    return saved, {}, {}


def trained_by_words(trained_by: dict) -> str:
    """A saved run's record in words, such as "your MyTransformer, trained by your train_loop";
    what is not recorded is said to be unknown (lessons 11 and 12)."""
    if not trained_by:
        return "whose class and loop trained it is not recorded (the file is older)"
    whose = trained_by.get("class", "a class not recorded")
    return f"{whose}, trained by {trained_by.get('loop', 'a loop not recorded')}"


def stand_in() -> Run:
    """The course's stand-in: lesson 11b's run with the course's solutions (lesson 12)."""
    final, steps, _ = _read(STAND_IN)
    return Run(_model(final), steps, "the course's stand-in, lesson 11b's run with its solutions")


def load_run(path=MODEL_FILE) -> Run:
    """Your run of lesson 11b from `path` (default: my_model_11.pt in this folder), or the
    course's stand-in, saying which, and whose class and loop trained it (lesson 12)."""
    path = Path(path)
    if not path.exists():
        final, steps, _ = _read(STAND_IN)
        return Run(_model(final), steps, (
            f"{path.name} is not in this folder (lesson 11b saves it where it runs): "
            "reading the course's stand-in, the model lesson 11b trains with the course's "
            "solutions, shipped with the course"))  # fmt: skip
    try:
        final, steps, trained_by = _read(path)
        model = _model(final)
        if steps:
            _model(next(iter(steps.values())))
    except Exception as err:  # a file from elsewhere, half written, or of another model
        said = " ".join(f"{type(err).__name__}: {err}".split())[:160]
        final, steps, _ = _read(STAND_IN)
        return Run(_model(final), steps, (
            f"{path.name} could not be read ({said}): reading the course's stand-in, the model "
            "lesson 11b trains with the course's solutions"))  # fmt: skip
    said = f"your model from {path.name}, saved by lesson 11b: {trained_by_words(trained_by)}"
    if not steps:
        return Run(model, _read(STAND_IN)[1], (
            f"{said}; it holds no steps of training (lesson 11b saved them only later), so the "
            "steps shown are those of the course's stand-in"))  # fmt: skip
    return Run(model, steps, said)


@torch.no_grad()
def read_step(model, ids: torch.Tensor) -> tuple[list, torch.Tensor]:
    """(weights, losses) from one forward pass over ids (N, T): the attention weights, one
    (N, H, T, T) tensor per layer, and the loss of every prediction, (N, T - 1) (lesson 12)."""
    with evaluating(model):
        logits, weights = model(ids, return_weights=True)  # (N, T, V), [(N, H, T, T)]
    losses = F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")
    return weights, losses  # losses: (N, T - 1)
