"""Lesson 11a's MyTransformer is made of the learner's functions: which of them a class never
runs, and which run without their results reaching the logits.

The contract makes every computation of MyTransformer one of the learner's functions of the
earlier lessons (`mine`, from course_lib.mywork.earlier_work). Right logits alone do not show
it: torch's own modules (nn.Embedding, nn.LayerNorm called directly) compute them too, and a
class can call each function once for show and compute its logits another way. So the check
watches, with a profile hook, which functions run while the class is built and run; then, one
function at a time, it changes every tensor that function returns, in place as it returns
(noise added to a float tensor, a bool mask set all True), and runs the class again: the
logits must change.
"""

import sys
from pathlib import Path

import torch

from course_lib.exercises.core import Case

# the functions of the earlier lessons that the contract builds the model from: each must run
# while the class is built and run (the learner's, from earlier_work, or the course's
# reference that earlier_work hands out for one not written yet, named NAME_reference), and
# what it returns must reach the logits
YOUR_FUNCTIONS = ("token_embedding", "make_causal_mask", "multihead", "rope_heads",
                  "feed_forward", "prenorm_block", "layer_norm", "output_layer")  # fmt: skip

# a change to a function's results "reaches the logits" when some logit moves by more than
# this; the changes are of order 1 (noise of standard deviation 1, a mask opened), so a
# forward that uses the results moves its logits by far more, one that adds them in scaled
# to nothing (0 * result) or throws them away does not move them at all
MOVED = 1e-3


def _counted_as(code, torch_files: str) -> str | None:
    """The name of YOUR_FUNCTIONS a frame's code counts as, or None: a function counts by its
    name (yours, as you wrote it) or as the course's NAME_reference; functions of torch itself
    (F.layer_norm, which nn.LayerNorm calls) do not count."""
    if code.co_filename.startswith(torch_files):
        return None
    name = code.co_name.removesuffix("_reference")
    return name if name in YOUR_FUNCTIONS else None


def _changed(result, generator, kept: list) -> bool:
    """Change the tensor a function returned, in place, keeping (tensor, its values before) in
    `kept` so that the run can put it back; False when it cannot be changed."""
    if not isinstance(result, torch.Tensor):
        return False
    if result.dtype != torch.bool and not result.is_floating_point():
        return False
    before = result.detach().clone()
    try:
        if result.dtype == torch.bool:  # a mask: open it, every query sees every key
            result.fill_(True)
        else:
            noise = torch.randn(result.shape, generator=generator, dtype=result.dtype)
            result.add_(noise)
    except RuntimeError:  # an expanded view, which cannot be written in place
        return False
    kept.append((result, before))
    return True


def _watched_run(cls, case: Case, change: str | None = None):
    """Build cls with case's arguments, load its weights, run it on the first 5 ids of its first
    line under a profile hook. Returns (logits, the names that ran, whether each of `change`'s
    results could be changed); with `change`, every tensor that function returns is changed
    as it returns."""
    config, weights, idx = case.args
    called: set[str] = set()
    changeable: list[bool] = []
    previous = sys.getprofile()
    torch_files = str(Path(torch.__file__).parent)  # torch's own layer_norm is not yours
    generator = torch.Generator().manual_seed(0)

    def profile(frame, event, arg):
        if event in ("call", "return"):
            name = _counted_as(frame.f_code, torch_files)
            if name is not None and event == "call":
                called.add(name)
            elif name is not None and name == change:
                changeable.append(_changed(arg, generator, kept))
        if previous is not None:
            previous(frame, event, arg)

    kept: list = []  # (tensor, its values) of every tensor changed: a mask the learner's
    # function keeps (cached, or made once) must be the same after the check as before
    with torch.random.fork_rng(devices=[]):  # building the class draws from the global RNG
        sys.setprofile(profile)
        try:
            model = cls(**config)
            model.load_state_dict(weights)
            with torch.no_grad():
                # a copy: the logits may be a changed result itself (output_layer's), which
                # is put back below
                logits = model.eval()(idx[:1, :5]).clone()  # (1, 5, V)
        finally:
            sys.setprofile(previous)
            with torch.no_grad():
                for tensor, before in reversed(kept):
                    tensor.copy_(before)
    return logits, called, changeable


def unused_functions(cls, case: Case) -> tuple[list[str], list[str]]:
    """Two lists of names of YOUR_FUNCTIONS: those that never run while cls is built with case's
    arguments and run on its ids, and those that run but whose results do not reach the logits
    (changing every tensor they return leaves the logits as they were)."""
    logits, called, _ = _watched_run(cls, case)
    never = [n for n in YOUR_FUNCTIONS if n not in called]
    idle = []
    for name in YOUR_FUNCTIONS:
        if name in never:
            continue
        try:
            changed_logits, _, changeable = _watched_run(cls, case, change=name)
        except Exception:  # a class that cannot run on changed values: no evidence either way
            continue
        if not any(changeable):  # nothing it returned could be changed: no evidence either way
            continue
        moved = (changed_logits - logits).abs().nan_to_num(nan=float("inf"))
        if moved.max() <= MOVED:
            idle.append(name)
    return never, idle
