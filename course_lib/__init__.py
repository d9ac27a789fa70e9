"""course_lib: the helpers behind the transformer course's notebooks.

Math lives in attention, multihead, positional and block; pictures in viz;
live explorers in widgets; exercise checkers in checks.
"""

import random

import numpy as np
import torch

__all__ = ["set_seed"]


def set_seed(seed: int) -> None:
    """Seed Python, NumPy and torch so a notebook gives the same numbers every run (lesson 00)."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed: expected an int, got {type(seed).__name__}")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
