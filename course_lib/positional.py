"""Position information: sinusoidal encoding and rotary embeddings, RoPE (lesson 06), and
RoPE's two layouts in real code (lesson 07a)."""

import torch
from torch import nn

from course_lib._validation import float_tensor, one_of, positive_int

ROPE_LAYOUTS = ("interleaved", "half")


def _check_base(base) -> float:
    if isinstance(base, bool) or not isinstance(base, int | float):
        raise TypeError(f"base: expected a number > 1, got {type(base).__name__}")
    if not base > 1:
        raise ValueError(f"base: expected a number > 1, got {base}")
    return float(base)


def _check_even(name: str, value: int) -> int:
    positive_int(name, value)
    if value % 2:
        raise ValueError(f"{name}: expected an even width (dimensions come in pairs), got {value}")
    return value


def sinusoidal_encoding(seq_len: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """(seq_len, d_model): PE[p, 2i] = sin(p / base**(2i/d)), PE[p, 2i+1] = cos (lesson 06)."""
    positive_int("seq_len", seq_len)
    _check_even("d_model", d_model)
    base = _check_base(base)
    positions = torch.arange(seq_len, dtype=torch.float32)[:, None]  # (T, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)  # (d/2,)
    angles = positions / base ** (two_i / d_model)  # (T, 1) / (d/2,) -> (T, d/2)
    pe = torch.empty(seq_len, d_model)
    pe[:, 0::2] = angles.sin()
    pe[:, 1::2] = angles.cos()
    return pe  # (T, D)


def rope_angles(
    positions: torch.Tensor, d: int, base: float = 10000.0, dtype=torch.float32
) -> torch.Tensor:
    """(T, d/2) rotation angles p * base**(-2i/d) for each position p and pair i (lesson 06)."""
    return _angle_table(positions, d, base, dtype)


def _angle_table(positions, d, base, dtype):
    # the course's own RoPE and sinusoids call this, never the public rope_angles: a checker
    # that refuses a learner's call to rope_angles (lesson 06's exercises) sees only theirs
    two_i = torch.arange(0, d, 2, dtype=dtype, device=positions.device)  # (d/2,)
    inv_freq = base ** (-two_i / d)  # (d/2,)
    return positions.to(dtype)[:, None] * inv_freq[None, :]  # (T, 1) * (1, d/2) -> (T, d/2)


def _rope_cos_sin(x: torch.Tensor, positions: torch.Tensor, base) -> tuple:
    """Check apply_rope's arguments; return cos and sin of the (T, d/2) angles in x's dtype."""
    float_tensor("x", x, min_dim=2)
    _check_even("x's last dimension d", x.shape[-1])
    base = _check_base(base)
    if not isinstance(positions, torch.Tensor):
        raise TypeError(f"positions: expected a 1-D integer tensor, got {type(positions).__name__}")
    if positions.is_floating_point() or positions.is_complex() or positions.dtype == torch.bool:
        raise TypeError(f"positions: expected an integer tensor, got dtype {positions.dtype}")
    if positions.dim() != 1 or positions.shape[0] != x.shape[-2]:
        raise ValueError(
            f"positions: expected shape ({x.shape[-2]},) to match x's length T, "
            f"got {tuple(positions.shape)}"
        )
    return _cos_sin(positions, x.shape[-1], base, x.dtype)


def _cos_sin(positions: torch.Tensor, d: int, base: float, dtype) -> tuple:
    # angles in float64 for float64 inputs: float32 numbers near 1000 are 6e-5 apart, too
    # coarse to check the relative-position property to 1e-5 (lesson 07b measures the drift)
    precision = torch.float64 if dtype == torch.float64 else torch.float32
    angles = _angle_table(positions, d, base, precision)  # (T, d/2)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def _rotate_interleaved(x, cos, sin):
    even, odd = x[..., 0::2], x[..., 1::2]  # each (..., T, d/2)
    rotated = torch.stack(
        (even * cos - odd * sin, even * sin + odd * cos), dim=-1
    )  # (..., T, d/2, 2)
    return rotated.flatten(-2)  # (..., T, d)


def _rotate_half(x, cos, sin):
    first, second = x.chunk(2, dim=-1)  # each (..., T, d/2)
    return torch.cat(
        (first * cos - second * sin, first * sin + second * cos), dim=-1
    )  # (..., T, d)


def apply_rope(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Rotate each pair (x[..., 2i], x[..., 2i+1]) by angle p * base**(-2i/d) (lesson 06).

    x (..., T, d) with even d; positions (T,) integers. Norms are preserved and the dot
    product of a rotated query at m with a rotated key at n depends only on m - n.
    This is the interleaved layout of the RoPE paper; apply_rope_half is the other one.
    """
    cos, sin = _rope_cos_sin(x, positions, base)  # (T, d/2) each
    return _rotate_interleaved(x, cos, sin)  # (..., T, d)


def apply_rope_half(
    x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0
) -> torch.Tensor:
    """RoPE in the "rotate half" layout: pair i is (x[..., i], x[..., i + d/2]) (lesson 07a).

    Same angles p * base**(-2i/d) as apply_rope; only which two dimensions form pair i
    differs. apply_rope_half(x[..., half_layout_order(d)]) equals
    apply_rope(x)[..., half_layout_order(d)].
    """
    cos, sin = _rope_cos_sin(x, positions, base)  # (T, d/2) each
    return _rotate_half(x, cos, sin)  # (..., T, d)


def half_layout_order(d: int) -> torch.Tensor:
    """(d,) indices [0, 2, 4, ..., d-2, 1, 3, ..., d-1]: interleaved dimensions in half order.

    Reindexing a query or key (or the output columns of its projection) by this order turns
    the interleaved RoPE layout into the rotate-half one (lesson 07a).
    """
    _check_even("d", d)
    return _evens_then_odds(d)


def _evens_then_odds(d: int) -> torch.Tensor:
    # to_rotate_half calls this, never the public half_layout_order: lesson 07a's checker
    # refuses a learner's call to half_layout_order and must not see the course's own
    return torch.cat((torch.arange(0, d, 2), torch.arange(1, d, 2)))  # (d,)


def to_rotate_half(weight: torch.Tensor, num_heads: int) -> torch.Tensor:
    """The rows of a query or key projection (H * d, ...) (or its bias (H * d,)) trained with
    the interleaved layout, reordered head by head for the rotate-half layout: within each
    head, rows 0, 2, ..., d-2 then 1, 3, ..., d-1 (half_layout_order) (lesson 07a)."""
    float_tensor("weight", weight)
    positive_int("num_heads", num_heads)
    rows = weight.shape[0]
    if rows % num_heads:
        raise ValueError(
            f"weight: expected a first dimension H * d divisible by num_heads = {num_heads}, "
            f"got shape {tuple(weight.shape)}"
        )
    d = _check_even("the head width d", rows // num_heads)
    order = _evens_then_odds(d)  # (d,): half_layout_order(d)
    starts = torch.arange(num_heads)[:, None] * d  # (H, 1)
    return weight[(starts + order).flatten()]  # (H * d, ...): every head reordered alike


class RotaryEmbedding(nn.Module):
    """Applies RoPE to queries or keys at positions 0..T-1; no learned parameters (lesson 06).

    layout "interleaved" pairs dimensions (2i, 2i+1), as apply_rope; "half" pairs (i, i + d/2),
    as apply_rope_half. cos and sin of positions 0..max_len-1 are computed once, here; they
    are buffers (they follow .to(device)) but not saved with the weights.
    """

    def __init__(
        self,
        d_head: int,
        base: float = 10000.0,
        layout: str = "interleaved",
        *,
        max_len: int = 1024,
    ):
        super().__init__()
        self.d_head = _check_even("d_head", d_head)
        self.base = _check_base(base)
        self.layout = one_of("layout", layout, ROPE_LAYOUTS)  # which dimensions form a pair
        self.max_len = positive_int("max_len", max_len)
        cos, sin = _cos_sin(torch.arange(max_len), d_head, self.base, torch.float32)
        self.register_buffer("cos", cos, persistent=False)  # (max_len, d/2)
        self.register_buffer("sin", sin, persistent=False)  # (max_len, d/2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cos, sin = self._tables(x)  # (T, d/2) each
        return self._rotate(x, cos, sin)  # (..., T, d)

    def rotate_qk(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """q and k (..., T, d_head) rotated, with one slice of the tables for both (lesson 06)."""
        cos, sin = self._tables(q)  # (T, d/2) each
        return self._rotate(q, cos, sin), self._rotate(k, cos, sin)

    def _tables(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if x.dim() >= 1 and x.shape[-1] != self.d_head:
            raise ValueError(
                f"x: expected last dimension d_head = {self.d_head}, got shape {tuple(x.shape)}"
            )
        float_tensor("x", x, min_dim=2)
        T = x.shape[-2]
        if T > self.max_len:
            raise ValueError(
                f"x: expected at most max_len = {self.max_len} positions, got T = {T}; "
                "build the RotaryEmbedding with a larger max_len"
            )
        if x.dtype == torch.float64:  # float64 angles, exactly as apply_rope computes them
            return _cos_sin(torch.arange(T, device=x.device), self.d_head, self.base, x.dtype)
        return self.cos[:T].to(x.dtype), self.sin[:T].to(x.dtype)  # (T, d/2) each

    def _rotate(self, x, cos, sin):
        if self.layout == "interleaved":
            return _rotate_interleaved(x, cos, sin)
        return _rotate_half(x, cos, sin)

    def extra_repr(self) -> str:
        return (
            f"d_head={self.d_head}, base={self.base:g}, layout={self.layout!r}, "
            f"max_len={self.max_len}"
        )
