"""Lesson 11's MyTransformer is made of the learner's functions: which of them a class never runs.

The contract makes every computation of MyTransformer one of the learner's functions of the
earlier lessons (`mine`, from course_lib.mywork.earlier_work). Right logits alone do not show
it: torch's own modules (nn.Embedding, nn.LayerNorm called directly) compute them too. So the
check watches, with a profile hook, which functions run while the class is built and run.
"""

import sys
from pathlib import Path

import torch

from course_lib.exercises.core import Case

# the functions of the earlier lessons that the contract builds the model from: each must run
# while the class is built and run (the learner's, from earlier_work, or the course's
# reference that earlier_work hands out for one not written yet, named NAME_reference)
YOUR_FUNCTIONS = ("token_embedding", "make_causal_mask", "multihead", "rope_heads",
                  "feed_forward", "prenorm_block", "layer_norm", "output_layer")  # fmt: skip


def unused_functions(cls, case: Case) -> list[str]:
    """The names of YOUR_FUNCTIONS that never run while cls is built with case's arguments and
    run on its ids: a function counts by its name (yours, as you wrote it) or as the course's
    NAME_reference (what earlier_work hands out for one you have not written); functions of
    torch itself (F.layer_norm, which nn.LayerNorm calls) do not count."""
    config, weights, idx = case.args
    called: set[str] = set()
    previous = sys.getprofile()
    torch_files = str(Path(torch.__file__).parent)  # torch's own layer_norm is not yours

    def profile(frame, event, arg):
        if event == "call" and not frame.f_code.co_filename.startswith(torch_files):
            called.add(frame.f_code.co_name)
        if previous is not None:
            previous(frame, event, arg)

    sys.setprofile(profile)
    try:
        model = cls(**config)
        model.load_state_dict(weights)
        with torch.no_grad():
            model.eval()(idx[:1, :5])  # (1, 5, V)
    finally:
        sys.setprofile(previous)
    return [n for n in YOUR_FUNCTIONS if n not in called and f"{n}_reference" not in called]
