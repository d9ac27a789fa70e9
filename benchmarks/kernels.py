"""Cached against uncached generation, and tiled against fused attention (issue 27).

Times are wall clock on this machine, one torch thread (a generation step is too small to
split); multiply-adds and bytes come from course_lib, the same on every machine.
"""

import json
import math
from dataclasses import replace

import torch
import torch.nn.functional as F
from torch.utils import benchmark

from course_lib import variants
from course_lib.attention import attend
from course_lib.kv_cache import cached_forward, new_cache, token_costs
from course_lib.memory import allocations
from course_lib.model import TinyTransformer
from course_lib.runtime import one_thread
from course_lib.tiled_attention import flash_attention, tiled_attention

CONTEXTS = (256, 512, 1024, 2048, 4096)  # the T = 256 to 4096, each doubling
REPORTED = (256, 1024, 4096)  # the ones the table shows


def random_model(max_len: int = 4096) -> TinyTransformer:
    """The shipped base model's configuration (variants.BASE: V 104, D 64, H 4, d_ff 256, 2
    layers, RoPE) with room for max_len positions, random weights."""
    torch.manual_seed(0)
    return TinyTransformer.from_config(replace(variants.BASE, max_len=max_len)).eval()


def _median(stmt, globals_, min_run_time: float) -> float:
    timer = benchmark.Timer(stmt, globals=globals_, num_threads=1)
    return timer.blocked_autorange(min_run_time=min_run_time).median


def seconds_per_token(model, T: int, min_run_time: float = 1.0) -> dict:
    """Seconds to get the next token's logits at context length T (the new token included):
    cached (one position through, T cached keys read) and recomputed (all T through)."""
    ids = torch.randint(
        0, model.config.vocab_size, (1, T), generator=torch.Generator().manual_seed(T)
    )
    cache = new_cache(model, 1)
    with torch.no_grad():
        cached_forward(model, ids[:, :-1], cache)

    def cached_step():
        cache.length = T - 1  # the same step again: overwrite position T - 1
        cached_forward(model, ids[:, -1:], cache)

    def full_step():
        model(ids)[:, -1]

    with torch.no_grad(), one_thread():
        return {
            "T": T,
            "cached_s": _median("step()", {"step": cached_step}, min_run_time),
            "recomputed_s": _median("step()", {"step": full_step}, min_run_time),
        }


def fitted_exponent(Ts, seconds) -> float:
    """Slope of log(seconds) against log(T), least squares: time grows as T to this power."""
    x = [math.log(T) for T in Ts]
    y = [math.log(s) for s in seconds]
    mx, my = sum(x) / len(x), sum(y) / len(y)
    return sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True)) / sum(
        (a - mx) ** 2 for a in x
    )


def generation(contexts=CONTEXTS, min_run_time: float = 1.0, max_len: int = 4096) -> dict:
    """Per context length: seconds and tokens per second, cached and recomputed, with the
    multiply-adds of each; the fitted exponents of time over all contexts and over the last
    two, and of the multiply-adds over all."""
    model = random_model(max_len)
    rows = [seconds_per_token(model, T, min_run_time) for T in contexts]
    for row in rows:
        for kind, cached in (("cached", True), ("recomputed", False)):
            row[f"{kind}_tok_s"] = 1.0 / row[f"{kind}_s"]
            row[f"{kind}_macs"] = token_costs(model.config, row["T"], cached=cached)[
                "multiply_adds"
            ]
    fits = {}
    for kind in ("cached", "recomputed"):
        seconds = [r[f"{kind}_s"] for r in rows]
        fits[f"{kind}_exponent"] = fitted_exponent(contexts, seconds)
        fits[f"{kind}_last_exponent"] = fitted_exponent(contexts[-2:], seconds[-2:])
        fits[f"{kind}_macs_exponent"] = fitted_exponent(contexts, [r[f"{kind}_macs"] for r in rows])
    return {"config": model.config, "rows": rows, **fits}


def _qkv(B, H, T, d, grad=False):
    g = torch.Generator().manual_seed(0)
    return [torch.randn(B, H, T, d, generator=g).requires_grad_(grad) for _ in range(3)]


def attention_kernels(B=1, H=8, T=2048, d=32, tile=128, min_run_time=1.0) -> list[dict]:
    """Causal attention three ways: torch's fused kernel, the course's from-scratch attend
    (the (T, T) weights in memory) and the tiled kernel; forward alone (no grad) and forward
    + backward, in ms and in peak MiB allocated (counted by the profiler, not sampled)."""
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    factor = 1 / math.sqrt(d)
    ways = {
        "fused (F.scaled_dot_product_attention)": lambda q, k, v: F.scaled_dot_product_attention(
            q, k, v, is_causal=True
        ),
        "from scratch (attend)": lambda q, k, v: attend(q, k, v, mask, factor)[0],
        f"tiled, tile {tile} (flash_attention)": lambda q, k, v: flash_attention(
            q, k, v, causal=True, tile_size=tile
        ),
        f"tiled, tile {tile}, autograd through the loop": lambda q, k, v: tiled_attention(
            q, k, v, causal=True, tile_size=tile
        ),
    }
    rows = []
    with one_thread():
        for name, fn in ways.items():
            q, k, v = _qkv(B, H, T, d)
            with torch.no_grad():
                forward_ms = 1000 * _median(
                    "fn(q, k, v)", {"fn": fn, "q": q, "k": k, "v": v}, min_run_time
                )
                forward = allocations(fn, q, k, v)
            q, k, v = _qkv(B, H, T, d, grad=True)

            def step(fn=fn, q=q, k=k, v=v):
                fn(q, k, v).sum().backward()
                q.grad = k.grad = v.grad = None

            both_ms = 1000 * _median("step()", {"step": step}, min_run_time)
            both = allocations(step)
            mib = 2**20
            rows.append({
                "kernel": name, "forward_ms": forward_ms,
                "forward_peak_mib": forward.peak_bytes / mib,
                "forward_largest_mib": forward.largest_bytes / mib,
                "both_ms": both_ms, "both_peak_mib": both.peak_bytes / mib,
            })  # fmt: skip
    return rows


if __name__ == "__main__":
    print(json.dumps(generation((256, 512), min_run_time=0.2, max_len=512), default=str, indent=1))
    print(json.dumps(attention_kernels(T=256, tile=64, min_run_time=0.2), indent=1))
