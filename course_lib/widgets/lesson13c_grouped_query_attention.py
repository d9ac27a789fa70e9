"""Lesson 13c's explorer: what one new token costs, cached and recomputed, and what the cache
holds, for a context length, a model width and a number of key/value heads."""

import math

from course_lib import viz
from course_lib.gqa import kv_cache_bytes
from course_lib.kv_cache import token_costs
from course_lib.model import ModelConfig
from course_lib.widgets.base import Explorer, choice_buttons, choice_slider


def _mib(n: int) -> str:
    return f"{n / 2**20:.3g} MiB"


def _decades(low: float, high: float) -> tuple:
    """Whole powers of ten outside low and high, with room (a factor of 3) for the markers."""
    return 10.0 ** math.floor(math.log10(low / 3)), 10.0 ** math.ceil(math.log10(high * 3))


class KVCostExplorer(Explorer):
    """The explorer of lesson 13c: move the context length, the model's width and its key/value
    heads; see the multiply-adds of one new token, cached and recomputed, and the cache's bytes
    against the weights'. Every number is counted from the configuration
    (course_lib.kv_cache.token_costs, course_lib.gqa.kv_cache_bytes): the same on every machine.

    The model is the shipped base model's shape (2 layers, 4 heads, d_ff = 4D, 104 tokens) at
    width D.
    """

    PICTURE = (
        "Two log-log plots against context length: multiply-adds per new token, cached and "
        "recomputed, with the cached step's projections alone; and the KV cache's bytes for "
        "1, 2 and 4 key/value heads against the weights' bytes"
    )

    CONTEXTS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
    WIDTHS = (64, 256, 1024)
    KV_HEADS = (4, 2, 1)
    HEADS, LAYERS, VOCAB = 4, 2, 104  # the base model's (course_lib.variants.BASE)

    def __init__(self):
        Ts = list(self.CONTEXTS)
        fig, (self.ax_work, self.ax_bytes) = viz.new_figure(10.0, 3.9, ncols=2)
        self.setting_title = fig.suptitle("", fontsize=11)  # the setting, in the picture too
        self.lines = {
            "recomputed": self.ax_work.plot(
                Ts, Ts, marker="s", color=viz.colour("recomputed"), label="recomputed"
            )[0],
            "cached": self.ax_work.plot(
                Ts, Ts, marker="o", color=viz.colour("cached"), label="cached"
            )[0],
            "projections": self.ax_work.plot(
                Ts, Ts, ":", color=viz.colour("cached"), label="cached: projections alone"
            )[0],
        }
        styles = {4: ("-", "o"), 2: ("--", "^"), 1: (":", "v")}
        self.cache_lines = {
            kv: self.ax_bytes.plot(
                Ts,
                Ts,
                styles[kv][0],
                marker=styles[kv][1],
                color=viz.PALETTE[2],
                label=f"KV cache, {kv} kv heads",
            )[0]
            for kv in self.KV_HEADS
        }
        (self.weights_line,) = self.ax_bytes.plot(
            Ts, Ts, "-", color=viz.PALETTE[7], linewidth=2, label="the weights"
        )
        self.marks = [
            ax.axvline(64, color="0.4", linewidth=1, linestyle="--", label="the chosen T")
            for ax in (self.ax_work, self.ax_bytes)
        ]
        for ax, ylabel, corner in (
            (self.ax_work, "multiply-adds per new token", "upper left"),
            (self.ax_bytes, "bytes", "lower right"),  # the weights' line crosses the upper left
        ):
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlim(Ts[0] / 1.3, Ts[-1] * 1.3)
            ax.set_xlabel("context length T")
            ax.set_ylabel(ylabel)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8, loc=corner)
        self.ax_work.set_title("one new token's work", fontsize=10)
        self.ax_bytes.set_title("what stays in memory", fontsize=10)
        controls = {
            "T": choice_slider("context length T", self.CONTEXTS, 128),
            "D": choice_buttons("model width D", self.WIDTHS, 64),
            "kv": choice_buttons("key/value heads", self.KV_HEADS, 4),
        }
        dynamic = [*self.lines.values(), *self.cache_lines.values(), self.weights_line,
                   *self.marks, self.setting_title]  # fmt: skip
        super().__init__(controls, fig, dynamic=dynamic)

    def limits(self, D: int) -> dict:
        """Each panel's y range at width D: whole decades around every line it can show at that
        width, so a change of width or key/value heads moves the lines, not the axes."""
        low = [self.costs(t, D, kv) for t in self.CONTEXTS[:1] for kv in self.KV_HEADS]
        high = [self.costs(t, D, kv) for t in self.CONTEXTS[-1:] for kv in self.KV_HEADS]
        work = (min(c["projections"] for c in low), max(c["recomputed"] for c in high))
        cache = (
            min(min(c["cache_bytes"], c["weight_bytes"]) for c in low),
            max(max(c["cache_bytes"], c["weight_bytes"]) for c in high),
        )
        return {"work": _decades(*work), "bytes": _decades(*cache)}

    def config(self, D: int) -> ModelConfig:
        return ModelConfig(self.VOCAB, D, self.HEADS, 4 * D, self.LAYERS, max(self.CONTEXTS))

    def weight_count(self, D: int, kv: int) -> int:
        """Parameters of the model at width D with kv key/value heads, counted from its layout
        (tests/test_widgets_lesson13c_grouped_query_attention.py holds it against the modules'
        own count)."""
        V, L, d_ff, kv_width = self.VOCAB, self.LAYERS, 4 * D, kv * (D // self.HEADS)
        attention = D * (D + 2 * kv_width) + (D + 2 * kv_width) + D * D + D  # qkv and out
        feed_forward = D * d_ff + d_ff + d_ff * D + D
        norms = 2 * 2 * D  # two layer norms per block, a weight and a bias each
        return V * D + L * (attention + feed_forward + norms) + 2 * D + D * V

    def costs(self, T: int, D: int, kv: int) -> dict:
        """The numbers the picture and the readout show at one setting."""
        config = self.config(D)
        cached = token_costs(config, T, cached=True, num_kv_heads=kv)["multiply_adds"]
        # the cached step is affine in T: each cached key adds the same attention work
        per_key = token_costs(config, T + 1, cached=True, num_kv_heads=kv)["multiply_adds"] - cached
        return {
            "cached": cached,
            "recomputed": token_costs(config, T, cached=False, num_kv_heads=kv)["multiply_adds"],
            "projections": cached - T * per_key,
            "cache_bytes": kv_cache_bytes(self.LAYERS, kv, T, D // self.HEADS),
            "weight_bytes": 4 * self.weight_count(D, kv),
        }

    def update(self) -> None:
        T, D, kv = (self.controls[name].value for name in ("T", "D", "kv"))
        if self.ax_work.get_ylim() != self.limits(D)["work"]:
            self.ax_work.set_ylim(*self.limits(D)["work"])
            self.ax_bytes.set_ylim(*self.limits(D)["bytes"])
            self.invalidate(key=D)  # the axes changed: one full redraw per width, then kept
        curves = [self.costs(t, D, kv) for t in self.CONTEXTS]
        for name, line in self.lines.items():
            line.set_ydata([c[name] for c in curves])
        for heads, line in self.cache_lines.items():
            line.set_ydata(
                [kv_cache_bytes(self.LAYERS, heads, t, D // self.HEADS) for t in self.CONTEXTS]
            )
            line.set_alpha(1.0 if heads == kv else 0.35)
        self.weights_line.set_ydata([curves[0]["weight_bytes"]] * len(self.CONTEXTS))
        for mark in self.marks:
            mark.set_xdata([T, T])
        self.setting_title.set_text(
            f"T = {T} (dashed), D = {D}, {kv} key/value heads of {self.HEADS} query heads"
        )
        now = self.costs(T, D, kv)
        share = 1 - now["projections"] / now["cached"]
        self.show_readout(
            f"T = {T}, D = {D}, {kv} key/value heads",
            f": a new token costs {now['cached']:,} multiply-adds cached ({share:.0%} of them "
            f"attention), {now['recomputed']:,} recomputed ({now['recomputed'] / now['cached']:.0f}"
            f" times as many); the cache holds {_mib(now['cache_bytes'])}, the weights "
            f"{_mib(now['weight_bytes'])}",
        )

    def state(self) -> dict:
        """Adds the numbers at the current setting ("costs")."""
        T, D, kv = (self.controls[name].value for name in ("T", "D", "kv"))
        return super().state() | {"costs": self.costs(T, D, kv)}
