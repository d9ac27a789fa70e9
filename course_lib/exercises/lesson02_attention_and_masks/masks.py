"""Lesson 02's mask exercises: the causal mask; the padding mask of a right-padded batch.

The lesson prints the causal mask of its 12-token line (course_lib.attention.causal_mask) as
the pattern to build, and works torch's `tril` on a matrix of numbers; the exercise asks for
the bool mask of any T, and its check refuses a call to the course's causal_mask and, with a
case longer than 12, a slice of the lesson's mask. The padding mask's worked example is a
table in the lesson's text for other lengths, and `[:, None]` is worked on a product table;
the exercise asks for the (B, 1, T) mask that broadcasts over the queries, which the lesson's
padded batch then runs through attention.
"""

import torch

from course_lib import attention
from course_lib.exercises.core import Bug, Case, Exercise

# ---------------------------------------------------------------- the causal mask


def make_causal_mask_reference(T):
    return torch.ones(T, T, dtype=torch.bool).tril()  # (T, T): True on and below the diagonal


CAUSAL_MASK = Exercise(
    name="make_causal_mask",
    lesson="02_attention_and_masks",
    reference=make_causal_mask_reference,
    cases=lambda: [
        Case((5,)),
        Case((2,)),
        Case((20,), label="longer than the lesson's 12-token line"),
        Case((1,), label="one token, which may see itself"),
    ],
    idea="the mask printed in 'The causal mask' (row t is query t, column s is key s)",
    bugs=(
        Bug(
            "lesson_mask_cut",
            lambda T: make_causal_mask_reference(12)[:T, :T],
            "your mask is right up to T = 12 and stays 12 by 12 beyond",
            "it is cut from a 12 by 12 mask, such as the lesson's `mask`: a slice of a mask "
            "made earlier cannot be longer than that mask. Build the (T, T) pattern from T.",
        ),
        Bug(
            "lesson_size",
            lambda T: make_causal_mask_reference(12),
            "your mask is 12 by 12 whatever T is",
            "it has the size of the lesson's 12-token line: is your function returning the "
            "lesson's mask, or building one from a length other than its argument T?",
        ),
        Bug(
            "transposed",
            lambda T: make_causal_mask_reference(T).T.contiguous(),
            "your True values sit on and above the diagonal",
            "row t is query t and column s is key s: query t may see keys 0..t, the columns "
            "up to and including t, which puts True on and BELOW the diagonal.",
        ),
        Bug(
            "inverted",
            lambda T: ~make_causal_mask_reference(T),
            "your mask is True exactly where it should be False",
            "True means the query MAY attend: the past and the token itself, not the future.",
        ),
        Bug(
            "no_diagonal",
            lambda T: torch.ones(T, T, dtype=torch.bool).tril(-1),
            "your diagonal is False",
            "a token may attend to itself: the diagonal belongs to the allowed part.",
        ),
        Bug(
            "not_bool",
            lambda T: make_causal_mask_reference(T).float(),
            "right pattern, but not a bool tensor",
            "attention expects True and False (dtype torch.bool), not 1 and 0 in a number "
            "dtype: make the tensor bool, or build it from a comparison, which gives bool.",
        ),
    ),
    hints=(
        "Row t of the mask is query t; column s is key s. Query t may attend to key s when s <= t.",
    ),
    forbidden=((attention, "causal_mask"),),
    forbidden_hint="The course's causal_mask is the very mask this exercise asks you to "
    "build, so calling it proves nothing. Build the (T, T) pattern from torch operations: "
    "the worked line in the exercise's text keeps the lower triangle of a matrix.",
)

# ---------------------------------------------------------------- the padding mask


def padding_mask_reference(lengths, T):
    """One sentence at a time: True over its first lengths[b] keys (an independent build)."""
    mask = torch.zeros(len(lengths), 1, T, dtype=torch.bool)  # (B, 1, T)
    for b, n in enumerate(lengths.tolist()):
        mask[b, 0, :n] = True
    return mask


def _lengths(*values):
    return torch.tensor(values, dtype=torch.int64)


def _reals(lengths, T, *, inclusive=False):
    """(B, T) bool: position s of sentence b is below its length (or up to it, inclusive)."""
    s = torch.arange(T)  # (T,)
    return s <= lengths[:, None] if inclusive else s < lengths[:, None]


PADDING_MASK = Exercise(
    name="padding_mask",
    lesson="02_attention_and_masks",
    reference=padding_mask_reference,
    cases=lambda: [
        Case((_lengths(3, 1, 4), 4), label="three sentences, the longest as long as T"),
        Case((_lengths(2, 5), 7), label="padded beyond the longest sentence (T = 7)"),
        Case((_lengths(6), 6), label="one sentence, no padding"),
        Case((_lengths(3, 3, 1, 2), 4), label="as many sentences as keys (B = T = 4)"),
    ],
    idea="the section 'Padding: sentences of different lengths in one batch' and the worked "
    "lengths (2, 3) in the exercise's text",
    bugs=(
        Bug(
            "torch_convention",
            lambda lengths, T: ~padding_mask_reference(lengths, T),
            "your mask is True at the pads and False at the real tokens",
            "True means a query MAY attend to that key, as in your attention's mask and "
            "F.scaled_dot_product_attention. torch.nn.MultiheadAttention's key_padding_mask "
            "is the opposite (True at the pads): that one is what you would hand to it.",
        ),
        Bug(
            "one_pad_too_many",
            lambda lengths, T: _reals(lengths, T, inclusive=True)[:, None, :],
            "one position too many is True: the first pad of each sentence is let through",
            "positions count from 0, so a sentence of n tokens holds keys 0 to n - 1; key n "
            "is its first pad.",
        ),
        Bug(
            "no_query_axis",
            lambda lengths, T: _reals(lengths, T),
            "your mask is (B, T): it has no axis for the queries",
            "scores are (B, T_q, T_k), and broadcasting lines shapes up from the right: a "
            "(B, T) mask would stand against (T_q, T_k), its sentences read as queries. An "
            "axis of length 1 between the sentences and the keys lets one row serve every "
            "query of its sentence.",
        ),
        Bug(
            "blocks_queries",
            lambda lengths, T: _reals(lengths, T)[:, :, None],
            "your mask is (B, T, 1): it blocks whole rows (queries), not columns (keys)",
            "padding hides keys, the last axis of the scores: no query may read a pad. "
            "Blocking the pads' query rows instead leaves them no key at all (0/0 = NaN) "
            "and lets every real token read the pads.",
        ),
        Bug(
            "stops_at_the_longest",
            lambda lengths, T: padding_mask_reference(lengths, int(lengths.max())),
            "your mask ends at the longest sentence, not at T keys",
            "T is given: a batch may be padded past its longest sentence (to a length fixed "
            "in advance, say). The mask needs T keys, whatever the lengths.",
        ),
        Bug(
            "not_bool",
            lambda lengths, T: padding_mask_reference(lengths, T).float(),
            "right pattern, but not a bool tensor",
            "attention expects True and False (dtype torch.bool), not 1 and 0 in a number "
            "dtype: a comparison gives bool.",
        ),
    ),
    hints=(
        "Key s of sentence b is real when s < lengths[b]: one comparison between the "
        "positions 0..T-1 and the lengths, broadcast to (B, T), gives every sentence at once.",
        "Then give it the shape (B, 1, T): the 1 stands for the queries, so that the same row "
        "holds for every query of a sentence.",
    ),
)
