"""Lesson 13b's exercises: learner-style mistakes get their hint.

Every wrong function here is written the way a learner would write it (caches kept in a list,
one generator per step, the whole sequence fed again), not taken from the bug list in
course_lib/exercises/lesson13b_kv_cache.py. The right rope_from and attend_cached they build on
are lesson 13a's tests' own.
"""

from pathlib import Path

import pytest
import torch
from test_exercises_lesson13a_what_generation_recomputes import (
    _attend_with,
    attend_cached,
    rope_from,
)

from course_lib.checks import check_forward_with_cache, check_generate_cached
from course_lib.exercises.core import run
from course_lib.exercises.lesson13b_kv_cache import (
    FORWARD_WITH_CACHE,
    GENERATE_CACHED,
    forward_with_cache_reference,
    run_forward,
    stepwise,
    uncached,
)
from course_lib.model import generate
from course_lib.variants import load_trained
from helpers import failed_with_hint as _check
from helpers import verdict

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "13b_kv_cache.ipynb"

# ---------------------------------------------------------------- right answers, as written


def _forward_with(
    attend=None,
    rope=rope_from,
    *,
    slot=lambda i: i,
    stream="x",
    final_norm=True,
    last_only=False,
    keep_old=False,
):
    def forward(model, ids, cache):
        x = model.embed(ids)
        new_cache = []
        for i, block in enumerate(model.blocks):
            a = block.attn
            if cache:
                past_k, past_v = cache[slot(i)]
            else:
                past_k = past_v = torch.zeros(ids.shape[0], a.num_heads, 0, a.d_head, dtype=x.dtype)
            h = block.norm1(x)
            y, k, v = (attend or attend_cached)(h, a.qkv, a.out, a.num_heads, past_k, past_v, rope)
            x = (h if stream == "h" else x) + y
            x = x + block.ff(block.norm2(x))
            new_cache.append((k, v))
        if last_only:
            x = x[:, -1:]
        logits = model.head(model.norm(x)) if final_norm else model.head(x)
        return logits, (cache if keep_old else new_cache)

    return forward


def forward_with(attend, rope=rope_from):
    """A right forward_with_cache, around the given attend_cached and rope."""
    return _forward_with(attend, rope)


forward_with_cache = forward_with(attend_cached)


def generate_cached(model, prompt, num_tokens, *, temperature=1.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        logits, cache = forward_with_cache(model, prompt, [])
        ids = prompt
        for _ in range(num_tokens):
            probs = torch.softmax(logits[:, -1] / temperature, dim=-1)
            nxt = torch.multinomial(probs, 1, generator=g)
            ids = torch.cat([ids, nxt], dim=1)
            logits, cache = forward_with_cache(model, nxt, cache)
    return ids


# ---------------------------------------------------------------- every exercise


def test_the_right_answers_written_here_pass():
    assert run_forward(forward_with_cache).passed
    assert run(GENERATE_CACHED, generate_cached).passed


def test_a_later_exercise_that_calls_an_unwritten_earlier_one_says_so(capsys):
    def rope_stub(x, start):
        raise NotImplementedError("Exercise rope_from: write your code here")

    out = verdict(check_forward_with_cache, forward_with(attend_cached, rope_stub), capsys)
    assert "it calls rope_from, which is not implemented yet" in out


# ---------------------------------------------------------------- forward_with_cache


def test_forward_with_one_cache_for_every_layer_is_named():
    _check(
        FORWARD_WITH_CACHE,
        _forward_with(slot=lambda i: 0),
        "one_cache_for_every_layer",
        judge=run_forward,
    )


def test_forward_that_returns_the_old_cache_is_named():
    wrong = _forward_with(keep_old=True)
    _check(FORWARD_WITH_CACHE, wrong, "old_cache_returned", judge=run_forward)


def test_forward_that_adds_to_the_normalised_stream_is_named():
    _check(FORWARD_WITH_CACHE, _forward_with(stream="h"), "added_to_the_norm", judge=run_forward)


def test_forward_that_returns_the_last_logits_only_is_named():
    _check(FORWARD_WITH_CACHE, _forward_with(last_only=True), "last_logits_only", judge=run_forward)


def test_forward_without_the_final_norm_is_named():
    _check(FORWARD_WITH_CACHE, _forward_with(final_norm=False), "no_final_norm", judge=run_forward)


def test_forward_that_returns_logits_alone_says_what_it_expected():
    def forward(model, ids, cache):
        return forward_with_cache(model, ids, cache)[0]

    result = run_forward(forward)
    assert not result.passed and "expected a pair (logits, cache)" in result.message


def test_forward_from_a_wrong_attend_cached_fails_too():
    # the check runs the learner's own attend_cached inside their forward
    result = run_forward(forward_with(_attend_with(start=lambda S: 0)))
    assert not result.passed


def test_right_answers_stay_within_the_tolerance_on_every_case(measure):
    """Right forwards written other ways: angles by division, angles in float64 then cast,
    the course's reference pieces. Each within 1e-5 * (1 + |logit|) of the model's own
    forward, half the check's tolerance: worst 0.80 (native AVX-512), 0.65 (generic), 0.41
    (AVX2) of 1e-5, over 1, 2 and 4 threads."""

    def rope_divided(x, start):
        T, d = x.shape[-2:]
        inv = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=x.dtype) / d))
        angles = torch.outer(torch.arange(start, start + T, dtype=x.dtype), inv)
        return _rotate(x, angles)

    def rope_float64(x, start):
        T, d = x.shape[-2:]
        theta = 10000 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        angles = torch.arange(start, start + T, dtype=torch.float64)[:, None] * theta
        return _rotate(x, angles.to(x.dtype))

    for fn in (
        forward_with_cache,
        forward_with(attend_cached, rope_divided),
        forward_with(attend_cached, rope_float64),
        forward_with_cache_reference,
    ):
        for case in FORWARD_WITH_CACHE.case_list():
            got, expected = stepwise(fn)(*case.args)[0], uncached(*case.args)[0]
            worst = ((got - expected).abs() / (1 + expected.abs())).max() / 1e-5
            assert measure("right forward's gap / (1e-5 (1 + |logit|))", worst) < 1


def _rotate(x, angles):
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack(
        (a * angles.cos() - b * angles.sin(), a * angles.sin() + b * angles.cos()), dim=-1
    ).flatten(-2)


# ---------------------------------------------------------------- generate_cached


def _generate_with(
    *,
    pick="sample",
    scale=True,
    row=-1,
    count=lambda n: n,
    reseed=False,
    keep_prompt=True,
    feed_all=False,
):
    def generate_cached(model, prompt, num_tokens, *, temperature=1.0, seed=0):
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            logits, cache = forward_with_cache(model, prompt, [])
            logits = logits[:, row]
            ids = prompt
            for _ in range(count(num_tokens)):
                if reseed:
                    g = torch.Generator().manual_seed(seed)
                probs = torch.softmax(logits / temperature if scale else logits, dim=-1)
                if pick == "argmax":
                    nxt = probs.argmax(dim=-1, keepdim=True)
                else:
                    nxt = torch.multinomial(probs, 1, generator=g)
                ids = torch.cat([ids, nxt], dim=1)
                logits, cache = forward_with_cache(model, ids if feed_all else nxt, cache)
                logits = logits[:, -1]
        return ids if keep_prompt else ids[:, prompt.shape[1] :]

    return generate_cached


def test_greedy_generation_is_named():
    _check(GENERATE_CACHED, _generate_with(pick="argmax"), "greedy")


def test_generation_without_the_temperature_is_named():
    _check(GENERATE_CACHED, _generate_with(scale=False), "temperature_ignored")


def test_generation_that_reseeds_every_step_is_named():
    _check(GENERATE_CACHED, _generate_with(reseed=True), "reseeded_every_step")


def test_generation_from_the_prompts_first_row_is_named():
    _check(GENERATE_CACHED, _generate_with(row=0), "first_row_of_the_prompt")


def test_generation_one_token_short_is_named():
    _check(GENERATE_CACHED, _generate_with(count=lambda n: n - 1), "one_short")


def test_generation_that_drops_the_prompt_is_named():
    _check(GENERATE_CACHED, _generate_with(keep_prompt=False), "new_tokens_only")


def test_generation_that_feeds_the_whole_sequence_again_is_named():
    _check(GENERATE_CACHED, _generate_with(feed_all=True), "whole_sequence_fed")


def test_generate_cached_gives_generates_tokens_for_127_tokens_from_one():
    # the base model's max_len is 128: 1 + 127 tokens fill it, the contract's longest run
    model = load_trained("base", 0)
    prompt = torch.tensor([[3]])
    assert torch.equal(generate_cached(model, prompt, 127), generate(model, prompt, 127))


# ---------------------------------------------------------------- the course's own cache


def _through_cached_forward(model, ids, cache):
    """forward_with_cache built on the course's cached_forward, its KVCache kept in the list."""
    from course_lib import kv_cache

    store = cache[0] if cache else kv_cache.new_cache(model, ids.shape[0])
    return kv_cache.cached_forward(model, ids, store), [store]


def _through_generate_cached(model, prompt, num_tokens, *, temperature=1.0, seed=0):
    from course_lib.kv_cache import generate_cached

    return generate_cached(model, prompt, num_tokens, temperature=temperature, seed=seed)


def _through_generate(model, prompt, num_tokens, *, temperature=1.0, seed=0):
    return generate(model, prompt, num_tokens, temperature=temperature, seed=seed)


def _recomputing(model, prompt, num_tokens, *, temperature=1.0, seed=0):
    """generate's tokens with no cache at all: the whole sequence through the model each step."""
    g = torch.Generator().manual_seed(seed)
    ids = prompt
    for _ in range(num_tokens):
        probs = torch.softmax(model(ids)[:, -1] / temperature, dim=-1)  # (B, V)
        ids = torch.cat((ids, torch.multinomial(probs, 1, generator=g)), dim=1)
    return ids


@pytest.mark.parametrize(
    ("exercise", "route", "called"),
    [
        (FORWARD_WITH_CACHE, _through_cached_forward, "course_lib.kv_cache.cached_forward"),
        (GENERATE_CACHED, _through_generate_cached, "course_lib.kv_cache.generate_cached"),
        (GENERATE_CACHED, _through_generate, "course_lib.model.generate"),
        (GENERATE_CACHED, _recomputing, "TinyTransformer.forward"),
    ],
    ids=["forward_with_cache", "generate_cached", "generate", "no cache"],
)
def test_the_courses_own_cache_is_refused(exercise, route, called):
    result = run_forward(route) if exercise is FORWARD_WITH_CACHE else run(exercise, route)
    assert not result.passed and result.bug == "forbidden", result.message
    assert f"your function calls {called}" in result.message
    assert result.steps[0] == exercise.forbidden_hint
