"""Lessons 03a and 03b's experiments: unscaled scores saturate the softmax and starve its
gradient, measured on random problems and in a short training run of one head (lesson 03a);
how wide freshly made nn.Linear projections make the scores, and what the variant table's
trained models say about the scale (lesson 03b).

The attention itself is course_lib.attention.
"""

import json
import math

import torch

from course_lib import corpus, variants
from course_lib._validation import float_tensor, positive_int
from course_lib.attention import scale_factor
from course_lib.bigram import yours_if_it_passes
from course_lib.model import TinyTransformer
from course_lib.runtime import one_thread


def random_qkv(n: int, T: int, d_k: int, d_v: int = 16, generator=None):
    """n random (T, d_k) queries and keys and (T, d_v) values, entries N(0, 1) (lesson 03a)."""
    for name, value in (("n", n), ("T", T), ("d_k", d_k), ("d_v", d_v)):
        positive_int(name, value)
    q = torch.randn(n, T, d_k, generator=generator)
    k = torch.randn(n, T, d_k, generator=generator)
    v = torch.randn(n, T, d_v, generator=generator)
    return q, k, v


def sample_scores(d_k: int, n: int, *, scale=False, generator=None) -> torch.Tensor:
    """(n,) dot products q . k of independent unit-variance q, k in d_k dimensions (lesson 03a)."""
    positive_int("d_k", d_k)
    positive_int("n", n)
    q = torch.randn(n, d_k, generator=generator)
    k = torch.randn(n, d_k, generator=generator)
    return (q * k).sum(dim=-1) * scale_factor(scale, d_k)  # (n,)


def random_scores(d_k: int, *, scale, n: int = 256, T: int = 8, seed: int = 0) -> torch.Tensor:
    """(n, T, T) scores the softmax sees for n random problems of T unit-variance queries and
    keys of width d_k, divided by sqrt(d_k) when scale is True (lesson 03a)."""
    q, k, _ = random_qkv(n, T, d_k, generator=torch.Generator().manual_seed(seed))
    return (q @ k.transpose(-2, -1)) * scale_factor(scale, d_k)  # (n, T, T)


def linear_scores(d_model: int, d_k: int, *, bias: bool = True, layers: int = 200,
                  n: int = 500, seed: int = 0) -> torch.Tensor:  # fmt: skip
    """(layers, n) raw scores q . k with q = W_Q(x), k = W_K(x'): for each of `layers` pairs
    of freshly made nn.Linear(d_model, d_k) (PyTorch's default initialisation), n pairs of
    token vectors x, x' with independent N(0, 1) entries (lesson 03b).

    Made under its own seed, leaving the global random state as it was.
    """
    for name, value in (("d_model", d_model), ("d_k", d_k), ("layers", layers), ("n", n)):
        positive_int(name, value)
    scores = torch.empty(layers, n)
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed)
        for i in range(layers):
            w_q = torch.nn.Linear(d_model, d_k, bias=bias)
            w_k = torch.nn.Linear(d_model, d_k, bias=bias)
            x, x_other = torch.randn(2, n, d_model)  # (n, d_model) each
            scores[i] = (w_q(x) * w_k(x_other)).sum(dim=-1)  # (n,)
    return scores


def softmax_entropy(weights) -> torch.Tensor:
    """Entropy in nats of each distribution along the last axis; 0 log 0 counts as 0 (lesson 03a).

    log(T) for a uniform row over T keys, 0 for a one-hot row.
    """
    float_tensor("weights", weights)
    return -torch.special.xlogy(weights, weights).sum(dim=-1)  # (...)


def typical_jacobian_norm(scores, jacobian) -> float:
    """The median over every row of scores (..., T) of the size (Frobenius norm) of its
    softmax Jacobian, computed by `jacobian` (the learner's or the course's) (lesson 03a)."""
    J = jacobian(scores)  # (..., T, T, T): one (T, T) matrix per row
    return J.flatten(-2).norm(dim=-1).median().item()


def jacobian_sizes(softmax_jacobian, d_ks, *, n: int = 256, T: int = 8) -> tuple[dict, str]:
    """({"scaled": [...], "unscaled": [...]}, whose): typical_jacobian_norm of random_scores
    at each d_k (seed d_k), computed with the learner's softmax_jacobian where it passes its
    check and with the course's otherwise; whose says which, in words (lesson 03a)."""
    jacobian, whose = yours_if_it_passes("softmax_jacobian", softmax_jacobian)
    sizes = {
        name: [typical_jacobian_norm(random_scores(d, scale=name == "scaled", n=n, T=T, seed=d),
                                     jacobian) for d in d_ks]
        for name in ("scaled", "unscaled")
    }  # fmt: skip
    return sizes, whose


def score_variances(score_variance, widths) -> tuple[dict, str]:
    """({width: (derived, measured)}, whose): Var(q . k) at d_model = d_k = width, derived by
    the learner's score_variance where it passes its check (the course's otherwise) and
    measured with linear_scores; whose says which, in words (lesson 03b)."""
    derive, whose = yours_if_it_passes("score_variance", score_variance)
    found = {w: (float(derive(w, w)), linear_scores(w, w).var().item()) for w in widths}
    return found, whose


def marked_average_batch(B: int, T: int, D: int, marked: int = 3, generator=None):
    """A toy task for lesson 03a's training run: x (B, T, D) and target (B, D - 2).

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
    """One attention head whose values are the tokens' content; only W_q, W_k learn (lesson 03a)."""

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
    (lesson 03a).

    Returns lists "loss", "entropy" (mean attention entropy, nats), "max_weight" (mean
    largest weight per query), "flagged" (mean weight a query puts on the flagged keys) and
    "grad_scores" (median per-query gradient norm w.r.t. the scores, the signal that reaches
    W_q and W_k through the softmax). It runs in float64, which keeps every scaled run and
    the narrow unscaled one the same to the printed digits on every CPU; the wide unscaled run
    stays chaotic even so (its rows are one-hot: a change of 1e-15 in one starting weight
    moves its loss at step 59 by about 0.04), so lesson 03a prints only bounds for its later
    steps.
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


# ---------------------------------------------------------------- the trained models


def first_scores_std(variant: str, seed: int, lines: int = 64) -> float:
    """The standard deviation of the raw scores q . k of the first head of `variant`'s model,
    untrained, made as its training run in the variant table starts (seed `seed`), on the
    first `lines` lines of the validation split (lesson 03b).

    Made under its own seed, leaving the global random state as it was.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # the table's runs build their model right after set_seed(seed)
        model = TinyTransformer.from_config(variants.VARIANTS[variant]).eval()
    attn = model.blocks[0].attn
    seen = {}
    hook = attn.register_forward_hook(lambda module, args, out: seen.update(x=args[0]))
    try:
        with torch.no_grad():
            model(corpus.load_split("valid")[:lines])
            q, k, _ = attn.qkv_heads(seen["x"])  # each (B, H, T, d)
            scores = q @ k.transpose(-2, -1)  # (B, H, T, T), before any division
    finally:
        hook.remove()
    return scores.std().item()


# the variant table's rows about the scale -> the models they compare, as the lesson names them
SCALE_ROWS = {
    "the 1/sqrt(d) scale at head width 128, one layer": "one head of width 128",
    "the 1/sqrt(d) scale at head width 64": "two heads of width 64, one after the other",
}
SKILLS = ("all", "subject", "induction", "object", "song", "bracket", "mark", "other")


def scale_rows() -> list[dict]:
    """The variant table's two rows about the scale, read from data/variants.json (lesson 03b).

    Each is {"title", "parameters", "holds", "scaled" and "unscaled": {skill: excess over the
    floor on the validation split for seeds 0, 1, 2}, "claims": [{"skill", "gap", "bar",
    "holds"}], the skill the row names first, then "all"}.
    """
    table = json.loads(variants.RESULTS.read_text(encoding="utf-8"))
    rows = []
    for name, title in SCALE_ROWS.items():
        (row,) = [r for r in table["rows"] if r["name"] == name]
        ((scaled, unscaled),) = row["pairs"]

        def seeds(variant):
            runs = sorted((r for r in table["runs"] if r["variant"] == variant),
                          key=lambda r: r["seed"])  # fmt: skip
            return {s: [r["valid"][s] for r in runs] for s in SKILLS}

        rows.append({
            "title": title,
            "parameters": table["parameters"][scaled],
            "holds": row["holds"],
            "scaled": seeds(scaled),
            "unscaled": seeds(unscaled),
            "claims": [{k: c[k] for k in ("skill", "gap", "bar", "holds")} for c in row["claims"]],
        })  # fmt: skip
    return rows


def scale_row_text(row: dict) -> str:
    """One row of scale_rows as the lesson prints it: per skill the mean and each seed's excess,
    then each claim's gap, bar and verdict (lesson 03b)."""
    lines = [
        f"{row['title']}, {row['parameters']:,} parameters: excess over the floor (nats)",
        f"{'skill':10} {'scaled: mean (seeds 0, 1, 2)':33} unscaled: mean (seeds 0, 1, 2)",
    ]
    for skill in SKILLS:
        said = [f"{sum(v) / len(v):6.3f} ({' '.join(f'{x:6.3f}' for x in v)})"
                for v in (row["scaled"][skill], row["unscaled"][skill])]  # fmt: skip
        lines.append(f"{skill:10} {said[0]:33} {said[1]}")
    for claim in row["claims"]:
        verdict = "holds" if claim["holds"] else "falls short"
        lines.append(
            f"  {claim['skill']}: gap {claim['gap']:.2f}, bar {claim['bar']:.2f}: {verdict}"
        )
    return "\n".join(lines)
