"""The tensors the checks of lessons 17a and 17b try: q, k, v with masks that empty whole
tiles, and the probe that tells whether a function ever holds one head's (T_q, T_k) matrix,
exponentiates a row's scores over every key at once, calls torch's kernel or the course's own
tiled code, or lets autograd take its gradients."""

import math
import sys
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from course_lib.exercises.core import FAILED, Verdict

# the modules of the course's own tiled code and of this checker: a learner's function that
# calls into them passes every number without writing the loop (lesson 17a imports
# tile_steps, lesson 17b tiled_attention, tiled_forward and flash_attention, for their own
# cells)
_COURSE_MODULES = (
    "course_lib.tiled_attention",
    "course_lib.exercises.lesson17a_online_softmax",
    "course_lib.exercises.lesson17b_tiled_memory_and_backward",
)


def randn(g, *shape, dtype=torch.float32):
    """A float64 draw from g cast to dtype: every dtype sees the same numbers (lesson 17a)."""
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


def qkv(g, q_shape, T_k=None, d_v=None, dtype=torch.float32):
    """q of q_shape (..., T_q, d); k (..., T_k, d) and v (..., T_k, d_v) with q's leading dims
    (lesson 17a)."""
    *lead, T_q, d = q_shape
    T_k = T_q if T_k is None else T_k
    d_v = d if d_v is None else d_v
    return (
        randn(g, *lead, T_q, d, dtype=dtype),
        randn(g, *lead, T_k, d, dtype=dtype),
        randn(g, *lead, T_k, d_v, dtype=dtype),
    )


def left_padding(B: int, T_k: int, hidden: int) -> torch.Tensor:
    """(B, 1, 1, T_k) bool: sentence 1's first `hidden` keys masked (padding in front), so its
    rows see no key at all in the first tiles; sentence 0 sees every key (lesson 17a)."""
    mask = torch.ones(B, 1, 1, T_k, dtype=torch.bool)
    mask[1, ..., :hidden] = False
    return mask


def random_mask(g, shape, T_q: int, T_k: int) -> torch.Tensor:
    """(*shape, T_q, T_k) bool, about half True, each row with at least one True (its last key
    for the even rows, so that some rows see nothing in the first tiles; lesson 17a)."""
    mask = torch.rand(*shape, T_q, T_k, generator=g) < 0.4
    mask[..., ::2, -1] = True
    mask[..., 1::2, T_k // 2] = True
    return mask


def scores_of(q, k, mask=None):
    """The scaled, masked scores, whole: the checkers' own business, never the learner's
    (lesson 17a)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T_q, T_k)
    return scores if mask is None else scores.masked_fill(~mask, float("-inf"))


def sdpa_gradients(q, k, v, grad_out, mask=None):
    """(dq, dk, dv) of sum(output * grad_out), output torch's F.scaled_dot_product_attention
    (lesson 17a)."""
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return torch.autograd.grad(out, (q, k, v), grad_out)


# the probe's problem: 80 queries, tiles of 8 keys over 128. A tensor of one head's whole
# (T_q, T_k) scores holds 80 * 128 = 10240 numbers, which is the limit; the largest a tile
# loop makes holds B * H * T_q * 16 = 2560 (the maxima of all 16 tiles, if kept; a copy of k
# or v holds 2048, one tile's scores of every head 1280), 4 times fewer. So a function that
# takes the whole softmax one head at a time is caught, and every tile passes. A function that
# takes it a query row at a time holds less than a tile, so the probe also watches what is
# exponentiated: in a tile loop nothing has 128 along any axis, however it is reshaped, since
# no other size or product of sizes is 128 (B * H * T_q = 160, T_q * tile = 640).
PROBE = {"B": 1, "H": 2, "T_q": 80, "T_k": 128, "d": 8, "tile_size": 8}
WHOLE = PROBE["T_q"] * PROBE["T_k"]
# the torch functions that exponentiate: a softmax of any kind is built on one of them
EXPONENTIALS = frozenset(
    {"exp", "exp_", "exp2", "exp2_", "expm1", "expm1_", "softmax", "_softmax", "log_softmax",
     "logsumexp", "softmin", "__rpow__"}
)  # fmt: skip


@dataclass(frozen=True)
class Watched:
    """What the probe saw a function make: the first tensor as large as one head's whole
    score matrix (its shape, or None), whether it called torch's fused kernel, the first of the
    course's own tiled functions it called (its name and module, or None), whether it switched
    autograd back on inside the probe's torch.no_grad(), and the first exponential it took over
    all T_k keys at once (lesson 17a)."""

    whole: tuple | None = None
    fused: bool = False
    course: str | None = None
    autograd: bool = False
    all_keys: str | None = None  # the first exponential over every key: "exp of (1, 2, 1, 128)"


class _Watch(TorchFunctionMode):
    """Notes the first floating-point tensor any torch function returns with at least `limit`
    elements, any call of F.scaled_dot_product_attention, any torch call made from inside the
    course's tiled code, any made with gradients on, and the first exponential (EXPONENTIALS)
    of a tensor with `keys` along one of its axes. `outer` is the
    code of the frame the learner's function is called from: the stack is read from the torch
    call out to it."""

    def __init__(self, limit: int, keys: int, outer):
        super().__init__()
        self.limit = limit
        self.keys = keys
        self.outer = outer
        self.whole = None
        self.fused = False
        self.course = None
        self.autograd = False
        self.all_keys = None

    def _course_caller(self):
        """The outermost function of the course's tiled code between this torch call and the
        learner's function, or None."""
        found, frame = None, sys._getframe(2)
        while frame is not None and frame.f_code is not self.outer:
            module = frame.f_globals.get("__name__", "")
            if module.startswith(_COURSE_MODULES):
                found = f"{frame.f_code.co_qualname} (in {module})"
            frame = frame.f_back
        return found

    def _over_all_keys(self, name: str, args, kwargs) -> str | None:
        """'exp of (1, 2, 1, 128)' if the tensor exponentiated (passed first, or as `input`)
        has every key along one of its axes, else None."""
        t = args[0] if args else kwargs.get("input")
        if isinstance(t, torch.Tensor) and self.keys in t.shape:
            return f"{name} of {tuple(t.shape)}"
        return None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.fused |= func is F.scaled_dot_product_attention
        self.autograd |= torch.is_grad_enabled()
        if self.course is None:
            self.course = self._course_caller()
        if self.all_keys is None and getattr(func, "__name__", "") in EXPONENTIALS:
            self.all_keys = self._over_all_keys(func.__name__, args, kwargs or {})
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, tuple | list) else (out,):
            if (
                self.whole is None
                and isinstance(t, torch.Tensor)
                and t.is_floating_point()
                and t.numel() >= self.limit
            ):
                self.whole = tuple(t.shape)
        return out


def watch(call, prepare=None) -> Watched:
    """Run call(q, k, v, *prepared, tile_size) on the probe's problem under torch.no_grad() and
    report what it made (Watched). prepare(q, k, v) -> the tuple `prepared`, computed before
    the probe starts watching (a backward's saved tensors). An error in call ends the watch:
    the check ran the function on every case before, so what it made until then is reported
    (lesson 17a)."""
    p = PROBE
    g = torch.Generator().manual_seed(64)
    q, k, v = qkv(g, (p["B"], p["H"], p["T_q"], p["d"]), T_k=p["T_k"])
    prepared = () if prepare is None else prepare(q, k, v)
    seen = _Watch(WHOLE, p["T_k"], call.__code__)
    with torch.no_grad(), seen:
        try:
            call(q, k, v, *prepared, p["tile_size"])
        except Exception:  # the learner's code, on a problem of its own: reported as far as it got
            pass
    return Watched(seen.whole, seen.fused, seen.course, seen.autograd, seen.all_keys)


def refused(message: str, cause: str, idea: str, bug: str) -> Verdict:
    """The verdict on right numbers reached the wrong way, as the probe saw it: its message,
    the cause, then where the lesson explains the idea (lessons 17a and 17b)."""
    return Verdict(False, message, (cause, f"See {idea}."), FAILED, bug)
