"""Errors that many exercises meet, each with what usually causes it (the checkers' core gives
this hint when a learner's function raises one that no bug of the exercise explains)."""

# Errors many exercises meet, each recognised by its type and message, with what causes it
# (after a learner's error is matched against the exercise's own bugs, before the general
# "read the contract" hint): (name, type, words the message contains, hint).
COMMON_ERRORS = (
    ("view of a non-contiguous tensor", RuntimeError, "view size is not compatible",
     "`.view` only relabels memory that is laid out in order, and after `.transpose` or "
     "`.permute` it is not. Use `.reshape`, which copies when it must, or `.contiguous()` "
     "before `.view`."),
    ("a torch function given a Python number", TypeError, "must be Tensor, not",
     "torch.cos, torch.sin, torch.exp, torch.sqrt and their kin take tensors, not Python "
     "numbers: use the math module's function for a number, or make the number a tensor "
     "first (torch.tensor(x), or build it with torch.arange)."),
    ("None used as a number", TypeError, "NoneType",
     "something is None where a number or a tensor is needed: an argument whose contract "
     "allows None (a mask, a clip value, a top-k) must be tested with `is None` / "
     "`is not None` before it is used, or a function of yours returns nothing (a missing "
     "`return`)."),
    ("a matrix product of mismatched shapes", RuntimeError, "cannot be multiplied",
     "two shapes do not line up for a matrix product: the last axis of the left one must be "
     "the second-to-last of the right one. Print the shapes of both sides; a transpose over "
     "the wrong axes (`.T` reverses every axis of a batched tensor, where `.transpose(-2, -1)` "
     "or `.mT` swaps the last two) is the usual cause."),
    ("a batched matrix product of mismatched shapes", RuntimeError, "Expected size for first two",
     "two shapes do not line up for a batched matrix product: the batch axes of both sides "
     "must match and the last axis of the left one must be the second-to-last of the right "
     "one. Print the shapes; `.T` reverses every axis of a batched tensor, where "
     "`.transpose(-2, -1)` or `.mT` swaps only the last two."),
    ("shapes that do not line up", RuntimeError, "must match the size of tensor b",
     "the shapes of the two sides of a product or a sum do not line up: torch lines axes up "
     "from the right, and each pair must be equal or one of them 1. Print both shapes. If you "
     "used `.T` on a tensor with batch axes, it reversed every axis ((B, T, d) became "
     "(d, T, B)): `.transpose(-2, -1)` or `.mT` swaps only the last two."),
)  # fmt: skip


def common_error(err: Exception) -> tuple[str, str] | None:
    """(name, hint) of the first of COMMON_ERRORS that err is, or None."""
    for name, kind, words, hint in COMMON_ERRORS:
        if isinstance(err, kind) and words in str(err):
            return name, hint
    return None
