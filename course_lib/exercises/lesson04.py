"""Lesson 04's exercises: sinusoidal encoding, rotating a pair, the RoPE score, RoPE on heads.

CONTRACTS (fixed: later lessons and course_lib.mywork rely on them):
- sinusoidal_encoding(seq_len, d_model) -> (T, D) float32, sin in even columns, cos in odd.
- rotate_pair(pair, angle): pair (..., 2), angle a number or a tensor broadcastable to
  pair[..., 0] -> the pairs turned counter-clockwise, pair's dtype.
- rope_score(q, k, m, n) -> 0-d tensor: q (d,) rotated to position m dotted with k (d,)
  rotated to position n, interleaved pairs (2i, 2i+1), theta_i = 10000**(-2i/d).
- rope_heads(x) -> x's shape and dtype: x (..., T, d) (in the model (B, H, T, d)), the
  vector at position t (0..T-1) rotated pair by pair by t * theta_i, as apply_rope.

Every wrong version below is a mistake a learner makes, written the way it comes out; a test
(tests/test_exercises_lesson04.py) writes each again as a learner would and checks its hint.
"""

import math

import torch

from course_lib.exercises.core import Bug, Case, Exercise
from course_lib.position_demos import rotate_pair
from course_lib.positional import apply_rope, apply_rope_half, sinusoidal_encoding

BASE = 10000.0

# ---------------------------------------------------------------- sinusoidal_encoding


def sinusoidal_reference(seq_len, d_model):
    return sinusoidal_encoding(seq_len, d_model)  # (T, D)


def _sinusoidal_cases() -> list[Case]:
    return [
        Case((3, 4), label="3 positions, D = 4"),
        Case((12, 8), label="12 positions, D = 8"),
        Case((7, 16), label="7 positions, D = 16"),
        Case((50, 32), label="50 positions, D = 32"),
        Case((1, 2), label="one position, one pair"),
    ]


def _angles(seq_len, d_model, exponent=None, first=0):
    """(T, D/2) angles p / 10000**(2i/D), with the exponent and first position changeable."""
    p = torch.arange(first, first + seq_len, dtype=torch.float32)[:, None]  # (T, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)  # (D/2,)
    power = two_i / d_model if exponent is None else exponent(two_i, d_model)  # (D/2,)
    return p / BASE**power  # (T, 1) / (D/2,) -> (T, D/2)


def _interleave(even, odd):
    return torch.stack((even, odd), dim=-1).flatten(-2)  # (T, D/2, 2) -> (T, D)


SINUSOIDAL_ENCODING = Exercise(
    name="sinusoidal_encoding",
    lesson="04",
    reference=sinusoidal_reference,
    cases=_sinusoidal_cases,
    idea="the section 'Sinusoidal encoding': the formula for PE[p, 2i] and PE[p, 2i+1], and "
    "the heatmap of the table for 64 positions and D = 32 below it",
    bugs=(
        Bug(
            "swapped",
            lambda T, D: _interleave(_angles(T, D).cos(), _angles(T, D).sin()),
            "your even columns hold cosines and your odd columns sines",
            "sin and cos are swapped: the sine of pair i's angle goes in column 2i, its cosine "
            "in column 2i+1.",
        ),
        Bug(
            "i_over_d",
            lambda T, D: _interleave(
                *(f(_angles(T, D, lambda two_i, d: two_i / 2 / d)) for f in (torch.sin, torch.cos))
            ),
            "your later columns slow down too gently: the last pair turns far faster than "
            "10000**(-(D-2)/D) per position",
            "the exponent is 2i/D with i the pair's index (0, 1, ..., D/2 - 1); yours is i/D, "
            "so the speeds only fall to about 1/100 instead of about 1/10000.",
        ),
        Bug(
            "column_exponent",
            lambda T, D: _interleave(
                _angles(T, D).sin(), _angles(T, D, lambda two_i, d: (two_i + 1) / d).cos()
            ),
            "your even columns are right, your odd ones are not",
            "columns 2i and 2i+1 are one pair and share one angle; your cosine column used an "
            "exponent of its own, (2i+1)/D, as if each column were its own pair.",
        ),
        Bug(
            "halves",
            lambda T, D: torch.cat((_angles(T, D).sin(), _angles(T, D).cos()), dim=-1),
            "your first half of the columns holds only sines, the second half only cosines",
            "you put the sines side by side and the cosines after them; the course interleaves "
            "them, pair i in columns 2i (sine) and 2i+1 (cosine).",
        ),
        Bug(
            "multiply",
            lambda T, D: _interleave(
                *(f(_angles(T, D, lambda two_i, d: -two_i / d)) for f in (torch.sin, torch.cos))
            ),
            "your later columns turn faster than the first ones instead of slower",
            "the angle is the position divided by 10000**(2i/D); yours multiplies by it.",
        ),
        Bug(
            "from_one",
            lambda T, D: _interleave(*(f(_angles(T, D, first=1)) for f in (torch.sin, torch.cos))),
            "your first row is not [0, 1, 0, 1, ...]",
            "your positions start at 1; the first token sits at position 0, where every sine is "
            "0 and every cosine is 1.",
        ),
    ),
    hints=(
        "Row p, columns 2i and 2i+1: the sine and the cosine of p / 10000**(2i/D), with i "
        "counting pairs from 0. A (T, 1) column of positions divided by a (D/2,) row of "
        "10000**(2i/D) gives every angle at once.",
    ),
)

# ---------------------------------------------------------------- rotate_pair


def rotate_pair_reference(pair, angle):
    return rotate_pair(pair, angle)  # (..., 2)


def _rotate_cases() -> list[Case]:
    g = torch.Generator().manual_seed(0)

    def randn(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=g, dtype=dtype)

    def angles(*shape, dtype=torch.float32):
        return (torch.rand(*shape, generator=g, dtype=dtype) - 0.5) * 2 * math.pi

    return [
        Case(
            (torch.tensor([[1.0, 0.0], [0.0, 1.0]]), math.pi / 2),
            label="(1, 0) and (0, 1) turned a quarter turn",
        ),
        Case((torch.tensor([3.0, 4.0]), 1.0), label="the pair (3, 4) turned by 1 radian"),
        Case((randn(2, 2), angles(2)), label="two pairs, an angle for each"),
        Case((randn(5, 2), angles(5)), label="five pairs, an angle for each"),
        Case((randn(3, 2), torch.tensor(1.2)), label="a 0-d tensor angle for every pair"),
        Case((randn(3, 4, 2), angles(3, 4)), label="a (3, 4) grid of pairs, an angle for each"),
        Case(
            (randn(3, 4, 2), angles(4)),
            label="a (3, 4) grid of pairs, angles (4,): one per column, shared down the rows",
        ),
        Case((randn(3, 4, 2), 0.7), label="a Python float angle for every pair"),
        Case((randn(6, 2), 3), label="a Python int angle (3 radians)"),
        Case(
            (randn(4, 2, dtype=torch.float64), angles(4, dtype=torch.float64)),
            label="float64 pairs and angles: the result keeps pair's dtype",
        ),
        Case(
            (randn(3, 2, dtype=torch.float64), -2.5),
            label="float64 pairs, a Python float angle: the result keeps pair's dtype",
        ),
    ]


def _parts(pair, angle):
    angle = torch.as_tensor(angle, dtype=pair.dtype)
    return pair[..., 0], pair[..., 1], angle.cos(), angle.sin()


def _clockwise(pair, angle):
    x, y, c, s = _parts(pair, angle)
    return torch.stack((x * c + y * s, -x * s + y * c), dim=-1)  # (..., 2)


def _overwrite(pair, angle):
    x, y, c, s = _parts(pair, angle)
    new_x = x * c - y * s
    return torch.stack((new_x, new_x * s + y * c), dim=-1)  # (..., 2): y from the NEW x


def _swapped(pair, angle):
    x, y, c, s = _parts(pair, angle)
    return torch.stack((x * s - y * c, x * c + y * s), dim=-1)  # (..., 2)


def _no_minus(pair, angle):
    x, y, c, s = _parts(pair, angle)
    return torch.stack((x * c + y * s, x * s + y * c), dim=-1)  # (..., 2)


def _order(pair, angle):
    return rotate_pair(pair, angle).flip(-1)  # (..., 2): (new y, new x)


def _angle_on_last_axis(pair, angle):
    """cos and sin multiplied onto the (..., 2) pairs as they are: the angles meet (x, y)."""
    x, y, c, s = _parts(pair, angle)
    turned = torch.stack((-y, x), dim=-1)  # (..., 2): each pair a quarter turn on
    try:
        return pair * c + turned * s  # c and s broadcast against the LAST axis of pair
    except RuntimeError:  # where the shapes do not fit, the learner's code raises too
        return rotate_pair(pair, angle)


ROTATE_PAIR = Exercise(
    name="rotate_pair",
    lesson="04",
    reference=rotate_pair_reference,
    cases=_rotate_cases,
    idea="the picture of (1, 0) and (0, 1) turned by the angle a, in the section 'RoPE: "
    "rotate the queries and keys', just above exercise 2",
    bugs=(
        Bug(
            "no_minus",
            _no_minus,
            "your (1, 0) turns the right way but your (0, 1) does not: a quarter turn takes "
            "(0, 1) to (-1, 0)",
            "a minus sign is missing: where does the picture send (0, 1)? For a small positive "
            "angle its new x is negative.",
        ),
        Bug(
            "clockwise",
            _clockwise,
            "your pairs turn the wrong way round: a quarter turn takes (1, 0) to (0, -1)",
            "you turn clockwise. A positive angle turns counter-clockwise, taking (1, 0) "
            "towards (0, 1): read off where the picture sends (1, 0) and (0, 1) again.",
        ),
        Bug(
            "overwrite",
            _overwrite,
            "your new x is right, your new y is not",
            "the new y was computed from the NEW x: both new components come from the old x "
            "and y, so keep the old ones until both new ones exist.",
        ),
        Bug(
            "swapped",
            _swapped,
            "your pairs come out turned by a quarter turn minus the angle, so a quarter turn "
            "leaves them where they were",
            "sin and cos trade places in your formula. Check it on the picture: at angle 0 "
            "nothing moves, so the cosine multiplies the part of each new component that stays.",
        ),
        Bug(
            "order",
            _order,
            "your result holds (new y, new x): the two components come back the wrong way round",
            "return the new x first and the new y second along the last axis.",
        ),
        Bug(
            "angle_on_last_axis",
            _angle_on_last_axis,
            "with two pairs and one angle each, your angles land on the wrong numbers",
            "your angles line up with the last axis, the (x, y) axis, instead of with the "
            "pairs: multiplying a (2, 2) pair by cos of a (2,) angle gives x the first angle "
            "and y the second. Take x and y apart first (pair[..., 0], pair[..., 1]), or give "
            "the angle a last axis of size 1.",
        ),
    ),
    hints=(
        "A pair (x, y) is x times (1, 0) plus y times (0, 1), and a rotation turns both "
        "parts alike: the picture shows where each part goes.",
        "angle may be a Python number or a tensor: torch.as_tensor turns either into a tensor, "
        "and each pair[..., 0] (x) and pair[..., 1] (y) then meets its own angle by "
        "broadcasting.",
    ),
)

# ---------------------------------------------------------------- rope_score


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
    lesson="04",
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
            "you paired dimension i with dimension i + d/2 (the 'rotate half' layout that "
            "GPT-NeoX and Llama use); this lesson pairs neighbours: pair i is (x[2i], x[2i+1]).",
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
)

# ---------------------------------------------------------------- rope_heads


def rope_heads_reference(x):
    return apply_rope(x, torch.arange(x.shape[-2]))  # (..., T, d)


def _rope_heads_cases() -> list[Case]:
    g = torch.Generator().manual_seed(2)

    def randn(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=g, dtype=dtype)

    return [
        Case((randn(2, 3, 4, 8),), label="x (B, H, T, d) as in the model, T = d/2"),
        Case((randn(1, 2, 9, 16),), label="x (B, H, T, d), 9 positions"),
        Case((randn(2, 6, 4),), label="a 3-D x (H, T, d)"),
        Case((randn(5, 6),), label="a 2-D x (T, d): one sequence, no heads"),
        Case((randn(3, 1, 2, 3, 4),), label="a 5-D x: any number of leading dimensions"),
        Case(
            (randn(2, 2, 7, 8, dtype=torch.float64),),
            label="a float64 x: the result keeps x's dtype",
        ),
    ]


def _rotate_by(x, angles):
    """x (..., T, d) with pair i of position t turned by angles[..., t, i] (interleaved)."""
    pairs = x.unflatten(-1, (-1, 2))  # (..., T, d/2, 2)
    return rotate_pair(pairs, angles).flatten(-2)  # (..., T, d)


def _thetas(x, exponent=lambda two_i, d: -two_i / d):
    d = x.shape[-1]
    two_i = torch.arange(0, d, 2, dtype=torch.float64)  # (d/2,)
    return BASE ** exponent(two_i, d)  # (d/2,)


def _by_head(x):
    """Each head h turned by h * theta_i at every position (2-D x: no head axis, no turn)."""
    heads = x.shape[-3] if x.dim() >= 3 else 1
    angles = torch.arange(heads, dtype=torch.float64)[:, None, None] * _thetas(x)  # (H, 1, d/2)
    return _rotate_by(x, angles.to(x.dtype))


def _transposed(x):
    """The angle table the wrong way round: position t, pair i turned by i * theta_t."""
    T, d = x.shape[-2:]
    rows = BASE ** (-torch.arange(T, dtype=torch.float64) * 2 / d)  # (T,): theta_t
    angles = rows[:, None] * torch.arange(d // 2, dtype=torch.float64)  # (T, d/2)
    return _rotate_by(x, angles.to(x.dtype))


def _with(positions=None, exponent=None):
    def wrong(x):
        T = x.shape[-2]
        p = torch.arange(T, dtype=torch.float64) if positions is None else positions(T)  # (T,)
        theta = _thetas(x) if exponent is None else _thetas(x, exponent)  # (d/2,)
        return _rotate_by(x, (p[:, None] * theta).to(x.dtype))  # (T, d/2) angles

    return wrong


ROPE_HEADS = Exercise(
    name="rope_heads",
    lesson="04",
    reference=rope_heads_reference,
    cases=_rope_heads_cases,
    idea="the section 'RoPE inside multi-head attention': exercise 4's text and its worked "
    "example (T = 3, d = 2); your rope_score turns one vector the same way",
    bugs=(
        Bug(
            "from_one",
            _with(positions=lambda T: torch.arange(1, T + 1, dtype=torch.float64)),
            "your first position is turned too: the vectors at t = 0 should come back unchanged",
            "your positions start at 1; the first token sits at position 0, and turning by 0 "
            "leaves it as it is.",
        ),
        Bug(
            "rotate_half",
            lambda x: apply_rope_half(x, torch.arange(x.shape[-2])),
            "your numbers are right at position 0 but not after",
            "you paired dimension i with dimension i + d/2 (the 'rotate half' layout); this "
            "lesson pairs neighbours, (x[..., 2i], x[..., 2i+1]), as your rope_score does.",
        ),
        Bug(
            "by_head",
            _by_head,
            "your turn grows from head to head, not from position to position",
            "the angles follow the head index (the axis before T) instead of the position t, "
            "the second-to-last axis: every position of a head got the same turn.",
        ),
        Bug(
            "transposed",
            _transposed,
            "your position 0 is turned while your pair 0 never turns: positions and pairs "
            "trade roles in your angles",
            "your angle table is (d/2, T), not (T, d/2): pair i of position t got i * theta_t "
            "instead of t * theta_i. It only fitted the shapes because T = d/2 here; put the "
            "positions down the rows and the speeds along the columns.",
        ),
        Bug(
            "i_over_d",
            _with(exponent=lambda two_i, d: -two_i / 2 / d),
            "your later pairs turn too fast",
            "pair i turns by 10000**(-2i/d) per position, with i the pair's index "
            "(0, 1, ..., d/2 - 1); yours uses 10000**(-i/d).",
        ),
        Bug(
            "clockwise",
            _with(positions=lambda T: -torch.arange(T, dtype=torch.float64)),
            "your pairs turn clockwise: by minus the angle",
            "a sign is flipped in your rotation (or your angles are negative): RoPE turns pair i "
            "of position t counter-clockwise, by +t * theta_i.",
        ),
        Bug(
            "one_speed",
            _with(exponent=lambda two_i, d: 0 * two_i),
            "every pair of yours turns at one speed",
            "each pair turns at its own speed: pair i by theta_i = 10000**(-2i/d) per position.",
        ),
    ),
    hints=(
        "Position t is the index along the second-to-last axis, whatever comes before it. "
        "Build a (T, d/2) table of angles t * theta_i, then turn pair i of position t by its "
        "entry; broadcasting carries the table across the leading axes.",
        "Viewing x as (..., T, d/2, 2) puts each pair on the last axis, where your rotate_pair "
        "expects it; turn them, then view the result as (..., T, d) again.",
    ),
)

EXERCISES = (SINUSOIDAL_ENCODING, ROTATE_PAIR, ROPE_SCORE, ROPE_HEADS)
