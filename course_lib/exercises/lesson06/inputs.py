"""What lesson 06's cases read: three shipped checkpoints and four splits, loaded once."""

import functools
from dataclasses import dataclass

import torch

from course_lib import data, places
from course_lib.model import TinyTransformer, load_pretrained


@dataclass(frozen=True)
class CaseInputs:
    """The checkpoints and splits lesson 06's cases are built from."""

    rope_h4: TinyTransformer
    rope_h2: TinyTransformer
    places_h1: TinyTransformer
    valid: torch.Tensor  # (N, 32) token ids: the toy language's validation split
    long: torch.Tensor  # (N, 128): its long split, rope-h4's max_len
    train: torch.Tensor  # (N, 32): its training split
    places_valid: torch.Tensor  # lesson 03's three-places task, validation split


@functools.cache
def case_inputs() -> CaseInputs:
    """Load what lesson 06's cases read, once per process (lesson 06).

    Cached with functools.cache, here and nowhere else: every check builds its cases again,
    and loading them each time cost six checkpoint loads and three splits per check. Nothing
    changes them: the references only read them and a check hands the learner copies. They
    are loaded with the global random state saved and restored, so a check leaves the
    learner's random numbers as it found them.
    """
    with torch.random.fork_rng(devices=[]):
        checkpoints = {name: load_pretrained(name) for name in ("rope-h4", "rope-h2", "places-h1")}
    return CaseInputs(
        rope_h4=checkpoints["rope-h4"],
        rope_h2=checkpoints["rope-h2"],
        places_h1=checkpoints["places-h1"],
        valid=data.load_split("valid"),
        long=data.load_split("long"),
        train=data.load_split("train"),
        places_valid=places.load_split("valid"),
    )
