"""Scaled dot-product attention and the causal mask (lessons 01 and 02)."""

import math

import torch

from course_lib._validation import broadcast_shape, float_tensor, one_of, positive_int
from course_lib.runtime import one_thread


def causal_mask(T: int, device=None) -> torch.Tensor:
    """(T, T) bool, True on and below the diagonal: query t may look at keys 0..t (lesson 01)."""
    positive_int("T", T)
    return torch.ones(T, T, dtype=torch.bool, device=device).tril()  # (T, T)


def scale_factor(scale, d_k: int) -> float:
    """Factor for the scores: 1/sqrt(d_k) for True, 1 for False, or a given float (lesson 02)."""
    if isinstance(scale, bool):
        return 1.0 / math.sqrt(d_k) if scale else 1.0
    if isinstance(scale, int | float):
        if not math.isfinite(scale) or scale <= 0:
            raise ValueError(f"scale: expected a positive finite factor, got {scale}")
        return float(scale)
    raise TypeError(f"scale: expected True, False or a float factor, got {type(scale).__name__}")


def check_mask(mask, scores_shape: torch.Size) -> None:
    """Raise unless mask is a bool tensor broadcastable to scores_shape with no empty query row."""
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"mask: expected a bool torch.Tensor, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(
            f"mask: expected dtype torch.bool (True = may attend), got {mask.dtype}; "
            "an additive float mask is not accepted"
        )
    if broadcast_shape(mask.shape, scores_shape) != scores_shape:
        raise ValueError(
            f"mask: expected a shape broadcastable to (..., T_q, T_k) = {tuple(scores_shape)}, "
            f"got {tuple(mask.shape)}"
        )
    empty = ~mask.any(dim=-1)  # (..., T_q or 1)
    if empty.any():
        row = empty.nonzero()[0].tolist()
        raise ValueError(
            f"mask: query row {row[-1]} (index {tuple(row)}) may attend to no key at all; "
            "its softmax would be 0/0 = NaN. Every row needs at least one True."
        )


def check_qkv(q, k, v) -> torch.Size:
    """Validate q, k, v for attention and return the shape of the score matrix (..., T_q, T_k)."""
    float_tensor("q", q, min_dim=2)
    float_tensor("k", k, min_dim=2)
    float_tensor("v", v, min_dim=2)
    if k.shape[-1] != q.shape[-1]:
        raise ValueError(
            f"k: expected width d_k = {q.shape[-1]} to match q (..., T_q, d_k), "
            f"got k of shape {tuple(k.shape)}"
        )
    if v.shape[-2] != k.shape[-2]:
        raise ValueError(
            f"v: expected length T_k = {k.shape[-2]} to match k (..., T_k, d_k), "
            f"got v of shape {tuple(v.shape)}"
        )
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k, v: expected one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    batch = broadcast_shape(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    if batch is None:
        raise ValueError(
            "q, k, v: expected batch dimensions that broadcast, got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    return torch.Size((*batch, q.shape[-2], k.shape[-2]))


def scaled_dot_product_attention(q, k, v, mask=None, *, scale=True):
    """softmax(q k^T * factor) v, returning (output, weights) (lesson 01; the scale in lesson 02).

    q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v); mask is bool, True where a
    query may attend, broadcastable to (..., T_q, T_k). Weights rows sum to 1.
    """
    scores_shape = check_qkv(q, k, v)
    factor = scale_factor(scale, q.shape[-1])
    if mask is not None:
        check_mask(mask, scores_shape)
    scores = (
        q @ k.transpose(-2, -1)
    ) * factor  # (..., T_q, d_k) @ (..., d_k, T_k) -> (..., T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    # softmax subtracts each row's max first, so scores of 1e4 never overflow to inf
    weights = torch.softmax(scores, dim=-1)  # (..., T_q, T_k)
    return weights @ v, weights  # (..., T_q, T_k) @ (..., T_k, d_v) -> (..., T_q, d_v)


# ---------------------------------------------------------------- lesson 01


def toy_embeddings(words, D: int = 16, seed: int = 0) -> torch.Tensor:
    """(T, D) random embeddings, one fixed vector per distinct word: repeats match (lesson 01)."""
    if isinstance(words, str) or not all(isinstance(w, str) for w in words) or not words:
        raise TypeError(f"words: expected a non-empty list of strings, got {words!r}")
    positive_int("D", D)
    vocabulary = sorted(set(words))
    table = torch.randn(len(vocabulary), D, generator=torch.Generator().manual_seed(seed))
    return table[[vocabulary.index(w) for w in words]]  # (T, D)


def project_qkv(x, d: int, seed: int = 0):
    """Random (untrained) projections of x (..., T, D) to q, k, v of width d (lesson 01).

    Weights are N(0, 1/D), so q, k and v components have about the variance of x's.
    """
    float_tensor("x", x, min_dim=2)
    positive_int("d", d)
    D = x.shape[-1]
    g = torch.Generator().manual_seed(seed)
    w_q, w_k, w_v = (torch.randn(D, d, generator=g) / math.sqrt(D) for _ in range(3))
    return x @ w_q, x @ w_k, x @ w_v  # (..., T, D) @ (D, d) -> (..., T, d)


def influence_on_last(fn, x) -> torch.Tensor:
    """(T,) Frobenius norm of d fn(x)[-1] / d x[t] for each position t of x (T, D) (lesson 01).

    How strongly the last output still depends on each earlier input: the question of
    how far information travels through a model in one forward pass.
    """
    float_tensor("x", x, min_dim=2)
    if x.dim() != 2:
        raise ValueError(f"x: expected a (T, D) sequence, got shape {tuple(x.shape)}")
    jac = torch.autograd.functional.jacobian(lambda inp: fn(inp)[-1], x)  # (D_out, T, D)
    return jac.pow(2).sum(dim=(0, 2)).sqrt()  # (T,)


# ---------------------------------------------------------------- lesson 02


def random_qkv(n: int, T: int, d_k: int, d_v: int = 16, generator=None):
    """n random (T, d_k) queries and keys and (T, d_v) values, entries N(0, 1) (lesson 02)."""
    for name, value in (("n", n), ("T", T), ("d_k", d_k), ("d_v", d_v)):
        positive_int(name, value)
    q = torch.randn(n, T, d_k, generator=generator)
    k = torch.randn(n, T, d_k, generator=generator)
    v = torch.randn(n, T, d_v, generator=generator)
    return q, k, v


def sample_scores(d_k: int, n: int, *, scale=False, generator=None) -> torch.Tensor:
    """(n,) dot products q . k of independent unit-variance q, k in d_k dimensions (lesson 02)."""
    positive_int("d_k", d_k)
    positive_int("n", n)
    q = torch.randn(n, d_k, generator=generator)
    k = torch.randn(n, d_k, generator=generator)
    return (q * k).sum(dim=-1) * scale_factor(scale, d_k)  # (n,)


def softmax_entropy(weights) -> torch.Tensor:
    """Entropy in nats of each distribution along the last axis; 0 log 0 counts as 0 (lesson 02).

    log(T) for a uniform row over T keys, 0 for a one-hot row.
    """
    float_tensor("weights", weights)
    return -torch.special.xlogy(weights, weights).sum(dim=-1)  # (...)


def attention_gradients(q, k, v, *, scale=True, upstream=None):
    """Weights and the gradients of L = sum(output * upstream) w.r.t. the scores and q (lesson 02).

    "Scores" are what the softmax sees, after any scaling. Returns
    (weights (..., T, T), grad_scores (..., T, T), grad_q (..., T, d_k)). Without
    `upstream`, one of ones is used; the lesson passes a random one (a random readout).
    """
    check_qkv(q, k, v)
    q = q.detach().clone().requires_grad_(True)
    scores = (q @ k.transpose(-2, -1)) * scale_factor(scale, q.shape[-1])  # (..., T, T)
    scores.retain_grad()
    weights = torch.softmax(scores, dim=-1)  # (..., T, T)
    output = weights @ v  # (..., T, T) @ (..., T, d_v) -> (..., T, d_v)
    if upstream is None:
        upstream = torch.ones_like(output)
    if upstream.shape != output.shape:
        raise ValueError(
            f"upstream: expected the output's shape {tuple(output.shape)}, "
            f"got {tuple(upstream.shape)}"
        )
    (output * upstream).sum().backward()
    return weights.detach(), scores.grad, q.grad


def typical_gradient_norms(
    d_k: int, *, scale, T: int = 8, d_v: int = 16, n: int = 64, seed: int = 0
):
    """Median over n*T queries of the per-query gradient norm w.r.t. scores and q (lesson 02).

    Returns (scores_norm, q_norm, weights (n, T, T), scores (n, T, T)). The median is the
    typical query: without scaling a few queries whose top two scores nearly tie keep a
    large gradient, while most get almost none.
    """
    g = torch.Generator().manual_seed(seed)
    with one_thread():
        q, k, v = random_qkv(n, T, d_k, d_v, generator=g)
        upstream = torch.randn(n, T, d_v, generator=g)
        weights, grad_scores, grad_q = attention_gradients(q, k, v, scale=scale, upstream=upstream)
        scores = (q @ k.transpose(-2, -1)) * scale_factor(scale, d_k)  # (n, T, T)
    return (
        grad_scores.norm(dim=-1).median().item(),
        grad_q.norm(dim=-1).median().item(),
        weights,
        scores,
    )


def vanishing_gradient_width(widths, *, threshold: float = 0.01, wrt: str = "q", seed: int = 0):
    """The first width in widths where the unscaled head's typical gradient is below threshold
    times the scaled head's; None if none is (lesson 02).

    Both heads are measured by typical_gradient_norms with the same seed, so they see the same
    random problems; wrt picks the gradient with respect to "q" or to the "scores".
    """
    which = ("scores", "q").index(one_of("wrt", wrt, ("scores", "q")))
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise TypeError(f"threshold: expected a positive number, got {type(threshold).__name__}")
    if not threshold > 0:
        raise ValueError(f"threshold: expected a positive number, got {threshold!r}")
    widths = list(widths)
    if not widths:
        raise ValueError("widths: expected at least one width d_k, got none")
    for d_k in widths:
        unscaled = typical_gradient_norms(d_k, scale=False, seed=seed)[which]
        scaled = typical_gradient_norms(d_k, scale=True, seed=seed)[which]
        if unscaled / scaled < threshold:
            return d_k
    return None


def marked_average_batch(B: int, T: int, D: int, marked: int = 3, generator=None):
    """A toy task for lesson 02's training run: x (B, T, D) and target (B, D - 2).

    Feature 0 flags `marked` tokens per sequence, feature 1 is a constant 1 on every token,
    the rest is content. Every position must output the mean content of the flagged
    tokens: a job for attention spread evenly over them, not for a one-hot pick.
    """
    for name, value in (("B", B), ("T", T), ("D", D), ("marked", marked)):
        positive_int(name, value)
    if marked > T or D < 3:
        raise ValueError(f"marked, D: expected marked <= T = {T} and D >= 3, got {marked}, {D}")
    x = torch.randn(B, T, D, generator=generator)
    picks = torch.rand(B, T, generator=generator).argsort(dim=-1)[:, :marked]  # (B, marked)
    flag = torch.zeros(B, T)
    flag[torch.arange(B)[:, None], picks] = 1.0
    x[..., 0] = flag
    x[..., 1] = 1.0
    target = (x[..., 2:] * flag[..., None]).sum(dim=1) / marked  # (B, D - 2)
    return x, target


class SingleHeadLayer(torch.nn.Module):
    """One attention head whose values are the tokens' content; only W_q, W_k learn (lesson 02)."""

    def __init__(self, D: int, d: int, *, scale=True):
        super().__init__()
        self.w_q = torch.nn.Linear(D, d, bias=False)  # weights N(0, 1/D): q entries ~ unit variance
        self.w_k = torch.nn.Linear(D, d, bias=False)
        for layer in (self.w_q, self.w_k):
            torch.nn.init.normal_(layer.weight, std=1 / math.sqrt(D))
        self.factor = scale_factor(scale, d)

    def forward(self, x):
        scores = (self.w_q(x) @ self.w_k(x).transpose(-2, -1)) * self.factor  # (B, T, T)
        weights = torch.softmax(scores, dim=-1)  # (B, T, T)
        return weights @ x[..., 2:], scores, weights  # (B, T, T) @ (B, T, D-2) -> (B, T, D-2)


def train_single_head(
    *,
    scale,
    d: int = 256,
    steps: int = 60,
    D: int = 16,
    T: int = 8,
    B: int = 32,
    lr: float = 0.5,
    seed: int = 0,
) -> dict:
    """Train a SingleHeadLayer on marked_average_batch with SGD; per-step history (lesson 02).

    Returns lists "loss", "entropy" (mean attention entropy, nats), "max_weight" (mean
    largest weight per query), "flagged" (mean weight a query puts on the flagged keys) and
    "grad_scores" (median per-query gradient norm w.r.t. the scores, the signal that reaches
    W_q and W_k through the softmax). It runs in float64: the unscaled run's gradients are
    so small that float32 rounding, which differs from CPU to CPU, would steer it.
    """
    positive_int("steps", steps)
    with one_thread():
        return _train(scale, d, steps, D, T, B, lr, seed)


def _train(scale, d, steps, D, T, B, lr, seed) -> dict:
    torch.manual_seed(seed)
    data = torch.Generator().manual_seed(seed + 1)
    model = SingleHeadLayer(D, d, scale=scale).double()
    params = list(model.parameters())
    velocity = [torch.zeros_like(p) for p in params]  # SGD with momentum 0.9, written out
    history = {"loss": [], "entropy": [], "max_weight": [], "flagged": [], "grad_scores": []}
    for _ in range(steps):
        x, target = (t.double() for t in marked_average_batch(B, T, D, generator=data))
        output, scores, weights = model(x)
        scores.retain_grad()
        loss = (output - target[:, None]).pow(2).mean()  # target broadcast to every position
        for p in params:
            p.grad = None
        loss.backward()
        history["loss"].append(loss.item())
        history["entropy"].append(softmax_entropy(weights.detach()).mean().item())
        history["max_weight"].append(weights.detach().amax(dim=-1).mean().item())
        flagged = (weights.detach() * x[:, None, :, 0]).sum(dim=-1)  # (B, T): flag is feature 0
        history["flagged"].append(flagged.mean().item())
        history["grad_scores"].append(scores.grad.norm(dim=-1).median().item())
        with torch.no_grad():
            for p, v in zip(params, velocity, strict=True):
                v.mul_(0.9).add_(p.grad)
                p.sub_(lr * v)
    return history
