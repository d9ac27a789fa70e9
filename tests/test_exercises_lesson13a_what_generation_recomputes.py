"""Lesson 13's exercises: the notebook's solutions pass, learner-style mistakes get their hint.

Every wrong function here is written the way a learner would write it (angle tables with the
wrong rows, masks from tril, caches kept in a list, heads copied with repeat), not taken from
the bug list in course_lib/exercises/lesson13/.
"""

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from course_lib.checks import (
    check_attend_cached,
    check_forward_with_cache,
    check_generate_cached,
    check_grouped_multihead,
    check_rope_from,
)
from course_lib.exercises.core import run
from course_lib.exercises.lesson13 import (
    ATTEND_CACHED,
    EXERCISES,
    FORWARD_WITH_CACHE,
    GENERATE_CACHED,
    GROUPED_MULTIHEAD,
    ROPE_FROM,
    forward_with_cache_reference,
    run_forward,
    stepwise,
    uncached,
)
from course_lib.model import generate
from course_lib.variants import load_trained
from helpers import assert_stubs_not_implemented, notebook_functions, stub, verdict

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "13_kv_cache_and_gqa.ipynb"
NAMES = ("rope_from", "attend_cached", "forward_with_cache", "generate_cached", "grouped_multihead")


def _check(exercise, fn, bug, verdict_of=None):
    """fn fails, matched to `bug`, whose cause is the first hint; the last names the lesson."""
    result = (verdict_of or (lambda f: run(exercise, f)))(fn)
    assert not result.passed, result.message
    assert result.bug == bug, result.message
    cause = next(b.cause for b in exercise.bugs if b.name == bug)
    assert result.steps[0] == cause and result.steps[-1] == f"See {exercise.idea}."
    return result


# ---------------------------------------------------------------- right answers, as written


def rope_from(x, start):
    T, d = x.shape[-2:]
    theta = 10000 ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)  # (d/2,)
    angles = torch.arange(start, start + T, dtype=x.dtype)[:, None] * theta  # (T, d/2)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack(
        (a * angles.cos() - b * angles.sin(), a * angles.sin() + b * angles.cos()), dim=-1
    ).flatten(-2)


def _attend_with(
    *,
    start=lambda S: S,
    cat=lambda past, new: torch.cat([past, new], dim=2),
    allowed=lambda S, T: torch.ones(T, S + T, dtype=torch.bool).tril(diagonal=S),
    returned=lambda k, new_k: k,
):
    def attend(x, qkv, out, num_heads, past_k, past_v, rope=None):
        B, T, D = x.shape
        S = past_k.shape[2]
        q, k, v = qkv(x).split(D, dim=-1)
        q, k, v = (t.view(B, T, num_heads, D // num_heads).transpose(1, 2) for t in (q, k, v))
        if rope is not None:
            q, k = rope(q, start(S)), rope(k, start(S))
        keys, values = cat(past_k, k), cat(past_v, v)
        scores = q @ keys.transpose(-2, -1) / math.sqrt(D // num_heads)
        mask = allowed(S, T)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        y = (torch.softmax(scores, dim=-1) @ values).transpose(1, 2).reshape(B, T, D)
        return out(y), returned(keys, k), returned(values, v)

    return attend


# a right answer: scores by hand, the mask from tril shifted by the cache's length
attend_cached = _attend_with()


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


def grouped_multihead(x, qkv, out, num_heads, num_kv_heads, mask=None, rope=None):
    B, T, D = x.shape
    d = D // num_heads
    q, k, v = qkv(x).split([D, num_kv_heads * d, num_kv_heads * d], dim=-1)
    q = q.view(B, T, num_heads, d).transpose(1, 2)
    k = k.view(B, T, num_kv_heads, d).transpose(1, 2)
    v = v.view(B, T, num_kv_heads, d).transpose(1, 2)
    if rope is not None:
        q, k = rope(q), rope(k)
    G = num_heads // num_kv_heads
    k, v = k.repeat_interleave(G, dim=1), v.repeat_interleave(G, dim=1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    y = torch.softmax(scores, dim=-1) @ v
    return out(y.transpose(1, 2).reshape(B, T, D))


# ---------------------------------------------------------------- every exercise


@pytest.mark.parametrize("name", NAMES)
def test_the_lessons_solution_passes(name):
    mine = notebook_functions(*NAMES)
    verdict_of = run_forward if name == "forward_with_cache" else None
    exercise = next(e for e in EXERCISES if e.name == name)
    assert (verdict_of or (lambda f: run(exercise, f)))(mine[name]).passed


def test_the_right_answers_written_here_pass():
    assert run(ROPE_FROM, rope_from).passed
    assert run(ATTEND_CACHED, attend_cached).passed
    assert run_forward(forward_with_cache).passed
    assert run(GENERATE_CACHED, generate_cached).passed
    assert run(GROUPED_MULTIHEAD, grouped_multihead).passed


CHECKS = [
    check_rope_from,
    check_attend_cached,
    check_forward_with_cache,
    check_generate_cached,
    check_grouped_multihead,
]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_a_stub_is_not_implemented_yet(check, capsys):
    assert "not implemented yet" in verdict(check, stub, capsys)


def test_the_workspace_stubs_are_not_implemented_yet(capsys):
    assert_stubs_not_implemented(NOTEBOOK, CHECKS, {"torch": torch, "F": F, "math": math}, capsys)


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.name)
def test_every_bug_runs_on_every_case(exercise):
    for case in exercise.case_list():
        for bug in exercise.bugs:
            bug.wrong(*case.args, **case.kwargs)


def test_a_later_exercise_that_calls_an_unwritten_earlier_one_says_so(capsys):
    def rope_stub(x, start):
        raise NotImplementedError("Exercise rope_from: write your code here")

    out = verdict(check_forward_with_cache, forward_with(attend_cached, rope_stub), capsys)
    assert "it calls rope_from, which is not implemented yet" in out


# ---------------------------------------------------------------- rope_from


def _rope_from_with(positions):
    def rope(x, start):
        T, d = x.shape[-2:]
        theta = 10000 ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)
        angles = positions(start, T).to(x.dtype)[:, None] * theta  # (T, d/2)
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack(
            (a * angles.cos() - b * angles.sin(), a * angles.sin() + b * angles.cos()), dim=-1
        ).flatten(-2)

    return rope


def test_rope_from_that_forgets_start_is_named():
    _check(ROPE_FROM, _rope_from_with(lambda start, T: torch.arange(T)), "start_ignored")


def test_rope_from_that_starts_one_past_is_named():
    wrong = _rope_from_with(lambda start, T: torch.arange(1, T + 1) + start)
    _check(ROPE_FROM, wrong, "one_past_start")


def test_rope_from_that_turns_every_row_by_start_is_named():
    def rope(x, start):
        d = x.shape[-1]
        angle = start * 10000 ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)  # (d/2,): T = 1
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack(
            (a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()), dim=-1
        ).flatten(-2)

    result = _check(ROPE_FROM, rope, "every_row_at_start")
    assert "start 0" in result.message  # its first failing case: 6 rows from position 0


def test_rope_from_that_subtracts_start_is_named():
    _check(ROPE_FROM, _rope_from_with(lambda start, T: torch.arange(T) - start), "start_subtracted")


def test_rope_from_in_the_rotate_half_layout_is_named():
    def rope(x, start):
        T, d = x.shape[-2:]
        theta = 10000 ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)
        angles = torch.arange(start, start + T, dtype=x.dtype)[:, None] * theta
        first, second = x.chunk(2, dim=-1)
        return torch.cat(
            (
                first * angles.cos() - second * angles.sin(),
                first * angles.sin() + second * angles.cos(),
            ),
            dim=-1,
        )

    _check(ROPE_FROM, rope, "rotate_half")


def test_rope_from_built_on_lesson_06s_rope_heads_passes():
    # a right answer another way: rope_heads on the sequence padded at the front, then cut
    mine = notebook_functions("rope_heads")

    def rope(x, start):
        pad = x.new_zeros(*x.shape[:-2], start, x.shape[-1])
        return mine["rope_heads"](torch.cat([pad, x], dim=-2))[..., start:, :]

    assert run(ROPE_FROM, rope).passed


# ---------------------------------------------------------------- attend_cached


def test_attend_cached_that_turns_from_zero_is_named():
    _check(ATTEND_CACHED, _attend_with(start=lambda S: 0), "no_offset")


def test_attend_cached_that_turns_one_past_the_cache_is_named():
    _check(ATTEND_CACHED, _attend_with(start=lambda S: S + 1), "one_past")


def test_attend_cached_that_forgets_the_cache_is_named():
    wrong = _attend_with(
        cat=lambda past, new: new, allowed=lambda S, T: torch.ones(T, T, dtype=torch.bool).tril()
    )
    _check(ATTEND_CACHED, wrong, "past_dropped")


def test_attend_cached_that_appends_twice_is_named():
    wrong = _attend_with(returned=lambda keys, new: torch.cat([keys, new], dim=2))
    _check(ATTEND_CACHED, wrong, "appended_twice")


def test_attend_cached_with_the_new_keys_first_is_named():
    _check(
        ATTEND_CACHED,
        _attend_with(cat=lambda past, new: torch.cat([new, past], dim=2)),
        "new_first",
    )


def test_attend_cached_without_a_mask_is_named():
    _check(ATTEND_CACHED, _attend_with(allowed=lambda S, T: None), "no_mask")


def _fused_with(options):
    """attend_cached on torch's fused attention, called with options(S, T) as its keywords."""

    def attend(x, qkv, out, num_heads, past_k, past_v, rope=None):
        B, T, D = x.shape
        S = past_k.shape[2]
        q, k, v = (
            t.unflatten(-1, (num_heads, -1)).transpose(1, 2) for t in qkv(x).chunk(3, dim=-1)
        )
        if rope is not None:
            q, k = rope(q, S), rope(k, S)
        k, v = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)
        y = F.scaled_dot_product_attention(q, k, v, **options(S, T))
        return out(y.transpose(1, 2).reshape(B, T, D)), k, v

    return attend


def test_attend_cached_with_is_causal_is_named():
    # torch's is_causal=True masks from the top left: with a cache, the new token sees key 0
    result = _check(
        ATTEND_CACHED, _fused_with(lambda S, T: {"is_causal": True}), "mask_not_shifted"
    )
    assert "is_causal=True" in result.steps[0]


def test_attend_cached_with_a_t_by_t_causal_mask_cut_wide_is_named():
    wrong = _attend_with(allowed=lambda S, T: torch.ones(T, S + T, dtype=torch.bool).tril())
    _check(ATTEND_CACHED, wrong, "mask_not_shifted")


def test_attend_cached_with_torchs_fused_attention_and_a_mask_passes():
    def shifted(S, T):
        keys_at, queries_at = torch.arange(S + T), torch.arange(S, S + T)
        return {"attn_mask": keys_at[None, :] <= queries_at[:, None]}

    assert run(ATTEND_CACHED, _fused_with(shifted)).passed


# ---------------------------------------------------------------- forward_with_cache


def test_forward_with_one_cache_for_every_layer_is_named():
    _check(
        FORWARD_WITH_CACHE,
        _forward_with(slot=lambda i: 0),
        "one_cache_for_every_layer",
        run_forward,
    )


def test_forward_that_returns_the_old_cache_is_named():
    _check(FORWARD_WITH_CACHE, _forward_with(keep_old=True), "old_cache_returned", run_forward)


def test_forward_that_adds_to_the_normalised_stream_is_named():
    _check(FORWARD_WITH_CACHE, _forward_with(stream="h"), "added_to_the_norm", run_forward)


def test_forward_that_returns_the_last_logits_only_is_named():
    _check(FORWARD_WITH_CACHE, _forward_with(last_only=True), "last_logits_only", run_forward)


def test_forward_without_the_final_norm_is_named():
    _check(FORWARD_WITH_CACHE, _forward_with(final_norm=False), "no_final_norm", run_forward)


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


# ---------------------------------------------------------------- grouped_multihead


def _grouped_with(
    *,
    share=lambda t, G: t.repeat_interleave(G, dim=1),
    order="kv",
    use_mask=True,
    project=True,
    rope_v=False,
):
    def grouped(x, qkv, out, num_heads, num_kv_heads, mask=None, rope=None):
        B, T, D = x.shape
        d = D // num_heads
        q, k, v = qkv(x).split([D, num_kv_heads * d, num_kv_heads * d], dim=-1)
        if order == "vk":
            k, v = v, k
        q = q.view(B, T, num_heads, d).transpose(1, 2)
        k = k.view(B, T, num_kv_heads, d).transpose(1, 2)
        v = v.view(B, T, num_kv_heads, d).transpose(1, 2)
        if rope is not None:
            q, k = rope(q), rope(k)
            if rope_v:
                v = rope(v)
        G = num_heads // num_kv_heads
        k, v = share(k, G), share(v, G)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask if use_mask else None)
        y = y.transpose(1, 2).reshape(B, T, D)
        return out(y) if project else y

    return grouped


def test_grouped_heads_copied_with_repeat_are_named():
    _check(GROUPED_MULTIHEAD, _grouped_with(share=lambda t, G: t.repeat(1, G, 1, 1)), "tiled")


def test_grouped_heads_copied_with_cat_are_named():
    _check(GROUPED_MULTIHEAD, _grouped_with(share=lambda t, G: torch.cat([t] * G, dim=1)), "tiled")


def test_grouped_keys_and_values_swapped_are_named():
    _check(GROUPED_MULTIHEAD, _grouped_with(order="vk"), "k_and_v_swapped")


def test_grouped_with_one_key_head_for_all_is_named():
    wrong = _grouped_with(share=lambda t, G: t[:, :1].expand(-1, t.shape[1] * G, -1, -1))
    _check(GROUPED_MULTIHEAD, wrong, "one_key_head")


def test_grouped_without_the_mask_is_named():
    _check(GROUPED_MULTIHEAD, _grouped_with(use_mask=False), "mask_ignored")


def test_grouped_without_the_output_projection_is_named():
    _check(GROUPED_MULTIHEAD, _grouped_with(project=False), "no_out")


def test_grouped_with_rope_on_the_values_is_named():
    _check(GROUPED_MULTIHEAD, _grouped_with(rope_v=True), "rope_on_v")


def test_grouped_by_broadcasting_the_groups_passes():
    # no copies: each group of query heads laid beside its key head, broadcast
    def grouped(x, qkv, out, num_heads, num_kv_heads, mask=None, rope=None):
        B, T, D = x.shape
        d = D // num_heads
        q, k, v = qkv(x).split([D, num_kv_heads * d, num_kv_heads * d], dim=-1)
        q = q.view(B, T, num_heads, d).transpose(1, 2)
        k, v = (t.view(B, T, num_kv_heads, d).transpose(1, 2) for t in (k, v))
        if rope is not None:
            q, k = rope(q), rope(k)
        q = q.unflatten(1, (num_kv_heads, -1))  # (B, H_kv, G, T, d)
        scores = q @ k[:, :, None].transpose(-2, -1) / math.sqrt(d)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        y = (torch.softmax(scores, dim=-1) @ v[:, :, None]).flatten(1, 2)  # (B, H, T, d)
        return out(y.transpose(1, 2).reshape(B, T, D))

    assert run(GROUPED_MULTIHEAD, grouped).passed


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
