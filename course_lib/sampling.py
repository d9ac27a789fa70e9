"""Sampling a trained model and reading the samples against the toy language's rules, and
counting what attention costs (lesson 10).

A sampled line is read by the generator itself: `rule_check` follows `language.step` over the
line, as `language.next_token_distributions` does, and gives the exact probability the
language gives each sampled token, and the first token it could never have written. Counts
of bytes and multiply-adds are the same on every machine; wall times are for figures only.

`python -m course_lib.sampling` rebuilds data/sampling.json, the lesson's table of rule
checks over temperatures and top-k on the three shipped base models (about a minute).
"""

import argparse
import json
import math
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from course_lib import corpus, language
from course_lib._validation import positive_int
from course_lib.memory import allocations
from course_lib.model import generate
from course_lib.paths import DATA_DIR

RESULTS = DATA_DIR / "sampling.json"
SEEDS = (0, 1, 2)  # the shipped base models
PROMPTS, SAMPLES, PROMPT_LEN = 8, 16, 4  # 8 line starts of 4 tokens, 16 samples of each
WINDOW = 4  # diversity: how many different first WINDOW new tokens a prompt's samples have
LINE_LEN = corpus.SEQ_LEN  # every sample is cut at the trained length
SETTINGS = (  # (temperature, top_k)
    (0, None), (0.2, None), (0.5, None), (0.8, None), (1.0, None), (1.2, None), (1.5, None),
    (2.0, None), (1.0, 1), (1.0, 2), (1.0, 3), (1.0, 5), (1.0, 10), (1.5, 3), (2.0, 3),
)  # fmt: skip


# ---------------------------------------------------------------- reading a sample


@dataclass(frozen=True)
class RuleCheck:
    """One line read by the generator (lesson 10)."""

    probs: tuple  # the language's probability of each token after the first, until a break
    broken: int | None  # the position of the first token the language never writes there


def _first_beliefs(token: str) -> dict:
    beliefs = {}
    for p, written, changes in language.step(language.State()):
        if written == token:
            after = language.State()._replace(**changes)
            beliefs[after] = beliefs.get(after, 0.0) + p
    return beliefs


def _next(beliefs: dict, token: str) -> dict:
    """The states after `token`, each weighted by the probability of reaching it and writing
    token (their sum is the language's probability of token here); empty if none can."""
    total, updated = sum(beliefs.values()), {}
    for state, weight in beliefs.items():
        for p, written, changes in language.step(state):
            if written == token:
                after = state._replace(**changes)
                updated[after] = updated.get(after, 0.0) + weight * p / total
    return updated


def rule_check(tokens) -> RuleCheck:
    """Follow the generator over a line, from its start: every state it could be in and its
    probability, as language.next_token_distributions does; stop at the first token that no
    state can write (probability 0), a broken rule (lesson 10)."""
    tokens = list(tokens)
    if not tokens:
        raise ValueError("tokens: expected a line of at least one token, got none")
    beliefs = _first_beliefs(tokens[0])
    if not beliefs:
        return RuleCheck((), 0)
    probs = []
    for t in range(1, len(tokens)):
        beliefs = _next(beliefs, tokens[t])
        if not beliefs:
            return RuleCheck(tuple(probs), t)
        probs.append(sum(beliefs.values()))
    return RuleCheck(tuple(probs), None)


def language_next(tokens) -> dict[str, float]:
    """The language's exact distribution of the token after `tokens` (a line's start)
    (lesson 10)."""
    tokens = list(tokens)
    check = rule_check(tokens)
    if check.broken is not None:
        raise ValueError(f"tokens: {tokens[check.broken]!r} at position {check.broken} breaks "
                         "a rule of the language")  # fmt: skip
    beliefs = _first_beliefs(tokens[0])
    for token in tokens[1:]:
        beliefs = _next(beliefs, token)
    total, dist = sum(beliefs.values()), {}
    for state, weight in beliefs.items():
        for p, written, _ in language.step(state):
            dist[written] = dist.get(written, 0.0) + weight * p / total
    return dist


def read_samples(ids: torch.Tensor, prompt_len: int, group: int) -> dict:
    """What a batch of sampled lines (N, T) shows, rows in groups of `group` samples of one
    prompt: the share of lines that keep every rule, and how many different starts (the
    first WINDOW new tokens) each prompt's samples have, on average (lesson 10)."""
    checks = [rule_check(corpus.to_tokens(row)) for row in ids]
    starts = [tuple(row[prompt_len : prompt_len + WINDOW].tolist()) for row in ids]
    distinct = [len(set(starts[i : i + group])) for i in range(0, len(starts), group)]
    return {
        "kept": sum(c.broken is None for c in checks) / len(checks),
        "distinct": sum(distinct) / len(distinct),
    }


def broken_skill(tokens, at: int) -> str:
    """The skill (language.SKILLS) that the prediction of tokens[at], a line's first broken
    token (RuleCheck.broken), asked for: what the model got wrong there (lesson 12)."""
    tokens = list(tokens)
    if not 0 < at < len(tokens):
        raise ValueError(f"at: expected a position in 1..{len(tokens) - 1}, got {at!r}")
    beliefs = _first_beliefs(tokens[0])
    for token in tokens[1:at]:
        beliefs = _next(beliefs, token)
    if not beliefs:
        raise ValueError(f"tokens: a rule is broken before position {at}")
    return language._skill(beliefs, tokens[at], tokens, at - 1)


def leak_by_skill(model, ids: torch.Tensor, temperature: float = 1.0) -> dict[str, float]:
    """The sampler's mean probability on tokens the language never writes, over every
    prediction of the language's own lines ids (N, T) and over each skill's (lesson 12)."""
    if not temperature > 0:
        raise ValueError(f"temperature: expected a positive number, got {temperature}")
    with torch.no_grad():
        logits = model(ids)[:, :-1]  # (N, T - 1, V)
    lost = (torch.softmax(logits / temperature, dim=-1) * ~allowed(ids)).sum(dim=-1)  # (N, T-1)
    skills = [language.next_token_distributions(corpus.to_tokens(row))[1] for row in ids]
    out = {"all": lost.mean().item()}
    for skill in language.SKILLS:
        mask = torch.tensor([[label == skill for label in row] for row in skills])
        if mask.any():
            out[skill] = lost[mask].mean().item()
    return out


def allowed(ids: torch.Tensor) -> torch.Tensor:
    """(N, T - 1, V) bool: True where the language may write token v after ids[n, :t + 1]
    (lines of the language, each from its start) (lesson 10)."""
    N, T = ids.shape
    out = torch.zeros(N, T - 1, len(corpus.VOCAB), dtype=torch.bool)
    for n, row in enumerate(ids):
        dists, _ = language.next_token_distributions(corpus.to_tokens(row))
        for t, dist in enumerate(dists):
            out[n, t, [corpus.TOKEN_ID[token] for token in dist]] = True
    return out


def leak(model, ids: torch.Tensor, temperature: float, start: int = PROMPT_LEN - 1) -> dict:
    """Read on the language's own lines: the mean probability the sampler at `temperature`
    puts on tokens the language never writes there (the leak), from position `start` on, and
    the chance a line of those draws keeps every rule, the product of (1 - leak) along it
    (lesson 10)."""
    if not temperature > 0:
        raise ValueError(f"temperature: expected a positive number, got {temperature}")
    with torch.no_grad():
        logits = model(ids)[:, :-1]  # (N, T - 1, V)
    probs = torch.softmax(logits / temperature, dim=-1)
    lost = (probs * ~allowed(ids)).sum(dim=-1)[:, start:]  # (N, T - 1 - start)
    return {"leak": lost.mean().item(), "keep": (1 - lost).prod(dim=-1).mean().item()}


def argmax_share(model, ids: torch.Tensor, temperature: float) -> float:
    """The mean probability the sampler at `temperature` gives the model's most likely
    token, over every position of ids: 1 is greedy (lesson 10)."""
    with torch.no_grad():
        logits = model(ids)  # (N, T, V)
    return torch.softmax(logits / temperature, dim=-1).amax(dim=-1).mean().item()


def prompts(count: int = PROMPTS, length: int = PROMPT_LEN) -> torch.Tensor:
    """The first `length` tokens of the first `count` lines of the valid split (count, length)
    (lesson 10)."""
    return corpus.load_split("valid")[:count, :length]


def sample_and_read(model, temperature, top_k, *, seed=0, num_prompts=PROMPTS,
                    samples=SAMPLES, sampler=generate) -> dict:  # fmt: skip
    """Sample `samples` lines after each of the first `num_prompts` prompts and read them
    (lesson 10)."""
    start = prompts(num_prompts).repeat_interleave(samples, dim=0)  # (P * S, PROMPT_LEN)
    ids = sampler(model, start, LINE_LEN - PROMPT_LEN, temperature=temperature, top_k=top_k,
                  seed=seed)  # fmt: skip
    return read_samples(ids, PROMPT_LEN, samples)


def favourite_breaks(model, temperature, *, seed=0) -> dict:
    """Of the lines sample_and_read draws at `temperature`, those that break a rule: how many,
    and at how many of them the breaking token is the model's own most likely one (lesson 10)."""
    start = prompts().repeat_interleave(SAMPLES, dim=0)  # (P * S, PROMPT_LEN)
    ids = generate(model, start, LINE_LEN - PROMPT_LEN, temperature=temperature, seed=seed)
    with torch.no_grad():
        favourite = model(ids).argmax(dim=-1)  # (N, T): the model's choice after each prefix
    broken = favourites = 0
    for row, best in zip(ids, favourite, strict=True):
        at = rule_check(corpus.to_tokens(row)).broken
        if at is not None:
            broken += 1
            favourites += int(best[at - 1] == row[at])
    return {"broken": broken, "favourite": favourites}


def build_table(seeds=SEEDS, settings=SETTINGS) -> dict:
    """data/sampling.json's content: each setting read on each seed's base model (lesson 10)."""
    from course_lib.variants import load_trained

    rows = []
    for temperature, top_k in settings:
        runs = [sample_and_read(load_trained("base", s), temperature, top_k) for s in seeds]
        rows.append({"temperature": temperature, "top_k": top_k, "runs": runs})
    return {
        "prompts": PROMPTS, "samples": SAMPLES, "prompt_len": PROMPT_LEN, "line_len": LINE_LEN,
        "window": WINDOW, "seeds": list(seeds), "rows": rows,
    }  # fmt: skip


def load_table() -> dict:
    """data/sampling.json, written by `python -m course_lib.sampling` (lesson 10)."""
    return json.loads(RESULTS.read_text(encoding="utf-8"))


# ---------------------------------------------------------------- what attention costs


def score_bytes(B: int, H: int, T: int, bytes_per_value: int = 4) -> int:
    """Bytes of one (B, H, T, T) matrix of float32 scores (lesson 10)."""
    return B * H * T * T * bytes_per_value


def attention_multiply_adds(B: int, H: int, T: int, d: int) -> int:
    """Multiply-adds of q k^T and weights v: T * T * d each, per head and sentence (lesson 10)."""
    return 2 * B * H * T * T * d


def counted_multiply_adds(fn, *args, **kwargs) -> int:
    """Multiply-adds torch's FlopCounterMode sees in fn's matrix products (flops / 2); a fused
    kernel whose products it cannot see inside counts 0 (lesson 10)."""
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        fn(*args, **kwargs)
    return counter.get_total_flops() // 2


def fused_causal(q, k, v):
    """torch's fused attention with its own causal mask: it never takes a (T, T) mask
    (lesson 10)."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def memory_table(attention, lengths, B: int = 1, H: int = 4, d: int = 32) -> list[dict]:
    """For each T: the largest block and the peak bytes of `attention(q, k, v, mask)` (yours,
    causal mask passed in) and of torch's fused kernel, under no_grad, on one torch thread:
    the fused kernel keeps a buffer per thread, so its bytes depend on the thread count
    (lesson 10)."""
    from course_lib.attention import causal_mask
    from course_lib.runtime import one_thread

    for name, value in (("B", B), ("H", H), ("d", d)):
        positive_int(name, value)
    g = torch.Generator().manual_seed(0)
    rows = []
    for T in lengths:
        q, k, v = (torch.randn(B, H, T, d, generator=g) for _ in range(3))
        mask = causal_mask(T)
        with torch.no_grad(), one_thread():
            mine, fused = allocations(attention, q, k, v, mask), allocations(fused_causal, q, k, v)
        rows.append({"T": T, "mine": mine, "fused": fused})
    return rows


def fitted_exponent(xs, ys) -> float:
    """Slope of log y against log x, least squares: y grows as x to this power (lesson 10)."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    num = sum((a - mx) * (b - my) for a, b in zip(lx, ly, strict=True))
    return num / sum((a - mx) ** 2 for a in lx)


def wall_times(fns: dict, lengths, B=1, H=4, d=32, repeats=3) -> dict:
    """Best-of-repeats seconds of each fn(q, k, v, mask) per T, for a figure only: times
    depend on the machine, so no lesson prints them (lesson 10)."""
    from course_lib.attention import causal_mask

    g = torch.Generator().manual_seed(1)
    out = {name: [] for name in fns}
    for T in lengths:
        q, k, v = (torch.randn(B, H, T, d, generator=g) for _ in range(3))
        mask = causal_mask(T)
        for name, fn in fns.items():
            best = math.inf
            with torch.no_grad():
                for _ in range(repeats):
                    start = time.perf_counter()
                    fn(q, k, v, mask)
                    best = min(best, time.perf_counter() - start)
            out[name].append(best)
    return out


def main(argv=None) -> None:
    """Rebuild data/sampling.json (lesson 10)."""
    parser = argparse.ArgumentParser(description="Rebuild data/sampling.json (lesson 10).")
    parser.parse_args(argv)
    torch.set_num_threads(1)
    RESULTS.write_text(json.dumps(build_table(), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
