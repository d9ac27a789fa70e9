"""Lesson 15a's attend_rolling exercise: one new token's attention over a rolling cache of
sinks + window entries, the cache kept that size."""

from functools import partial

import torch
import torch.nn.functional as F

from course_lib.exercises.core import Bug, Case, Exercise
from course_lib.exercises.lesson13a_what_generation_recomputes import attend_cached
from course_lib.exercises.lesson13a_what_generation_recomputes.rope_from import rope_from_reference
from course_lib.exercises.stub import yours_or_course


def _heads(t, num_heads):
    return t.unflatten(-1, (num_heads, -1)).transpose(1, 2)  # (B, T, D) -> (B, H, T, d)


def _merged(y):
    return y.transpose(1, 2).flatten(-2)  # (B, H, T, d) -> (B, T, D)


def attend_rolling_reference(x, qkv, out, num_heads, past_k, past_v, position, window, sinks=0,
                             rope=None):  # fmt: skip
    """The course's attend_rolling: one step over a rolling cache (lesson 15a)."""
    D = x.shape[-1]
    q, k, v = (_heads(t, num_heads) for t in qkv(x).split(D, dim=-1))  # each (B, H, 1, d)
    if rope is not None:
        q, k = rope(q, position), rope(k, position)
    k, v = torch.cat([past_k, k], dim=-2), torch.cat([past_v, v], dim=-2)  # (B, H, S + 1, d)
    if k.shape[-2] > sinks + window:  # the oldest entry after the sinks leaves
        keep = [*range(sinks), *range(sinks + 1, k.shape[-2])]
        k, v = k[:, :, keep], v[:, :, keep]  # (B, H, sinks + window, d)
    y = F.scaled_dot_product_attention(q, k, v)  # (B, H, 1, d): one token reads every entry
    return out(_merged(y)), k, v


def rolled(step, x, qkv, out, num_heads, window, sinks=0, rope=None):
    """(y (B, T, D), k, v): x (B, T, D) fed one token at a time through step, a function
    with attend_rolling's contract, from an empty cache; k, v the cache after the last
    (lesson 15a)."""
    B, T, D = x.shape
    empty = x.new_zeros(B, num_heads, 0, D // num_heads)
    k = v = empty
    ys = []
    for t in range(T):
        y, k, v = step(x[:, t : t + 1], qkv, out, num_heads, k, v, t, window, sinks, rope)
        ys.append(y)
    return (torch.cat(ys, dim=1) if ys else x), k, v


def rolled_yours_or_course(step, x, qkv, out, num_heads, window, sinks=0, rope=None):
    """(rolled(step, ...), reason): x fed through your attend_rolling `step` when it is written
    and runs, else through the course's; reason "yours" or why the course's (lesson 15a)."""
    return yours_or_course("attend_rolling", partial(rolled, step),
                           partial(rolled, attend_rolling_reference),
                           x, qkv, out, num_heads, window, sinks, rope)  # fmt: skip


_layer = attend_cached._layer  # the layers lesson 13a's cases use, built the same way


def _cases() -> list[Case]:
    g = torch.Generator().manual_seed(15)

    def case(B, position, D, H, window, sinks, label, rope=rope_from_reference,
             dtype=torch.float32):  # fmt: skip
        qkv, out = _layer(D, g, dtype)
        x = torch.randn(B, position + 1, D, generator=g, dtype=dtype)  # (B, position + 1, D)
        with torch.no_grad():
            _, past_k, past_v = rolled(attend_rolling_reference, x[:, :position], qkv, out, H,
                                       window, sinks, rope)  # fmt: skip
        return Case((x[:, position:], qkv, out, H, past_k, past_v, position, window),
                    {"sinks": sinks, "rope": rope}, label=label)  # fmt: skip

    return [
        case(2, 9, 16, 2, 4, 0, "position 9, window 4: the cache is full, one entry leaves"),
        case(1, 2, 16, 4, 5, 0, "position 2, window 5: the cache is not full yet"),
        case(1, 0, 8, 2, 3, 1, "position 0: an empty cache, the token itself its sink"),
        case(2, 11, 16, 2, 3, 1, "position 11, window 3 and one sink: the sink stays"),
        case(1, 8, 24, 3, 2, 2, "position 8, window 2 and two sinks"),
        case(1, 4, 8, 1, 4, 1, "position 4, window 4 and one sink: the cache has just filled"),
        case(2, 7, 12, 2, 3, 0, "no rope: a model without positions", rope=None),
        case(1, 6, 16, 4, 2, 1, "float64 x and layers: the results stay float64",
             dtype=torch.float64),
    ]  # fmt: skip


def _step(*, at="position", trim="before", drop="after sinks", keep=lambda s, w: s + w,
          order="past first"):  # fmt: skip
    """attend_rolling written out, with the switches a wrong version needs."""

    def step(x, qkv, out, num_heads, past_k, past_v, position, window, sinks=0, rope=None):
        D, S = x.shape[-1], past_k.shape[-2]
        q, k, v = (_heads(t, num_heads) for t in qkv(x).split(D, dim=-1))  # each (B, H, 1, d)
        if rope is not None:
            start = position if at == "position" else S
            q, k = rope(q, start), rope(k, start)
        pair = (past_k, k), (past_v, v)
        k, v = (torch.cat(p if order == "past first" else p[::-1], dim=-2) for p in pair)

        def trimmed(k, v):
            size = keep(sinks, window)
            if trim == "never" or k.shape[-2] <= size:
                return k, v
            first = 0 if drop == "oldest" else sinks
            extra = k.shape[-2] - size
            rows = [*range(first), *range(first + extra, k.shape[-2])]
            return k[:, :, rows], v[:, :, rows]

        if trim == "before":
            k, v = trimmed(k, v)
        y = F.scaled_dot_product_attention(q, k, v)  # (B, H, 1, d)
        if trim == "after":
            k, v = trimmed(k, v)
        return out(_merged(y)), k, v

    return step


ATTEND_ROLLING = Exercise(
    name="attend_rolling",
    lesson="15a_sliding_window",
    reference=attend_rolling_reference,
    cases=_cases,
    idea="the section 'A cache that stops growing' and exercise 2's text",
    bugs=(
        Bug(
            "rope_at_cache_length",
            _step(at="length"),
            "your output is right until the cache is full, and wrong after",
            "the new token is turned at the cache's length S, as lesson 13a's attend_cached "
            "did. With a rolling cache S stops growing at sinks + window while positions go "
            "on: turn it at `position`.",
        ),
        Bug(
            "never_trimmed",
            _step(trim="never"),
            "your cache keeps growing: it holds every token so far",
            "nothing leaves the cache. Once it holds more than sinks + window entries, the "
            "oldest entry after the sinks goes, before the new token attends.",
        ),
        Bug(
            "trimmed_after",
            _step(trim="after"),
            "your returned cache is right, but your token read one key too many",
            "you attend over the cache with the new entry added and only then drop the "
            "oldest: the new token read window + 1 recent keys. Drop first, then attend.",
        ),
        Bug(
            "sink_dropped",
            _step(drop="oldest"),
            "your cache is right without sinks; with sinks it loses them",
            "you drop the oldest entry of all, index 0, which is the first sink. The sinks "
            "are the first `sinks` entries and stay: the entry that leaves is the one just "
            "after them, at index sinks.",
        ),
        Bug(
            "one_short",
            _step(keep=lambda s, w: s + w - 1),
            "your cache holds one entry too few once it is full",
            "the cache keeps sinks + window entries, the new token's included: the token "
            "reads itself and the window - 1 before it, as your sliding_window_mask lets it.",
        ),
        Bug(
            "new_first",
            _step(order="new first"),
            "your cache's entries are in the wrong order: the new token comes first",
            "put the new key and value after the cached ones, [past_k, k] along the time "
            "axis, so the entries stay oldest first and the oldest after the sinks is at "
            "index sinks.",
        ),
    ),
    hints=(
        "Three things change from lesson 13a's attend_cached: the new token is turned at "
        "`position` (not the cache's length), one new token reads every entry (no mask), "
        "and once the cache holds more than sinks + window the entry at index sinks leaves, "
        "before the attention.",
        "Feed a few random tokens one at a time from an empty cache with window 3 and one "
        "sink, and print the cache's length after each step: it should go 1, 2, 3, 4, 4, 4.",
    ),
    # lesson 13a's attend_cached as the course hands it (earlier_work gives the course's to a
    # learner who has not written it) does the attention of this step: wrapped with the
    # eviction, it passes without the learner writing the attention
    forbidden=((attend_cached, "attend_cached_reference"),),
    forbidden_hint="Your function runs the course's attend_cached (earlier_work hands you the "
    "course's when yours from lesson 13a is not written), which computes this step's "
    "attention for you, so the check would test the course's code, not yours. Write the step "
    "yourself: split the new token's q, k and v into heads, turn them at `position`, join the "
    "cache, drop the entry at index sinks once it holds more than sinks + window, and attend.",
)
