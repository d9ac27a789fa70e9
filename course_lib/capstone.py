"""The model you train in lesson 11 and read in lesson 12, and the course's stand-in for it.

Lesson 11 saves your run as MODEL_FILE in the folder it runs in: a dict with "model", the
state_dict after the last step, and "steps", the state_dict after every 50th step (step ->
state_dict), so that lesson 12 can watch the heads form. `load_run` reads it back into the
course's TinyTransformer (the names are the same, lesson 11 checked that it computes what
your MyTransformer computes) and hands out attention weights, which lesson 12 needs.

Where the file is missing (lesson 11 not run in this folder) or cannot be read, lesson 12
reads the stand-in: the file lesson 11 writes when it runs with the course's solutions,
shipped as STAND_IN. `python -m tools.lesson11_stand_in` writes it again by running lesson 11.
A run on another CPU rounds differently, so its weights differ from the stand-in's in the
third decimal; lesson 12 prints only what such runs share.
"""

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from course_lib.model import CHECKPOINT_DIR, TinyTransformer
from course_lib.runtime import evaluating

MODEL_FILE = "my_model_11.pt"
STAND_IN = CHECKPOINT_DIR / "lesson11-stand-in.pt"
STEPS = 600  # lesson 11's run: the variant table's recipe cut to 600 steps


@dataclass
class Run:
    """A run of lesson 11 read back: the final model, the saved steps, where it came from."""

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


def _read(path: Path) -> tuple[dict, dict]:
    """(final state_dict, {step: state_dict}) of a saved run; a bare state_dict (what lesson 11
    saved before it kept its steps) gives no steps."""
    saved = torch.load(path, map_location="cpu", weights_only=True)
    if "model" in saved:
        return saved["model"], dict(saved.get("steps", {}))
    return saved, {}


def stand_in() -> Run:
    """The course's stand-in: lesson 11's run with the course's solutions (lesson 12)."""
    final, steps = _read(STAND_IN)
    return Run(_model(final), steps, "the course's stand-in, lesson 11's run with its solutions")


def load_run(path=MODEL_FILE) -> Run:
    """Your run of lesson 11 from `path` (default: my_model_11.pt in this folder), or the
    course's stand-in, saying which and why (lesson 12)."""
    path = Path(path)
    if not path.exists():
        stand_in = _read(STAND_IN)
        return Run(_model(stand_in[0]), stand_in[1], (
            f"{path.name} is not in this folder (lesson 11 saves it where it runs): "
            "reading the course's stand-in, the model lesson 11 trains with the course's "
            "solutions, shipped with the course"))  # fmt: skip
    try:
        final, steps = _read(path)
        model = _model(final)
        if steps:
            _model(next(iter(steps.values())))
    except Exception as err:  # a file from elsewhere, half written, or of another model
        said = " ".join(f"{type(err).__name__}: {err}".split())[:160]
        stand_in = _read(STAND_IN)
        return Run(_model(stand_in[0]), stand_in[1], (
            f"{path.name} could not be read ({said}): reading the course's stand-in, the model "
            "lesson 11 trains with the course's solutions"))  # fmt: skip
    if not steps:
        return Run(model, _read(STAND_IN)[1], (
            f"your model from {path.name}; it holds no steps of training (lesson 11 saved "
            "them only later), so the steps shown are those of the course's stand-in"))  # fmt: skip
    return Run(model, steps, f"your model from {path.name}, trained in lesson 11")


@torch.no_grad()
def read_step(model, ids: torch.Tensor) -> tuple[list, torch.Tensor]:
    """(weights, losses) from one forward pass over ids (N, T): the attention weights, one
    (N, H, T, T) tensor per layer, and the loss of every prediction, (N, T - 1) (lesson 12)."""
    with evaluating(model):
        logits, weights = model(ids, return_weights=True)  # (N, T, V), [(N, H, T, T)]
    losses = F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")
    return weights, losses  # losses: (N, T - 1)
