"""Lesson 02b's mask exercise: the padding mask of a right-padded batch.

The padding mask's worked example is a table in the lesson's text for other lengths, and
`[:, None]` is worked on a broadcast comparison of another kind (which positions are multiples
of 2 and of 3, a (2, T) table); the exercise asks for the (B, 1, T) mask that broadcasts over
the queries, which the lesson's padded batch then runs through attention.
"""

import torch

from course_lib.exercises.core import Bug, Case, Exercise


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
    lesson="02b_attention_in_batches",
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
