"""Counting memory: the blocks a computation allocates, and what autograd keeps for the
backward (lessons 10 and 17: attention's bytes as T grows, and tiled attention's).

Both count bytes, not time, so their numbers are the same on every CPU.
"""

import json
import os
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile


@dataclass(frozen=True)
class Allocations:
    """What one call allocated on the CPU, block by block, as torch's profiler saw it
    (lessons 10 and 17)."""

    count: int  # how many blocks were allocated
    largest_bytes: int  # the largest single block
    peak_bytes: int  # the most bytes alive at once, counted from what was alive at the start
    total_bytes: int  # every block added up (freed ones included)


@contextmanager
def _quiet_profiler():
    """Keep the profiler's start and stop lines (each stamped with the time and the process
    id) off stderr, where a notebook would store them: Kineto, the profiler's engine, reads
    KINETO_LOG_LEVEL once, when it first starts, and logs nothing below level 6. The
    environment is left as it was; a level set by the user is kept."""
    before = os.environ.get("KINETO_LOG_LEVEL")
    if before is None:
        os.environ["KINETO_LOG_LEVEL"] = "6"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("KINETO_LOG_LEVEL", None)


def allocations(fn, *args, **kwargs) -> Allocations:
    """Run fn(*args, **kwargs) under torch's profiler and count every CPU block it allocates
    (lessons 10 and 17b; lesson 10 calls it through sampling.memory_table).

    The profiler logs each allocation and each free with its size, in order; the peak is the
    highest running total. The call's result is dropped at the end, so it counts as allocated.
    Run it under torch.no_grad() to count a forward pass alone.
    """
    if not callable(fn):
        raise TypeError(f"fn: expected a function to call, got {type(fn).__name__}")
    with tempfile.TemporaryDirectory() as folder:
        with (
            _quiet_profiler(),
            profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof,
        ):
            fn(*args, **kwargs)
        trace = Path(folder) / "trace.json"
        prof.export_chrome_trace(str(trace))
        events = json.loads(trace.read_text(encoding="utf-8"))["traceEvents"]
    changes = [
        e["args"]["Bytes"]
        for e in sorted(events, key=lambda e: e["ts"])
        if e.get("name") == "[memory]" and e["args"].get("Device Type") == 0  # 0: the CPU
    ]
    blocks = [c for c in changes if c > 0]
    alive = peak = 0
    for change in changes:
        alive += change
        peak = max(peak, alive)
    return Allocations(len(blocks), max(blocks, default=0), peak, sum(blocks))


@dataclass(frozen=True)
class Saved:
    """The tensors autograd saved during one forward pass, for its backward (lesson 17b)."""

    shapes: tuple  # the shape of each saved tensor, in the order they were saved
    bytes: int  # their bytes, each block of memory counted once (q saved twice is one q)


def saved_for_backward(fn, *args, **kwargs) -> Saved:
    """Run fn(*args, **kwargs) and record every tensor autograd saves for the backward
    (lesson 17b).

    The inputs that need gradients must have requires_grad=True; a tensor that is already
    saved (an input, say) is counted once however many operations keep it.
    """
    if not callable(fn):
        raise TypeError(f"fn: expected a function to call, got {type(fn).__name__}")
    saved = []

    def pack(tensor):
        saved.append(tensor)
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        fn(*args, **kwargs)
    blocks = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in saved}
    return Saved(tuple(tuple(t.shape) for t in saved), sum(blocks.values()))
