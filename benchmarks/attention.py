"""The course's MultiHeadAttention against torch.nn.MultiheadAttention, forward plus backward."""

import json
import subprocess
import sys

import torch
from torch.utils import benchmark

from course_lib.attention import causal_mask
from course_lib.multihead import MultiHeadAttention

TARGET_FUSED, TARGET_SCRATCH = 1.1, 1.5
# lesson 10: both forwards' time over T grows as T^k with k in this range: the (T, T)
# products dominate (k near 2; the fused kernel's fixed costs pull its k below 2 at small T),
# and the from-scratch matrices' trips to memory once they outgrow the caches push k above 2
GROWTH_LENGTHS = (256, 512, 1024, 2048)
TARGET_EXPONENT = (1.5, 3.0)


def _pair(d_model: int, heads: int):
    ours = MultiHeadAttention(d_model, heads)
    return ours, ours.to_torch()


def _step_ours(module, x, mask, fused: bool):
    module.fused = fused
    module(x, mask).sum().backward()


def _step_torch(module, x, mask):
    # torch wants True where attending is NOT allowed; need_weights=False takes its fast path
    module(x, x, x, attn_mask=~mask, need_weights=False)[0].sum().backward()


def compare(B=8, T=256, D=256, H=8, min_run_time=1.0) -> dict:
    """Median seconds per forward+backward for each implementation, and ratios to torch."""
    torch.manual_seed(0)
    ours, ref = _pair(D, H)
    x = torch.randn(B, T, D, requires_grad=True)
    mask = causal_mask(T)
    timers = {
        "torch": benchmark.Timer(
            "step(ref, x, mask)", globals={"step": _step_torch, "ref": ref, "x": x, "mask": mask}
        ),
        "fused": benchmark.Timer(
            "step(ours, x, mask, True)",
            globals={"step": _step_ours, "ours": ours, "x": x, "mask": mask},
        ),
        "scratch": benchmark.Timer(
            "step(ours, x, mask, False)",
            globals={"step": _step_ours, "ours": ours, "x": x, "mask": mask},
        ),
    }
    seconds = {
        name: t.blocked_autorange(min_run_time=min_run_time).median for name, t in timers.items()
    }
    ours.fused = True
    return {
        "shape": f"B={B}, T={T}, D={D}, H={H}",
        **{f"{k}_ms": v * 1000 for k, v in seconds.items()},
        "fused_ratio": seconds["fused"] / seconds["torch"],
        "scratch_ratio": seconds["scratch"] / seconds["torch"],
    }


def growth(lengths=GROWTH_LENGTHS, B=1, H=4, d=32, min_run_time=0.5) -> dict:
    """Lesson 10's measurement done carefully: median seconds of one causal forward call
    of the from-scratch attention (course_lib.attention.attend, lesson 01's arithmetic) and of
    torch's fused kernel at each T, one torch thread, with the exponent k of T^k fitted to
    each by least squares, and the peak bytes counted by the profiler with theirs."""
    from benchmarks.kernels import fitted_exponent
    from course_lib.attention import attend
    from course_lib.memory import allocations
    from course_lib.runtime import one_thread

    def scratch(q, k, v, mask):
        return attend(q, k, v, mask, d**-0.5)[0]

    def fused(q, k, v, mask):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    rows = []
    with one_thread(), torch.no_grad():
        for T in lengths:
            g = torch.Generator().manual_seed(T)
            q, k, v = (torch.randn(B, H, T, d, generator=g) for _ in range(3))
            mask = causal_mask(T)
            row = {"T": T}
            for name, fn in (("scratch", scratch), ("fused", fused)):
                timer = benchmark.Timer(
                    "fn(q, k, v, mask)", globals={"fn": fn, "q": q, "k": k, "v": v, "mask": mask}
                )
                row[f"{name}_s"] = timer.blocked_autorange(min_run_time=min_run_time).median
                row[f"{name}_peak"] = allocations(fn, q, k, v, mask).peak_bytes
            rows.append(row)
    fits = {
        f"{name}_{what}_exponent": fitted_exponent(lengths, [r[f"{name}_{what}"] for r in rows])
        for name in ("scratch", "fused")
        for what in ("s", "peak")
    }
    low, high = TARGET_EXPONENT
    return {
        "shape": f"B={B}, H={H}, d={d}",
        "rows": rows,
        **fits,
        "ok": all(low <= fits[f"{n}_s_exponent"] <= high for n in ("scratch", "fused")),
    }


_PEAK = """
import sys, torch
from course_lib.attention import causal_mask
from course_lib.multihead import MultiHeadAttention


def peak_kib():
    # VmHWM belongs to this process's own memory map; ru_maxrss would start from the
    # parent's peak at fork time and hide this process's own
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])


B, T, D, H, fused = 1, int(sys.argv[1]), 256, 8, sys.argv[2] == "fused"
module = MultiHeadAttention(D, H)
module.fused = fused
with torch.no_grad():
    module(torch.randn(B, 8, D), causal_mask(8))  # load the kernels on a tiny input first
x, mask = torch.randn(B, T, D), causal_mask(T)
base = peak_kib()
with torch.no_grad():
    module(x, mask)
print(peak_kib() - base)
"""


def peak_memory(T: int = 2048) -> dict:
    """Extra peak resident memory (MiB) of one forward pass, each path in a fresh process."""
    result = {"T": T}
    for path in ("scratch", "fused"):
        out = subprocess.run(
            [sys.executable, "-c", _PEAK, str(T), path], capture_output=True, text=True, check=True
        )
        result[f"{path}_mib"] = int(out.stdout.strip()) / 1024
    # what the (B, H, T, T) float32 weight matrix alone costs
    result["weights_matrix_mib"] = 1 * 8 * T * T * 4 / 2**20
    return result


def import_time(repeats: int = 5) -> float:
    """Milliseconds to `import course_lib` once torch is already imported (best of repeats)."""
    code = (
        "import time, torch; start = time.perf_counter(); import course_lib, course_lib.attention,"
        " course_lib.multihead, course_lib.positional, course_lib.block;"
        " print(time.perf_counter() - start)"
    )
    runs = [
        float(
            subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=True
            ).stdout
        )
        for _ in range(repeats)
    ]
    return min(runs) * 1000


if __name__ == "__main__":
    print(json.dumps(compare(T=64, min_run_time=0.2), indent=1))
