"""Lesson 02's experiment: unscaled scores saturate the softmax and starve its gradient,
measured on random problems and in a short training run of one head (lesson 02).

The attention itself is course_lib.attention; lesson 02's sweep over trained models is
course_lib.scale_sweep.
"""

import math

import torch

from course_lib._validation import float_tensor, one_of, positive_int
from course_lib.attention import check_qkv, scale_factor
from course_lib.runtime import one_thread


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
    """Train a SingleHeadLayer on marked_average_batch with SGD, momentum 0.9; per-step history
    (lesson 02).

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
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    history = {"loss": [], "entropy": [], "max_weight": [], "flagged": [], "grad_scores": []}
    for _ in range(steps):
        x, target = (t.double() for t in marked_average_batch(B, T, D, generator=data))
        output, scores, weights = model(x)
        scores.retain_grad()
        loss = (output - target[:, None]).pow(2).mean()  # target broadcast to every position
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        history["loss"].append(loss.item())
        history["entropy"].append(softmax_entropy(weights.detach()).mean().item())
        history["max_weight"].append(weights.detach().amax(dim=-1).mean().item())
        flagged = (weights.detach() * x[:, None, :, 0]).sum(dim=-1)  # (B, T): flag is feature 0
        history["flagged"].append(flagged.mean().item())
        history["grad_scores"].append(scores.grad.norm(dim=-1).median().item())
        optimizer.step()
    return history
