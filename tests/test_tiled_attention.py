import math

import pytest
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.testing import assert_close

from course_lib.attention import causal_mask
from course_lib.memory import allocations
from course_lib.tiled_attention import (
    TiledAttention,
    flash_attention,
    tile_steps,
    tiled_attention,
    tiled_forward,
)

TIGHT = {"atol": 1e-6, "rtol": 1e-6}  # float32: measured at most 5e-7 against torch's kernel


def qkv(B=2, H=3, T_q=37, T_k=37, d=8, d_v=8, dtype=torch.float32, grad=False):
    g = torch.Generator().manual_seed(T_q * 100 + T_k)
    tensors = (
        torch.randn(B, H, T_q, d, generator=g, dtype=dtype),
        torch.randn(B, H, T_k, d, generator=g, dtype=dtype),
        torch.randn(B, H, T_k, d_v, generator=g, dtype=dtype),
    )
    return tuple(t.requires_grad_(grad) for t in tensors)


def random_mask(T_q, T_k, shape=(2, 1)):
    g = torch.Generator().manual_seed(7)
    mask = torch.rand(*shape, T_q, T_k, generator=g) > 0.6
    mask[..., T_k // 2] = True  # every row sees a key, and some rows none in the first tiles
    return mask


@pytest.mark.parametrize("tile", [1, 5, 8, 16, 37, 64])  # 5 and 8 do not divide 37
@pytest.mark.parametrize("how", ["none", "causal", "mask"])
def test_forward_matches_torch(tile, how):
    q, k, v = qkv()
    mask = random_mask(37, 37) if how == "mask" else None
    ours = tiled_attention(q, k, v, mask, causal=how == "causal", tile_size=tile)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=how == "causal")
    assert_close(ours, expected, **TIGHT)


def test_forward_measured_error(measure):
    q, k, v = qkv(T_q=300, T_k=300, d=32, d_v=32)
    ours = tiled_attention(q, k, v, causal=True, tile_size=48)
    error = (ours - F.scaled_dot_product_attention(q, k, v, is_causal=True)).abs().max()
    assert measure("max abs error vs SDPA", error) < 1e-6


@pytest.mark.parametrize("T_q,T_k,d,d_v", [(1, 9, 4, 4), (7, 20, 8, 3), (20, 7, 4, 6)])
def test_cross_attention_and_other_value_widths(T_q, T_k, d, d_v):
    q, k, v = qkv(T_q=T_q, T_k=T_k, d=d, d_v=d_v)
    for causal in (False, True):
        expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        assert_close(tiled_attention(q, k, v, causal=causal, tile_size=3), expected, **TIGHT)


def test_batch_dimensions_broadcast_and_scale_options():
    q, k, v = qkv(H=4, T_q=10, T_k=10)
    k, v = k[:, :1], v[:, :1]  # one key/value head shared by four query heads
    expected = F.scaled_dot_product_attention(q, k.expand_as(q), v.expand_as(q), scale=0.3)
    assert_close(tiled_attention(q, k, v, tile_size=4, scale=0.3), expected, **TIGHT)
    unscaled = F.scaled_dot_product_attention(q, k.expand_as(q), v.expand_as(q), scale=1.0)
    assert_close(tiled_attention(q, k, v, tile_size=4, scale=False), unscaled, **TIGHT)
    x = torch.randn(6, 4)  # no batch dimensions at all
    assert_close(tiled_attention(x, x, x, tile_size=4), F.scaled_dot_product_attention(x, x, x))


def test_log_sum_exp_is_that_of_the_scores():
    q, k, v = qkv(T_q=11, T_k=11, dtype=torch.float64)
    mask = causal_mask(11)
    scores = (q @ k.transpose(-2, -1) / math.sqrt(8)).masked_fill(~mask, float("-inf"))
    out, lse = tiled_forward(q, k, v, causal=True, tile_size=4)
    assert_close(lse, torch.logsumexp(scores, dim=-1))
    assert_close(out, torch.softmax(scores, dim=-1) @ v)


def test_large_scores_stay_finite():
    q, k, v = qkv(T_q=12, T_k=12)
    out = tiled_attention(q * 300, k * 300, v, tile_size=5)
    assert torch.isfinite(out).all()
    assert_close(out, F.scaled_dot_product_attention(q * 300, k * 300, v), atol=1e-5, rtol=0)


def test_each_step_is_attention_over_the_keys_seen_so_far():
    q, k, v = qkv(T_q=10, T_k=10, dtype=torch.float64)
    mask = random_mask(10, 10)
    scores = (q @ k.transpose(-2, -1) / math.sqrt(8)).masked_fill(~mask, float("-inf"))
    steps = list(tile_steps(q, k, v, mask, tile_size=4))
    assert [(s.index, s.start, s.stop) for s in steps] == [(0, 0, 4), (1, 4, 8), (2, 8, 10)]
    before = torch.full(scores.shape[:-1], float("-inf"), dtype=torch.float64)
    for step in steps:
        seen = scores[..., : step.stop]  # (B, H, T, stop)
        m = seen.amax(dim=-1)
        assert_close(step.scores, scores[..., step.start : step.stop])
        assert_close(step.running_max, m)
        # the correction exp(m_before - m): 0 where a row had seen no allowed key
        assert_close(step.rescale, torch.exp(before - m).nan_to_num(0.0))
        met = torch.isfinite(m)
        shift = torch.where(met, m, 0.0)[..., None]
        assert_close(step.running_sum, torch.exp(seen - shift).sum(-1))
        weights = torch.softmax(seen, dim=-1).nan_to_num(0.0)  # rows with no key yet: 0
        assert_close(step.output, weights @ v[..., : step.stop, :])
        before = m
    assert not torch.isfinite(steps[0].running_max).all()  # some rows met no key in tile 0
    assert_close(steps[-1].output, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


def test_causal_skips_the_tiles_no_query_reaches():
    q, k, v = qkv(T_q=5, T_k=20)
    assert [s.stop for s in tile_steps(q, k, v, causal=True, tile_size=4)] == [4, 8]
    assert len(list(tile_steps(q, k, v, tile_size=4))) == 5


@pytest.mark.parametrize("tile", [3, 8, 13])  # 3 and 8 do not divide 13
@pytest.mark.parametrize("how", ["none", "causal", "mask"])
def test_backward_matches_torch(tile, how):
    q, k, v = qkv(T_q=13, T_k=13, grad=True)
    mask = random_mask(13, 13) if how == "mask" else None
    causal = how == "causal"
    grad_out = torch.randn(2, 3, 13, 8)
    ours = torch.autograd.grad(
        flash_attention(q, k, v, mask, causal=causal, tile_size=tile), (q, k, v), grad_out
    )
    expected = torch.autograd.grad(
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal),
        (q, k, v),
        grad_out,
    )
    for a, b in zip(ours, expected, strict=True):
        assert_close(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "T_q,T_k,tile,how",
    [(5, 5, 2, "none"), (5, 7, 3, "causal"), (6, 6, 4, "mask"), (1, 4, 3, "none")],
)
def test_gradcheck_in_float64(T_q, T_k, tile, how):
    q, k, v = qkv(B=1, H=2, T_q=T_q, T_k=T_k, d=3, d_v=2, dtype=torch.float64, grad=True)
    mask = random_mask(T_q, T_k, shape=(1,)) if how == "mask" else None
    causal = how == "causal"
    factor = 1 / math.sqrt(3)
    assert torch.autograd.gradcheck(
        lambda *t: TiledAttention.apply(*t, mask, causal, tile, factor), (q, k, v)
    )


def test_gradcheck_with_broadcast_keys():
    q, k, v = qkv(B=1, H=3, T_q=4, T_k=5, d=2, d_v=2, dtype=torch.float64)
    k, v = k[:, :1].clone().requires_grad_(), v[:, :1].clone().requires_grad_()
    q.requires_grad_()
    assert torch.autograd.gradcheck(lambda *t: flash_attention(*t, tile_size=2), (q, k, v))


def test_forward_saves_only_q_k_v_output_and_log_sum_exp():
    q, k, v = qkv(T_q=40, T_k=40, grad=True)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        out = flash_attention(q, k, v, causal=True, tile_size=8)
    assert len(saved) == 5
    assert all(a is b for a, b in zip(saved[:3], (q, k, v), strict=True))
    assert torch.equal(saved[3], out) and saved[4].shape == (2, 3, 40)
    plain = []  # autograd through the loop keeps tiles: scores, weights, masks
    with torch.autograd.graph.saved_tensors_hooks(lambda t: plain.append(t) or t, lambda t: t):
        tiled_attention(q, k, v, causal=True, tile_size=8)
    assert sum(t.shape[-2:] == (40, 8) for t in plain) >= 5 * 2


class _LargestOutput(TorchFunctionMode):
    """Records the largest tensor any torch function returns, independently of the profiler."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, tuple | list) else (out,):
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel() * t.element_size())
        return out


def test_no_grad_forward_makes_no_tensor_of_T_by_T():
    B, H, T, tile = 1, 2, 512, 16
    q, k, v = qkv(B=B, H=H, T_q=T, T_k=T, d=16, d_v=16)
    with torch.no_grad(), _LargestOutput() as seen:
        tiled_attention(q, k, v, causal=True, tile_size=tile)
    assert seen.largest == B * H * T * tile * 4  # one (B, H, T, tile) float32 block of scores
    assert seen.largest * (T // tile) == B * H * T * T * 4
    with torch.no_grad(), _LargestOutput() as seen:
        F.scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(T), scale=0.25)
        naive = (q @ k.transpose(-2, -1)).softmax(-1) @ v  # the reference writes (T, T)
    assert seen.largest == B * H * T * T * 4 and naive.shape == q.shape


@pytest.mark.slow  # the profiler's first start takes about 1.5 s
def test_profiler_counts_every_block_and_the_peak_stays_near_one_tile():
    B, H, T, tile = 1, 2, 2048, 64
    q, k, v = qkv(B=B, H=H, T_q=T, T_k=T, d=16, d_v=16)
    with torch.no_grad():
        tiled = allocations(tiled_attention, q, k, v, causal=True, tile_size=tile)
        naive = allocations(lambda: (q @ k.transpose(-2, -1)).softmax(-1) @ v)
    square = B * H * T * T * 4
    with torch.no_grad(), _LargestOutput() as seen:
        tiled_attention(q, k, v, causal=True, tile_size=tile)
    assert tiled.largest_bytes == seen.largest == B * H * T * tile * 4
    assert tiled.peak_bytes < square / 4  # measured 5.3 MiB against 32 MiB
    assert naive.largest_bytes == square and naive.peak_bytes >= 2 * square  # scores + weights


@pytest.mark.parametrize(
    "kwargs,error,message",
    [
        ({"tile_size": 0}, ValueError, "tile_size: expected a positive int, got 0"),
        ({"tile_size": 2.0}, TypeError, "tile_size: expected a positive int, got float"),
        ({"causal": 1}, TypeError, "causal: expected True or False, got int 1"),
        ({"causal": True, "mask": causal_mask(4)}, ValueError, "mask: expected None when"),
        ({"mask": torch.ones(4, 4)}, TypeError, "mask: expected dtype torch.bool"),
        ({"mask": torch.zeros(4, 4, dtype=torch.bool)}, ValueError, "query row 0"),
        ({"scale": -1.0}, ValueError, "scale: expected a positive finite factor"),
    ],
)
@pytest.mark.parametrize("fn", [tiled_attention, flash_attention, tiled_forward])
def test_bad_arguments_are_named(fn, kwargs, error, message):
    x = torch.randn(1, 4, 8)
    with pytest.raises(error, match=message):
        fn(x, x, x, **kwargs)


def test_bad_tensors_are_named_and_tile_steps_checks_too():
    x = torch.randn(1, 4, 8)
    with pytest.raises(ValueError, match="k: expected width d_k = 8"):
        tiled_attention(x, torch.randn(1, 4, 6), x)
    with pytest.raises(TypeError, match="q: expected a floating-point tensor"):
        flash_attention(torch.ones(1, 4, 8, dtype=torch.long), x, x)
    with pytest.raises(ValueError, match="tile_size: expected a positive int"):
        next(tile_steps(x, x, x, tile_size=-1))
