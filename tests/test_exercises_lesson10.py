"""Lesson 10's exercise: learner-style mistakes get their hint.

Every wrong generate here is written the way a learner would write it (F.softmax on the
wrong axis, topk's values drawn without its indices, the generator made in the loop, no
argument checks), not taken from the bug list in course_lib/exercises/lesson10/.
"""

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from course_lib.checks import check_generate
from course_lib.exercises.lesson10 import BAD_ARGUMENTS, GENERATE, promises, run_generate
from course_lib.model import generate as course_generate
from helpers import failed_with_hint, verdict

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "10_sampling_and_cost.ipynb"


def _checked(model, prompt, temperature, top_k):
    if temperature < 0:
        raise ValueError(f"temperature: must be >= 0, got {temperature}")
    if top_k is not None and not 0 < top_k <= model.config.vocab_size:
        raise ValueError(f"top_k: must be in 1..{model.config.vocab_size}, got {top_k}")
    if prompt.shape[1] == 0:
        raise ValueError("prompt: empty")


def learner(*, scale=lambda z, t: z / t, pick=None, window=lambda ids, n: ids[:, -n:],
            seeded_in_loop=False, dim=-1, row=-1, keep=True, checks=True):  # fmt: skip
    """A generate as a learner writes it, with one piece swapped for the learner's slip."""

    def generate(model, prompt, num_tokens, *, temperature=1.0, top_k=None, seed=0):
        if checks:
            _checked(model, prompt, temperature, top_k)
        g = torch.Generator().manual_seed(seed)
        out = prompt.clone()
        for _ in range(num_tokens):
            if seeded_in_loop:
                g = torch.Generator().manual_seed(seed)
            with torch.no_grad():
                z = model(window(out, model.config.max_len))[:, row, :]
            if pick is not None:
                nxt = pick(z, temperature, top_k, g)
            else:
                if top_k:
                    cut = torch.topk(z, top_k).values[:, [-1]]
                    z = torch.where(z < cut, torch.full_like(z, -float("inf")), z)
                if temperature == 0:
                    nxt = torch.argmax(z, dim=-1, keepdim=True)
                else:
                    nxt = torch.multinomial(
                        F.softmax(scale(z, temperature), dim=dim), 1, generator=g
                    )
            out = torch.cat((out, nxt), dim=1)
        return out if keep else out[:, prompt.shape[1] :]

    return generate


def _top_k_values_only(z, temperature, top_k, g):
    if top_k:
        v, _ = torch.topk(z, top_k)
        if temperature == 0:
            return v.argmax(-1, keepdim=True)
        return torch.multinomial(F.softmax(v / temperature, -1), 1, generator=g)
    if temperature == 0:
        return z.argmax(-1, keepdim=True)
    return torch.multinomial(F.softmax(z / temperature, -1), 1, generator=g)


def _top_k_sorted(z, temperature, top_k, g):
    if top_k:
        v, i = torch.topk(z, top_k)
        if temperature == 0:
            return i[:, :1]
        return i.gather(1, torch.multinomial(F.softmax(v / temperature, -1), 1, generator=g))
    return _top_k_values_only(z, temperature, top_k, g)


def _top_k_off_by_one(z, temperature, top_k, g):
    if top_k:
        cut = torch.sort(z, descending=True).values[:, top_k].unsqueeze(1)
        z = z.masked_fill(z < cut, float("-inf"))
    return _top_k_values_only(z, temperature, None, g)


def _softmax_then_zero(z, temperature, top_k, g):
    """A right answer another way: probabilities first, the tail zeroed, no renormalising."""
    if temperature == 0:
        if top_k:
            z = z.masked_fill(z < torch.topk(z, top_k).values[:, -1:], float("-inf"))
        return z.argmax(-1, keepdim=True)
    p = torch.softmax(z / temperature, dim=-1)
    if top_k:
        p = p * (z >= torch.topk(z, top_k).values[:, -1:])
    return torch.multinomial(p, 1, generator=g)


def _scattered(z, temperature, top_k, g):
    """A right answer another way: the top k scattered into a row of -inf."""
    if top_k:
        v, i = torch.topk(z, top_k)
        z = torch.full_like(z, float("-inf")).scatter(1, i, v)
    if temperature == 0:
        return z.argmax(-1, keepdim=True)
    return torch.multinomial(torch.softmax(z / temperature, -1), 1, generator=g)


# ---------------------------------------------------------------- right answers


def test_the_course_generate_keeps_the_promises():
    # the promises are read from the model itself, not from the course's generate
    assert promises(course_generate) is None


# ---------------------------------------------------------------- the course's own sampler


def _wrapped(model, prompt, num_tokens, *, temperature=1.0, top_k=None, seed=0):
    return course_generate(model, prompt, num_tokens, temperature=temperature, top_k=top_k,
                           seed=seed)  # fmt: skip


def _cached(model, prompt, num_tokens, *, temperature=1.0, top_k=None, seed=0):
    from course_lib.kv_cache import generate_cached

    return generate_cached(model, prompt, num_tokens, temperature=temperature, top_k=top_k,
                           seed=seed)  # fmt: skip


def _one_step_at_a_time(z, temperature, top_k, g):
    from course_lib.model import next_token

    return next_token(z, temperature, top_k, g)


@pytest.mark.parametrize(
    ("route", "called"),
    [
        (course_generate, "course_lib.model.generate"),
        (_wrapped, "course_lib.model.generate"),
        (_cached, "course_lib.kv_cache.generate_cached"),
        (learner(pick=_one_step_at_a_time), "course_lib.model.next_token"),
    ],
    ids=["handed in as it is", "wrapped", "lesson 13b's cached generate", "its next_token"],
)
def test_the_course_sampler_is_refused(route, called):
    result = run_generate(route)
    assert not result.passed and result.bug == "forbidden", result.message
    assert f"your function calls {called}" in result.message
    assert result.steps[0] == GENERATE.forbidden_hint
    assert "course_lib.model.generate" not in " ".join(GENERATE.hints)


def test_the_hints_point_to_sections_of_the_lesson():
    import json

    cells = json.loads(NOTEBOOK.read_text())["cells"]
    headings = {
        line.lstrip("#").strip().replace("`", "")
        for c in cells
        if c["cell_type"] == "markdown"
        for line in "".join(c["source"]).splitlines()
        if line.startswith("#")
    }
    named = GENERATE.idea.split("'")[1::2]
    assert named and all(name in headings for name in named), (named, headings)


@pytest.mark.parametrize(
    "right", [learner(), learner(pick=_softmax_then_zero), learner(pick=_scattered)],
    ids=["as taught", "softmax then zero the tail", "top k scattered into -inf"],
)  # fmt: skip
def test_right_answers_written_other_ways_pass(right):
    verdict_ = run_generate(right)
    assert verdict_.passed, verdict_.message


def test_the_global_generator_seeded_with_seed_draws_the_same_tokens():
    # torch.manual_seed(seed) then multinomial without a generator: the same numbers
    def generate(model, prompt, num_tokens, *, temperature=1.0, top_k=None, seed=0):
        _checked(model, prompt, temperature, top_k)
        torch.manual_seed(seed)
        ids = prompt
        for _ in range(num_tokens):
            with torch.no_grad():
                z = model(ids[:, -model.config.max_len :])[:, -1]
            if top_k:
                z = z.masked_fill(z < torch.topk(z, top_k).values[:, -1:], float("-inf"))
            if temperature == 0:
                new = z.argmax(-1, keepdim=True)
            else:
                new = torch.multinomial(torch.softmax(z / temperature, -1), 1)
            ids = torch.cat([ids, new], 1)
        return ids

    assert run_generate(generate).passed


# ---------------------------------------------------------------- the mistakes, by name

WRONG = {
    "temperature_multiplied": learner(scale=lambda z, t: z * t),
    "zero_temperature_divides": learner(pick=lambda z, t, k, g: torch.multinomial(
        F.softmax(z / t, -1), 1, generator=g)),
    "top_k_index_not_mapped": learner(pick=_top_k_values_only),
    "top_k_sorted_draw": learner(pick=_top_k_sorted),
    "top_k_plus_one": learner(pick=_top_k_off_by_one),
    "cropped_at_the_start": learner(window=lambda ids, n: ids[:, :n]),
    "not_cropped": learner(window=lambda ids, n: ids),
    "reseeded_every_step": learner(seeded_in_loop=True),
    "softmax_over_the_batch": learner(dim=0),
    "first_position": learner(row=0),
    "new_tokens_only": learner(keep=False),
}  # fmt: skip


@pytest.mark.parametrize("bug", WRONG)
def test_a_learner_style_mistake_gets_its_hint(bug):
    failed_with_hint(GENERATE, WRONG[bug], bug, judge=run_generate)


def test_the_checker_prints_the_symptom_then_hint_gives_the_cause(capsys):
    from course_lib.checks import hint

    out = verdict(check_generate, WRONG["top_k_index_not_mapped"], capsys)
    assert out.startswith("TRY AGAIN") and "positions in the top-k list" in out
    hint()
    assert "torch.topk gives values and indices" in capsys.readouterr().out


# ---------------------------------------------------------------- the contract's promises


def test_no_argument_checks_are_named():
    result = run_generate(learner(checks=False))
    assert not result.passed and result.bug == "no error"
    assert "a negative temperature ran without an error" in result.message


def test_an_error_that_does_not_name_its_parameter_is_named():
    def vague(model, prompt, num_tokens, *, temperature=1.0, top_k=None, seed=0):
        if temperature < 0 or (top_k is not None and not 0 < top_k <= 104) or not prompt.numel():
            raise ValueError("bad argument")
        return learner(checks=False)(model, prompt, num_tokens, temperature=temperature,
                                     top_k=top_k, seed=seed)  # fmt: skip

    result = run_generate(vague)
    assert not result.passed and result.bug == "error unnamed"
    assert "does not name `temperature`" in result.message


def test_an_assert_instead_of_an_error_is_named():
    def asserting(model, prompt, num_tokens, *, temperature=1.0, top_k=None, seed=0):
        assert temperature >= 0, "temperature must be >= 0"
        return learner()(model, prompt, num_tokens, temperature=temperature, top_k=top_k,
                         seed=seed)  # fmt: skip

    result = run_generate(asserting)
    assert not result.passed and result.bug == "error unclear"
    assert "AssertionError" in result.message


def test_top_k_zero_let_through_is_named():
    def lax(model, prompt, num_tokens, *, temperature=1.0, top_k=None, seed=0):
        if temperature < 0:
            raise ValueError(f"temperature: expected >= 0, got {temperature}")
        if prompt.shape[1] == 0:
            raise ValueError("prompt: expected at least one token")
        return learner(checks=False)(model, prompt, num_tokens, temperature=temperature,
                                     top_k=top_k or None, seed=seed)  # fmt: skip

    result = run_generate(lax)
    assert not result.passed and "top_k 0 ran without an error" in result.message


def test_every_bad_argument_is_refused_by_the_course_generate():
    from course_lib.exercises.lesson10.generate import _models, _prompt

    model = _models()["base"]
    for _, name, change in BAD_ARGUMENTS:
        kwargs = dict(change)
        given = kwargs.pop("prompt", _prompt(1, 2))
        with pytest.raises(ValueError, match=f"^{name}: expected"):
            course_generate(model, given, 3, **kwargs)
