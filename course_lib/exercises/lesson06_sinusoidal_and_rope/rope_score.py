"""Lesson 06's rope_score exercise: one score between rotated q and k."""

import torch

from course_lib import position_demos, positional
from course_lib.exercises.core import Bug, Case, Exercise
from course_lib.exercises.lesson06_sinusoidal_and_rope.sinusoidal_encoding import BASE
from course_lib.position_demos import rotate_pair
from course_lib.positional import apply_rope

# ---------------------------------------------------------------- rope_score


# the course's RoPE, whichever way it is reached: rotated vectors in either layout (lesson 07a's
# apply_rope_half too: the same module), angle tables, and the private steps they run
# (_cos_sin, _angle_table, the two rotations), each reachable on its own. Lesson 07a's
# rope_heads refuses the same, and more
COURSE_ROPE = (
    (positional, "apply_rope"),
    (positional, "apply_rope_half"),
    (positional, "rope_angles"),
    (positional.RotaryEmbedding, "__init__"),  # named first: it builds its angle tables
    (positional.RotaryEmbedding, "forward"),
    (positional.RotaryEmbedding, "rotate_qk"),
    (positional, "_cos_sin"),
    (positional, "_angle_table"),
    (positional, "_rotate_interleaved"),
    (positional, "_rotate_half"),
)


def rope_score_reference(q, k, m, n):
    q_m = apply_rope(q[None], torch.tensor([m]))[0]  # (d,)
    k_n = apply_rope(k[None], torch.tensor([n]))[0]  # (d,)
    return (q_m * k_n).sum()  # 0-d


def _rope_score_cases() -> list[Case]:
    g = torch.Generator().manual_seed(1)
    cases = []
    for d, m, n, label in [
        (8, 5, 2, "query after the key"),
        (16, 3, 11, "query before the key"),
        (4, 40, 7, "far apart"),
        (16, 25, 25, "one position for both"),
        (2, 0, 6, "a single pair, query at 0"),
        (32, 17, 9, "d = 32"),
    ]:
        q, k = torch.randn(d, generator=g), torch.randn(d, generator=g)
        cases.append(Case((q, k, m, n), label=label))
    q, k = (torch.randn(8, generator=g, dtype=torch.float64) for _ in range(2))
    cases.append(Case((q, k, 9, 4), label="float64 q and k: the score keeps their dtype"))
    return cases


def _score(q, k, m, n, *, pairs="neighbours", speed=None):
    """q turned by m * theta_i, k by n * theta_i; pairs and speeds changeable; in q's dtype."""
    d = q.shape[-1]
    two_i = torch.arange(0, d, 2, dtype=torch.float64)  # (d/2,)
    theta = BASE ** (-two_i / d) if speed is None else speed(two_i, d)  # (d/2,)
    if pairs == "neighbours":
        to_pairs = lambda v: v.double().reshape(d // 2, 2)  # noqa: E731  (d/2, 2)
    else:  # pair i = (v[i], v[i + d/2]): the rotate-half layout
        to_pairs = lambda v: torch.stack((v[: d // 2], v[d // 2 :]), -1).double()  # noqa: E731
    q_m = rotate_pair(to_pairs(q), m * theta)  # (d/2, 2)
    k_n = rotate_pair(to_pairs(k), n * theta)  # (d/2, 2)
    return (q_m * k_n).sum().to(q.dtype)  # 0-d


ROPE_SCORE = Exercise(
    name="rope_score",
    lesson="06_sinusoidal_and_rope",
    reference=rope_score_reference,
    cases=_rope_score_cases,
    idea="'RoPE: rotate the queries and keys' (pair i is (x_2i, x_2i+1), turned by the "
    "position times theta_i) and 'Why RoPE scores depend only on the offset'",
    bugs=(
        Bug(
            "both_by_m",
            lambda q, k, m, n: _score(q, k, m, m),
            "your score equals the plain q . k of the unturned vectors, whatever m and n are",
            "q and k were turned by the same angle (both by m, say), and turning two vectors "
            "together never changes their dot product; or neither was turned. q turns by "
            "m * theta_i, k by its own position: n * theta_i.",
        ),
        Bug(
            "swapped",
            lambda q, k, m, n: _score(q, k, n, m),
            "your score is the course's with m and n swapped",
            "either q went to position n and k to m, or both turned clockwise (which comes to "
            "the same thing). q turns by m * theta_i, k by n * theta_i, both counter-clockwise.",
        ),
        Bug(
            "only_q",
            lambda q, k, m, n: _score(q, k, m, 0),
            "your score changes with m but not with n",
            "only q was turned: k must be turned too, by n * theta_i.",
        ),
        Bug(
            "only_k",
            lambda q, k, m, n: _score(q, k, 0, n),
            "your score changes with n but not with m",
            "only k was turned: q must be turned too, by m * theta_i.",
        ),
        Bug(
            "rotate_half",
            lambda q, k, m, n: _score(q, k, m, n, pairs="halves"),
            "your score is right for a single pair but not for wider vectors",
            "you paired dimension i with dimension i + d/2 (the 'rotate half' layout, which "
            "Hugging Face's Llama code uses); this lesson pairs neighbours: pair i is "
            "(x[2i], x[2i+1]).",
        ),
        Bug(
            "i_over_d",
            lambda q, k, m, n: _score(q, k, m, n, speed=lambda two_i, d: BASE ** (-two_i / 2 / d)),
            "your later pairs turn too fast",
            "pair i turns by 10000**(-2i/d) per position, with i the pair's index "
            "(0, 1, ..., d/2 - 1); yours uses 10000**(-i/d).",
        ),
        Bug(
            "one_speed",
            lambda q, k, m, n: _score(q, k, m, n, speed=lambda two_i, d: torch.ones_like(two_i)),
            "every pair of yours turns at one speed",
            "each pair turns at its own speed: pair i by theta_i = 10000**(-2i/d) per position, "
            "from 1 radian (pair 0) down to about 1/10000.",
        ),
        Bug(
            "faster",
            lambda q, k, m, n: _score(q, k, m, n, speed=lambda two_i, d: BASE ** (two_i / d)),
            "your later pairs turn faster than the first one instead of slower",
            "theta_i = 10000**(-2i/d): the exponent is negative, so the speeds fall from 1.",
        ),
    ),
    hints=(
        "Cut q and k into their d/2 pairs, give pair i the speed theta_i = 10000**(-2i/d), "
        "turn q's pairs by m times their speed and k's by n times theirs, then take the dot "
        "product of the two turned vectors.",
    ),
    # the course's RoPE, whichever way it is reached, and its scores; and the course's
    # sinusoidal tables, whose columns 2i and 2i+1 at row p are the sine and cosine of RoPE's
    # own angle p * theta_i (the fresh read's route past writing theta_i)
    forbidden=(
        (position_demos, "rope_scores"),
        *COURSE_ROPE,
        (positional, "sinusoidal_encoding"),
        (position_demos, "sinusoidal_at"),
    ),
    forbidden_hint="The check compares yours with the course's RoPE, so running it "
    "(position_demos.rope_scores, positional.apply_rope or apply_rope_half, or a "
    "RotaryEmbedding) checks nothing, and the course's sinusoidal table holds the sines and "
    "cosines of the same angles. Turn the pairs yourself: your rotate_pair takes pairs and one "
    "angle for each.",
)
