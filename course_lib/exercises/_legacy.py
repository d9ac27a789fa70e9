# ruff: noqa
"""TEMPORARY: the old string-selected checkers, kept until each lesson module replaces them."""

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from course_lib.attention import causal_mask, scaled_dot_product_attention
from course_lib.positional import apply_rope, rotate_pair, sinusoidal_encoding

ATOL = 1e-5


@dataclass(frozen=True)
class Verdict:
    passed: bool
    message: str

    def _ipython_display_(self) -> None:
        """Show nothing more in a notebook: the checker has printed its line already."""


def _close(got, expected) -> bool:
    if isinstance(expected, tuple):
        return (
            isinstance(got, tuple | list)
            and len(got) == len(expected)
            and all(_close(g, e) for g, e in zip(got, expected, strict=True))
        )
    if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
        return False
    if expected.dtype == torch.bool:
        return got.dtype == torch.bool and torch.equal(got, expected)
    return bool(torch.allclose(got.to(expected.dtype), expected, atol=ATOL, rtol=1e-4))


def _shape_problem(got, expected) -> str | None:
    """Say what is wrong with the type or shape of got, or None if both match."""
    if isinstance(expected, tuple):
        if not isinstance(got, tuple | list) or len(got) != len(expected):
            return f"expected a tuple of {len(expected)} tensors, got {type(got).__name__}"
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            problem = _shape_problem(g, e)
            if problem:
                return f"item {i} of the result: {problem}"
        return None
    if not isinstance(got, torch.Tensor):
        return f"expected a torch.Tensor, got {type(got).__name__}"
    if got.shape != expected.shape:
        return f"expected shape {tuple(expected.shape)}, got {tuple(got.shape)}"
    if expected.dtype == torch.bool and got.dtype != torch.bool:
        return f"expected dtype torch.bool, got {got.dtype}"
    return None


def _clone(args: tuple) -> tuple:
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def verdict(
    name: str,
    fn: Callable,
    cases: list[tuple],
    reference: Callable,
    bugs: list[tuple[Callable, str]] = (),
    hints: list[tuple[Callable, str]] = (),
) -> Verdict:
    """Run fn on each case; compare with reference; name a matching bug if there is one.

    bugs: (wrong_version, hint) pairs; a hint is given when fn's result matches the wrong
    version. hints: (predicate(got, case), hint) pairs tried when no bug matches.
    """
    if not callable(fn):
        return Verdict(False, f"{name}: expected a function, got {type(fn).__name__}")
    for case in cases:
        try:
            got = fn(*_clone(case))
        except NotImplementedError:
            return Verdict(
                False,
                f"{name}: not implemented yet. Replace the `raise NotImplementedError` "
                "line with your code, run that cell, then run this check again.",
            )
        except Exception as err:  # the learner's code may fail in any way; report it
            return Verdict(False, f"{name}: your function raised {type(err).__name__}: {err}")
        expected = reference(*case)
        if _close(got, expected):
            continue
        for wrong, hint in bugs:
            if _close(got, wrong(*case)):
                return Verdict(False, f"{name}: {hint}")
        problem = _shape_problem(got, expected)
        if problem:
            return Verdict(False, f"{name}: {problem}")
        for predicate, hint in hints:
            if predicate(got, case):
                return Verdict(False, f"{name}: {hint}")
        return Verdict(
            False, f"{name}: the numbers differ from the course's version. {_gap(got, expected)}"
        )
    return Verdict(True, f"{name}: passed all {len(cases)} cases. Well done!")


def _gap(got, expected) -> str:
    if isinstance(expected, tuple):
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            if not _close(g, e):
                return f"Item {i} of the result is off; {_gap(g, e)}"
        return ""
    diff = (got.to(expected.dtype) - expected).abs()
    return f"Largest difference {diff.max().item():.3g} (tolerance {ATOL:g})."


def _report(result: Verdict) -> Verdict:
    print(("PASS  " if result.passed else "TRY AGAIN  ") + result.message)
    return result


def _randn(*shape, generator):
    return torch.randn(*shape, generator=generator)


# ---------------------------------------------------------------- lesson 00


def softmax_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


def softmax_cases(seed: int = 0) -> list[tuple]:
    g = torch.Generator().manual_seed(seed)
    cases = [
        (_randn(5, generator=g),),
        (_randn(3, 4, generator=g) * 3,),
        (_randn(2, 3, 6, generator=g),),
    ]
    cases.append((torch.tensor([[1000.0, 999.0, -1000.0], [0.0, 0.0, 0.0]]),))
    return cases


def check_softmax(fn: Callable) -> Verdict:
    """Check a softmax over the last axis (lesson 00's exercise)."""
    bugs = [
        (
            lambda x: torch.softmax(x, dim=0),
            "the numbers match softmax over the FIRST axis; "
            "normalise over the last one (dim=-1), so each row sums to 1.",
        ),
        (lambda x: torch.exp(x), "you return exp(x) without dividing by the row's sum."),
        (lambda x: x / x.sum(dim=-1, keepdim=True), "you divide x by its sum but forgot the exp."),
    ]
    hints = [
        (
            lambda got, case: bool(torch.isnan(got).any() or torch.isinf(got).any()),
            "your result has NaN or inf on large scores: subtract each row's max before exp.",
        ),
        (
            lambda got, case: (
                not torch.allclose(got.sum(-1), torch.ones(got.shape[:-1]), atol=1e-4)
            ),
            "rows don't sum to 1: check which axis you sum over (keepdim=True helps broadcasting).",
        ),
    ]
    return _report(verdict("softmax", fn, softmax_cases(), softmax_reference, bugs, hints))


# ---------------------------------------------------------------- lesson 01


def attention_reference(q, k, v, mask=None):
    return scaled_dot_product_attention(q, k, v, mask)


def _attention_wrong(softmax_dim=-1, factor=None, after_softmax=False):
    def wrong(q, k, v, mask=None):
        d_k = q.shape[-1]
        f = 1 / math.sqrt(d_k) if factor is None else factor(d_k)
        scores = q @ k.transpose(-2, -1)  # (..., T_q, T_k)
        if not after_softmax:
            scores = scores * f
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        w = torch.softmax(scores, dim=softmax_dim)
        if after_softmax:
            w = w * f
        return w @ v, w

    return wrong


def attention_cases(seed: int = 0) -> list[tuple]:
    g = torch.Generator().manual_seed(seed)
    cases = []
    for T, d_k, d_v in [(4, 8, 8), (5, 16, 6), (6, 32, 4)]:
        q, k, v = (_randn(2, T, d, generator=g) for d in (d_k, d_k, d_v))
        cases.append((q, k, v, None))
    q, k, v = (_randn(2, 5, 8, generator=g) for _ in range(3))
    cases.append((q, k, v, causal_mask(5)))
    return cases


def check_attention(fn: Callable) -> Verdict:
    """Check fn(q, k, v, mask=None) -> (output, weights) (lesson 01's first exercise)."""
    bugs = [
        (
            _attention_wrong(softmax_dim=-2),
            "columns sum to 1, not rows: take the softmax over the keys, the LAST axis (dim=-1).",
        ),
        (
            _attention_wrong(factor=lambda d: 1.0),
            "the scores are not scaled: divide q @ k^T by sqrt(d_k) before the softmax.",
        ),
        (_attention_wrong(factor=lambda d: 1.0 / d), "you divide by d_k; the scale is sqrt(d_k)."),
        (
            _attention_wrong(after_softmax=True),
            "the scale is applied after the softmax; it belongs to the scores, before it.",
        ),
    ]
    hints = [
        (
            lambda got, case: (
                case[3] is not None and bool((got[1].masked_fill(case[3], 0).abs() > 1e-6).any())
            ),
            "with a mask, weights on masked positions must be 0: fill masked scores with -inf "
            "before the softmax (mask is True where attending is allowed).",
        ),
    ]
    return _report(verdict("attention", fn, attention_cases(), attention_reference, bugs, hints))


def check_causal_mask(fn: Callable) -> Verdict:
    """Check fn(T) -> (T, T) bool mask, True where query t may attend to key s (lesson 01)."""
    cases = [(5,), (2,), (9,), (1,)]  # T=1 last: there several bugs look alike
    bugs = [
        (
            lambda T: causal_mask(T).T.contiguous(),
            "your mask is the transpose: row t (the query) "
            "may see columns 0..t, so True belongs on and BELOW the diagonal (tril).",
        ),
        (lambda T: ~causal_mask(T), "True and False are swapped: True means 'may attend'."),
        (
            lambda T: torch.ones(T, T, dtype=torch.bool).tril(-1),
            "the diagonal is False: a token may attend to itself (use tril(), not tril(-1)).",
        ),
        (lambda T: causal_mask(T).float(), "right pattern, wrong dtype: return a bool tensor."),
    ]
    return _report(verdict("causal_mask", fn, cases, causal_mask, bugs))


# ---------------------------------------------------------------- lesson 02


def _as_tensor_result(fn: Callable) -> Callable:
    """Let a learner return a Python float where a 0-d tensor is expected."""

    def wrapped(*args):
        got = fn(*args)
        return torch.tensor(float(got)) if isinstance(got, int | float) else got

    return wrapped


def score_variance_reference(q, k, scale):
    d_k = q.shape[-1]
    scores = (q * k).sum(dim=-1) * (1 / math.sqrt(d_k) if scale else 1.0)  # (n,)
    return scores.var()


def _variance_wrong(kind: str):
    def wrong(q, k, scale):
        d_k = q.shape[-1]
        f = 1 / math.sqrt(d_k) if scale else 1.0
        if kind == "std":
            return ((q * k).sum(dim=-1) * f).std()
        if kind == "all_pairs":
            return ((q @ k.T) * f).var()  # (n, d_k) @ (d_k, n) -> (n, n)
        if kind == "no_sum":
            return (q * k * f).var()
        if kind == "over_d":
            return ((q * k).sum(dim=-1) * (1 / d_k if scale else 1.0)).var()
        if kind == "variance_over_sqrt":
            return (q * k).sum(dim=-1).var() * f
        return (q * k).sum(dim=-1).var()  # "ignore_scale"

    return wrong


def score_variance_cases(seed: int = 0) -> list[tuple]:
    g = torch.Generator().manual_seed(seed)
    cases = []
    for d_k, scale in [(1, False), (16, False), (64, False), (16, True), (256, True)]:
        cases.append((_randn(2000, d_k, generator=g), _randn(2000, d_k, generator=g), scale))
    return cases


def check_score_variance(fn: Callable) -> Verdict:
    """Check fn(q, k, scale) -> variance of the n scores q[i] . k[i] (lesson 02's exercise)."""
    bugs = [
        (
            _variance_wrong("std"),
            "that is the standard deviation; the variance is its square (.var(), not .std()).",
        ),
        (
            _variance_wrong("all_pairs"),
            "q @ k.T scores every query against every key; this "
            "exercise pairs row i of q with row i of k: (q * k).sum(dim=-1).",
        ),
        (
            _variance_wrong("no_sum"),
            "you took the variance of single products q_j k_j; sum them "
            "over the d_k axis first, each score is a whole dot product.",
        ),
        (_variance_wrong("over_d"), "with scale=True, divide the scores by sqrt(d_k), not by d_k."),
        (
            _variance_wrong("variance_over_sqrt"),
            "you divided the variance by sqrt(d_k); scale the "
            "scores instead (the variance then shrinks by d_k).",
        ),
        (
            _variance_wrong("ignore_scale"),
            "scale=True should divide each score by sqrt(d_k) "
            "before taking the variance; yours ignores it.",
        ),
    ]
    hints = [
        (
            lambda got, case: bool(
                (got - score_variance_reference(*case)).abs()
                < 0.02 * score_variance_reference(*case)
            ),
            "nearly right: take the variance around the mean with .var() (it divides by n - 1).",
        ),
    ]
    learner = _as_tensor_result(fn)

    def either_variance(q, k, scale):
        # dividing by n instead of n - 1 is as right as .var(): rescale it so both pass
        got = learner(q, k, scale)
        n = q.shape[0]
        biased = score_variance_reference(q, k, scale) * (n - 1) / n
        matches = isinstance(got, torch.Tensor) and got.shape == ()
        if matches and torch.allclose(got.to(biased.dtype), biased):
            return got * n / (n - 1)
        return got

    return _report(
        verdict(
            "score_variance",
            either_variance,
            score_variance_cases(),
            score_variance_reference,
            bugs,
            hints,
        )
    )


def entropy_reference(weights):
    return -torch.special.xlogy(weights, weights).sum(dim=-1)


def entropy_cases(seed: int = 0) -> list[tuple]:
    g = torch.Generator().manual_seed(seed)
    cases = [
        (torch.softmax(_randn(3, 4, generator=g) * 2, dim=-1),),
        (torch.softmax(_randn(2, 3, 6, generator=g), dim=-1),),
        (torch.softmax(_randn(5, generator=g), dim=-1),),
    ]
    cases.append((torch.tensor([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.25, 0.25, 0.5]]),))
    return cases


def check_entropy(fn: Callable) -> Verdict:
    """Check fn(weights) -> entropy in nats over the last axis (lesson 02's exercise)."""
    bugs = [
        (
            lambda w: -torch.special.xlogy(w, w).sum(dim=-1) / math.log(2),
            "that is in bits (log base 2); the course measures entropy in nats: use torch.log.",
        ),
        (
            lambda w: torch.special.xlogy(w, w).sum(dim=-1),
            "the sign is flipped: entropy is MINUS the sum of p log p, so it is never negative.",
        ),
        (
            lambda w: -torch.special.xlogy(w, w).sum(dim=0),
            "you summed over the first axis; each distribution runs along the LAST axis (dim=-1).",
        ),
        (
            lambda w: -torch.special.xlogy(w, w).mean(dim=-1),
            "you averaged p log p over the keys; entropy SUMS it (use .sum(dim=-1)).",
        ),
    ]
    hints = [
        (
            lambda got, case: bool(torch.isnan(got).any()),
            "you get NaN where a weight is exactly "
            "0: 0 * log 0 must count as 0 (torch.special.xlogy(p, p) does that).",
        ),
    ]
    return _report(verdict("entropy", fn, entropy_cases(), entropy_reference, bugs, hints))


# ---------------------------------------------------------------- lesson 03


def split_heads_reference(x, num_heads):
    B, T, D = x.shape
    return x.view(B, T, num_heads, D // num_heads).transpose(1, 2)  # (B, H, T, d)


def merge_heads_reference(y):
    B, H, T, d = y.shape
    return y.transpose(1, 2).reshape(B, T, H * d)  # (B, T, H, d) -> (B, T, D)


def split_heads_cases(seed: int = 0) -> list[tuple]:
    g = torch.Generator().manual_seed(seed)
    # T != H != d in every case, so mixed-up axes always show
    return [(_randn(B, T, D, generator=g), H) for B, T, D, H in [(2, 5, 12, 3), (1, 7, 16, 4),
                                                                 (3, 3, 16, 2)]]  # fmt: skip


def merge_heads_cases(seed: int = 0) -> list[tuple]:
    g = torch.Generator().manual_seed(seed)
    return [(_randn(B, H, T, d, generator=g),) for B, H, T, d in [(2, 3, 5, 4), (1, 4, 7, 2),
                                                                  (3, 2, 3, 8)]]  # fmt: skip


def _split_wrong(kind: str):
    def wrong(x, num_heads):
        B, T, D = x.shape
        d = D // num_heads
        if kind == "view_only":
            return x.reshape(B, num_heads, T, d)  # (B, H, T, d) in shape only
        if kind == "no_transpose":
            return x.view(B, T, num_heads, d)  # (B, T, H, d)
        return x.view(B, T, d, num_heads).permute(0, 3, 1, 2)  # "interleaved": (B, H, T, d)

    return wrong


def check_split_heads(fn: Callable) -> Verdict:
    """Check fn(x, num_heads): (B, T, D) -> (B, H, T, d) (lesson 03's first exercise)."""
    bugs = [
        (
            _split_wrong("view_only"),
            "you viewed (B, T, D) straight as (B, H, T, d): that mixes "
            "tokens across heads. View as (B, T, H, d) first, then .transpose(1, 2).",
        ),
        (
            _split_wrong("no_transpose"),
            "right split, missing swap: after .view(B, T, H, d), "
            "transpose the T and H axes so heads come before tokens: .transpose(1, 2).",
        ),
        (
            _split_wrong("interleaved"),
            "each head must own a CONTIGUOUS block of d features "
            "(head 0 = features 0..d-1); yours takes every H-th feature. View as (B, T, H, d), "
            "not (B, T, d, H).",
        ),
    ]
    return _report(verdict("split_heads", fn, split_heads_cases(), split_heads_reference, bugs))


def _merge_wrong(kind: str):
    def wrong(y):
        B, H, T, d = y.shape
        if kind == "no_transpose":
            return y.reshape(B, T, H * d)  # (B, T, D) in shape only
        if kind == "transpose_only":
            return y.transpose(1, 2)  # (B, T, H, d)
        if kind == "interleaved":
            return y.permute(0, 2, 3, 1).reshape(B, T, H * d)  # (B, T, d, H) -> (B, T, D)
        return y.sum(dim=1)  # "sum": (B, T, d)

    return wrong


def check_merge_heads(fn: Callable) -> Verdict:
    """Check fn(y): (B, H, T, d) -> (B, T, D), undoing split_heads (lesson 03's first exercise)."""
    bugs = [
        (
            _merge_wrong("no_transpose"),
            "you reshaped (B, H, T, d) straight to (B, T, D) without "
            "transposing back: token t now holds pieces of other tokens. .transpose(1, 2) first.",
        ),
        (
            _merge_wrong("transpose_only"),
            "the axes are back in order; now join the last two: .reshape(B, T, H * d).",
        ),
        (
            _merge_wrong("interleaved"),
            "the heads are interleaved feature by feature; head h's "
            "d features must sit side by side, in block h: transpose(1, 2) then reshape.",
        ),
        (
            _merge_wrong("sum"),
            "you added the heads together; merging CONCATENATES them, so the "
            "width goes back to D = H * d.",
        ),
    ]
    return _report(verdict("merge_heads", fn, merge_heads_cases(), merge_heads_reference, bugs))


def multihead_cases(seed: int = 0) -> list[tuple]:
    from course_lib.multihead import MultiHeadAttention  # here: lessons 00-02 never need it

    g = torch.Generator().manual_seed(seed)
    cases = []
    for i, (B, T, D, H) in enumerate([(2, 5, 12, 3), (1, 7, 16, 4), (3, 4, 32, 8), (2, 3, 8, 1)]):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed + i)
            mha = MultiHeadAttention(D, H).eval()
        cases.append((_randn(B, T, D, generator=g), mha))
    return cases


def multihead_reference(x, mha):
    with torch.no_grad():
        return mha(x)


def _multihead_wrong(kind: str):
    def wrong(x, mha):
        B, T, D = x.shape
        H, d = mha.num_heads, D // mha.num_heads
        with torch.no_grad():
            qkv = mha.qkv(x)  # (B, T, 3D)
            if kind == "qkv_interleaved":
                q, k, v = qkv.view(B, T, H, d, 3).permute(4, 0, 2, 1, 3)  # each (B, H, T, d)
            else:
                q, k, v = qkv.split(D, dim=-1)  # each (B, T, D)
                if kind == "view_only":
                    q, k, v = (t.reshape(B, H, T, d) for t in (q, k, v))  # shapes only
                else:
                    q, k, v = (t.view(B, T, H, d).transpose(1, 2) for t in (q, k, v))
            scale = math.sqrt(D if kind == "scale_D" else d)
            w = torch.softmax(q @ k.transpose(-2, -1) / scale, dim=-1)  # (B, H, T, T)
            y = w @ v  # (B, H, T, d)
            if kind == "merge_no_transpose":
                y = y.reshape(B, T, D)
            else:
                y = y.transpose(1, 2).reshape(B, T, D)  # (B, T, D)
            return y if kind == "no_out" else mha.out(y)

    return wrong


def check_multihead(fn: Callable) -> Verdict:
    """Check fn(x, mha) -> mha's output (B, T, D), using its weights (lesson 03's exercise)."""
    bugs = [
        (
            _multihead_wrong("no_out"),
            "the heads are right; the output projection is missing: "
            "finish with mha.out(...) on the merged (B, T, D) tensor.",
        ),
        (
            _multihead_wrong("view_only"),
            "q, k and v were viewed straight as (B, H, T, d): view "
            "as (B, T, H, d), then .transpose(1, 2).",
        ),
        (
            _multihead_wrong("merge_no_transpose"),
            "the heads' outputs were reshaped to (B, T, D) "
            "without transposing (B, H, T, d) back to (B, T, H, d) first.",
        ),
        (
            _multihead_wrong("qkv_interleaved"),
            "mha.qkv(x) is laid out [q | k | v], each D wide: "
            "split the last axis into three blocks of D (qkv.split(D, dim=-1)) before splitting "
            "heads.",
        ),
        (
            _multihead_wrong("scale_D"),
            "each head's scores are scaled by sqrt(d), its OWN width D / H, not sqrt(D).",
        ),
    ]
    return _report(verdict("multihead", fn, multihead_cases(), multihead_reference, bugs))


# ---------------------------------------------------------------- lesson 05


def _block_parts(D: int, H: int, seed: int):
    """(attn, ff, norm1, norm2) of a TransformerBlock whose two norms have distinct random gains."""
    from course_lib.block import TransformerBlock  # here, so lessons 00-04 never import the block

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        block = TransformerBlock(D, H, 4 * D).eval()
        for norm in (block.norm1, block.norm2):
            torch.nn.init.uniform_(norm.weight, 0.5, 1.5)
            torch.nn.init.uniform_(norm.bias, -0.5, 0.5)
    return block.attn, block.ff, block.norm1, block.norm2


def prenorm_block_cases(seed: int = 0) -> list[tuple]:
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i, (B, T, D, H) in enumerate([(2, 5, 16, 4), (1, 7, 8, 2), (3, 4, 32, 4)]):
        x = _randn(B, T, D, generator=g) * 2 + 1  # (B, T, D), off-centre so norms matter
        cases.append((x, *_block_parts(D, H, seed + i)))
    return cases


def prenorm_block_reference(x, attn, ff, norm1, norm2):
    h = x + attn(norm1(x))  # (B, T, D)
    return h + ff(norm2(h))  # (B, T, D)


def _prenorm_wrong(kind: str):
    def wrong(x, attn, ff, norm1, norm2):
        if kind == "postnorm":
            h = norm1(x + attn(x))
            return norm2(h + ff(h))
        if kind == "no_residual":
            return ff(norm2(attn(norm1(x))))
        if kind == "residual_from_normed":
            a = norm1(x)
            h = a + attn(a)
            b = norm2(h)
            return b + ff(b)
        if kind == "same_norm":
            h = x + attn(norm1(x))
            return h + ff(norm1(h))
        if kind == "ff_sees_x":
            h = x + attn(norm1(x))
            return h + ff(norm2(x))
        return x + ff(norm2(attn(norm1(x))))  # "one_residual"

    return wrong


def check_prenorm_block(fn: Callable) -> Verdict:
    """Check fn(x, attn, ff, norm1, norm2) -> the pre-norm block's output (lesson 05's exercise)."""
    bugs = [
        (
            _prenorm_wrong("postnorm"),
            "that is the post-norm order, norm(x + sublayer(x)); in a "
            "pre-norm block each sub-layer sees norm(x) and its output is added to x itself.",
        ),
        (
            _prenorm_wrong("no_residual"),
            "the residual additions are missing: h = x + attn(...), then h + ff(...).",
        ),
        (
            _prenorm_wrong("residual_from_normed"),
            "you add the sub-layer's output to the NORMALISED "
            "input; the residual path must carry x untouched: x + attn(norm1(x)).",
        ),
        (
            _prenorm_wrong("same_norm"),
            "the feed-forward sub-layer has its own norm: use norm2 there, not norm1 again.",
        ),
        (
            _prenorm_wrong("ff_sees_x"),
            "the feed-forward sub-layer must read h, the result of the "
            "attention step, not the block's input x: h + ff(norm2(h)).",
        ),
        (
            _prenorm_wrong("one_residual"),
            "each sub-layer needs its own residual addition; you wrapped one addition around both.",
        ),
    ]
    with torch.no_grad():
        return _report(
            verdict("prenorm_block", fn, prenorm_block_cases(), prenorm_block_reference, bugs)
        )


def layer_norm_reference(x, weight, bias, eps=1e-5):
    norm = torch.nn.LayerNorm(x.shape[-1], eps=eps)
    with torch.no_grad():
        norm.weight.copy_(weight)
        norm.bias.copy_(bias)
        return norm(x)


def layer_norm_cases(seed: int = 0) -> list[tuple]:
    g = torch.Generator().manual_seed(seed)
    cases = []
    for shape in [(2, 5, 8), (3, 4), (1, 6, 16)]:
        D = shape[-1]
        x = _randn(*shape, generator=g) * 3 + _randn(D, generator=g)  # off-centre, per feature
        weight, bias = _randn(D, generator=g) * 0.5 + 1, _randn(D, generator=g) * 0.5
        cases.append((x, weight, bias, 1e-5))
    x = _randn(4, 8, generator=g) * 1e-3  # variance ~1e-6, so eps's place shows
    cases.append((x, _randn(8, generator=g) * 0.5 + 1, _randn(8, generator=g) * 0.5, 1e-5))
    return cases


def _layer_norm_wrong(kind: str):
    def wrong(x, weight, bias, eps=1e-5):
        dims = tuple(range(x.dim() - 1)) if kind == "per_feature" else (-1,)
        mean = x.mean(dim=dims, keepdim=True)
        var = x.var(dim=dims, keepdim=True, unbiased=(kind == "unbiased"))
        if kind == "eps_outside":
            y = (x - mean) / (var.sqrt() + eps)
        elif kind == "no_centre":
            y = x / torch.sqrt(var + eps)
        else:
            y = (x - mean) / torch.sqrt(var + eps)
        if kind == "no_affine":
            return y
        if kind == "shift_first":
            return (y + bias) * weight
        return y * weight + bias

    return wrong


def check_layer_norm(fn: Callable) -> Verdict:
    """Check fn(x, weight, bias, eps) against torch.nn.LayerNorm (lesson 05's exercise)."""
    bugs = [
        (
            _layer_norm_wrong("unbiased"),
            "x.var() divides by D - 1 by default; layer norm uses the "
            "plain mean of squared deviations: x.var(dim=-1, unbiased=False).",
        ),
        (
            _layer_norm_wrong("eps_outside"),
            "epsilon belongs INSIDE the square root: divide by "
            "sqrt(var + eps), not sqrt(var) + eps.",
        ),
        (
            _layer_norm_wrong("per_feature"),
            "you normalised each feature over all the tokens: "
            "that is batch norm. Layer norm takes each token's statistics over its own D features "
            "(dim=-1, keepdim=True).",
        ),
        (
            _layer_norm_wrong("no_affine"),
            "the normalisation is right; now apply the learned gain and bias: y * weight + bias.",
        ),
        (
            _layer_norm_wrong("shift_first"),
            "scale first, then shift: y * weight + bias, not (y + bias) * weight.",
        ),
        (
            _layer_norm_wrong("no_centre"),
            "subtract each token's mean before dividing by the standard deviation.",
        ),
    ]
    return _report(verdict("layer_norm", fn, layer_norm_cases(), layer_norm_reference, bugs))


# ---------------------------------------------------------------- lesson 04


def _sinusoidal_wrong(kind: str):
    def wrong(seq_len, d_model):
        p = torch.arange(seq_len, dtype=torch.float32)[:, None]  # (T, 1)
        two_i = torch.arange(0, d_model, 2, dtype=torch.float32)  # (D/2,)
        exponent = two_i / 2 / d_model if kind == "i_over_d" else two_i / d_model  # (D/2,)
        angles = p * 10000.0**exponent if kind == "multiply" else p / 10000.0**exponent
        sin, cos = angles.sin(), angles.cos()  # (T, D/2) each
        if kind == "swapped":
            sin, cos = cos, sin
        if kind == "halves":
            return torch.cat((sin, cos), dim=-1)  # (T, D)
        if kind == "column_exponent":  # column j gets its own exponent j / D
            cos = (p / 10000.0 ** ((two_i + 1) / d_model)).cos()  # (T, D/2)
        return torch.stack((sin, cos), dim=-1).flatten(-2)  # (T, D/2, 2) -> (T, D)

    return wrong


def check_sinusoidal_encoding(fn: Callable) -> Verdict:
    """Check fn(seq_len, d_model) -> (T, D) sinusoidal encoding, base 10000 (lesson 04)."""
    cases = [(12, 8), (7, 16), (50, 32)]
    bugs = [
        (
            _sinusoidal_wrong("swapped"),
            "sin and cos are swapped: sin goes in the even columns "
            "2i, cos in the odd columns 2i+1.",
        ),
        (
            _sinusoidal_wrong("i_over_d"),
            "the exponent is 2i/D with i the PAIR index (0, 1, ..., "
            "D/2 - 1); you used i/D, so the waves slow down only half as fast across the columns.",
        ),
        (
            _sinusoidal_wrong("column_exponent"),
            "columns 2i and 2i+1 are one pair and share ONE "
            "angle p / 10000**(2i/D); your cos column used its own exponent (2i+1)/D.",
        ),
        (
            _sinusoidal_wrong("halves"),
            "you put all the sines in the first half and all the "
            "cosines in the second; this course interleaves them: sin in column 2i, cos in 2i+1.",
        ),
        (
            _sinusoidal_wrong("multiply"),
            "the angle is p DIVIDED by 10000**(2i/D); you "
            "multiplied, so later columns spin faster instead of slower.",
        ),
    ]
    return _report(verdict("sinusoidal_encoding", fn, cases, sinusoidal_encoding, bugs))


def rotate_pair_cases(seed: int = 0) -> list[tuple]:
    g = torch.Generator().manual_seed(seed)
    cases = [(_randn(5, 2, generator=g), (torch.rand(5, generator=g) - 0.5) * 2 * math.pi)]
    cases.append((_randn(3, 4, 2, generator=g), (torch.rand(3, 4, generator=g) - 0.5) * 6))
    cases.append((torch.tensor([1.0, 0.0]), torch.tensor(math.pi / 2)))
    return cases


def _rotate_wrong(kind: str):
    def wrong(pair, angle):
        angle = torch.as_tensor(angle, dtype=pair.dtype)
        cos, sin = angle.cos(), angle.sin()
        x, y = pair[..., 0], pair[..., 1]
        if kind == "clockwise":
            new = (x * cos + y * sin, -x * sin + y * cos)
        elif kind == "swapped":
            new = (x * sin - y * cos, x * cos + y * sin)
        elif kind == "sign":
            new = (x * cos + y * sin, x * sin + y * cos)
        elif kind == "overwrite":  # x updated first, then used for y
            x_new = x * cos - y * sin
            new = (x_new, x_new * sin + y * cos)
        else:  # "order": the two components come back the other way round
            new = (x * sin + y * cos, x * cos - y * sin)
        return torch.stack(new, dim=-1)  # (..., 2)

    return wrong


def check_rotate_pair(fn: Callable) -> Verdict:
    """Check fn(pair (..., 2), angle (...)) -> pair rotated counter-clockwise (lesson 04)."""
    bugs = [
        (
            _rotate_wrong("clockwise"),
            "you rotate clockwise. A positive angle turns (1, 0) towards "
            "(0, 1): new x = x cos - y sin, new y = x sin + y cos.",
        ),
        (
            _rotate_wrong("overwrite"),
            "you overwrote x before computing the new y: compute both "
            "new components from the OLD x and y (keep a copy, or stack them at the end).",
        ),
        (_rotate_wrong("swapped"), "sin and cos are swapped: new x = x cos - y sin."),
        (
            _rotate_wrong("sign"),
            "a minus sign is missing: new x = x cos - y sin (rotation keeps "
            "the length; yours does not).",
        ),
        (
            _rotate_wrong("order"),
            "the two components come back in the wrong order: return "
            "(new x, new y) along the last axis.",
        ),
    ]
    return _report(verdict("rotate_pair", fn, rotate_pair_cases(), rotate_pair, bugs))


def rope_score_reference(q, k, m, n, base=10000.0):
    q_rot = apply_rope(q[None], torch.tensor([m]), base)[0]  # (d,)
    k_rot = apply_rope(k[None], torch.tensor([n]), base)[0]  # (d,)
    return (q_rot * k_rot).sum()


def rope_score_cases(seed: int = 0) -> list[tuple]:
    g = torch.Generator().manual_seed(seed)
    cases = []
    for d, m, n in [(8, 5, 2), (16, 3, 11), (4, 40, 7), (16, 25, 25)]:
        cases.append((_randn(d, generator=g), _randn(d, generator=g), m, n))
    return cases


def _rope_score_wrong(kind: str):
    def wrong(q, k, m, n, base=10000.0):
        d = q.shape[-1]
        two_i = torch.arange(0, d, 2, dtype=torch.float64)  # (d/2,)
        theta = base ** (-two_i / 2 / d if kind == "i_over_d" else -two_i / d)  # (d/2,)
        if kind == "one_speed":
            theta = torch.ones_like(theta)
        if kind == "halves":  # pair i = (x[i], x[i + d/2])
            to_pairs = lambda x: torch.stack((x[: d // 2], x[d // 2 :]), dim=-1)  # noqa: E731
        else:
            to_pairs = lambda x: x.reshape(d // 2, 2)  # noqa: E731
        q_at = 0 if kind == "no_rotation" else m
        k_at = 0 if kind in ("no_rotation", "only_q") else n
        q_rot = rotate_pair(to_pairs(q).double(), q_at * theta)  # (d/2, 2)
        k_rot = rotate_pair(to_pairs(k).double(), k_at * theta)  # (d/2, 2)
        return (q_rot * k_rot).sum().float()

    return wrong


def check_rope_score(fn: Callable) -> Verdict:
    """Check fn(q (d,), k (d,), m, n) -> q rotated to m dotted with k rotated to n (lesson 04)."""
    bugs = [
        (
            lambda q, k, m, n: rope_score_reference(q, k, n, m),
            "your score is the course's with m "
            "and n swapped: rotate q by m * theta_i and k by n * theta_i, both counter-clockwise.",
        ),
        (
            _rope_score_wrong("halves"),
            "you paired dimension i with i + d/2 (the 'rotate half' "
            "layout); this course pairs neighbours: (x[2i], x[2i+1]) is pair i.",
        ),
        (
            _rope_score_wrong("i_over_d"),
            "pair i turns by base**(-2i/d) per position, with i the "
            "pair index; you used base**(-i/d).",
        ),
        (
            _rope_score_wrong("one_speed"),
            "every pair turns at the same speed; pair i should "
            "turn by theta_i = base**(-2i/d) per position.",
        ),
        (_rope_score_wrong("only_q"), "only q is rotated: rotate k too, by n * theta_i."),
        (_rope_score_wrong("no_rotation"), "that is the plain q . k: nothing was rotated."),
    ]
    return _report(
        verdict("rope_score", _as_tensor_result(fn), rope_score_cases(), rope_score_reference, bugs)
    )
