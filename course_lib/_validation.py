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


def one_of(name: str, value, choices: tuple) -> str:
    if value not in choices:
        raise ValueError(f"{name}: expected one of {choices}, got {value!r}")
    return value
