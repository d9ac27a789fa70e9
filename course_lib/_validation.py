"""Argument checks shared by the math modules: each error names the parameter, expected and got."""

import torch


def positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name}: expected a positive int, got {type(value).__name__} {value!r}")
    if value <= 0:
        raise ValueError(f"{name}: expected a positive int, got {value}")
    return value


def float_tensor(name: str, value, min_dim: int = 1) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(value).__name__}")
    if not value.is_floating_point():
        raise TypeError(f"{name}: expected a floating-point tensor, got dtype {value.dtype}")
    if value.dim() < min_dim:
        raise ValueError(
            f"{name}: expected at least {min_dim} dimensions, got shape {tuple(value.shape)}"
        )
    return value


def text_ids(text, token_id: dict[str, int], vocabulary: str) -> list[int]:
    """The ids of `text`, a space-separated string or a list of tokens, every token a key of
    token_id (`vocabulary` says, in the error, where the tokens are listed)."""
    if isinstance(text, str):
        tokens = text.split()
    elif isinstance(text, list | tuple):
        tokens = list(text)
    else:
        raise TypeError(f"text: expected a str or a list of tokens, got {type(text).__name__}")
    if not tokens:
        raise ValueError("text: expected at least one token, got empty text")
    for position, token in enumerate(tokens):
        if token not in token_id:
            raise ValueError(
                f"text: unknown token {token!r} at position {position}; expected tokens of "
                f"{vocabulary}"
            )
    return [token_id[t] for t in tokens]


def one_of(name: str, value, choices: tuple) -> str:
    if value not in choices:
        raise ValueError(f"{name}: expected one of {choices}, got {value!r}")
    return value


def broadcast_shape(*shapes) -> torch.Size | None:
    """The shape the given shapes broadcast to, or None where they do not.

    Plain Python on purpose: the first torch.broadcast_shapes call in a process imports
    sympy, about 0.7 s that every lesson's first attention call would otherwise pay.
    """
    size = max((len(shape) for shape in shapes), default=0)
    result = []
    for axis in range(-size, 0):
        sizes = {shape[axis] for shape in shapes if len(shape) >= -axis} - {1}
        if len(sizes) > 1:
            return None
        result.append(sizes.pop() if sizes else 1)
    return torch.Size(result)
