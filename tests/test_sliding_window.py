"""course_lib.sliding_window: the mask, the reach through layers and the windowed forward pass,
each against an independent computation (gradients, a rolling cache written out)."""

import pytest
import torch
import torch.nn.functional as F

import course_lib
from course_lib import sliding_window as sw
from course_lib.attention import causal_mask
from course_lib.model import TinyTransformer
from course_lib.positional import apply_rope
from course_lib.variants import BASE


@pytest.fixture(scope="module")
def model():
    course_lib.set_seed(3)
    return TinyTransformer.from_config(BASE).eval()


def test_window_none_or_wide_is_the_causal_mask():
    assert torch.equal(sw.window_mask(7, None), causal_mask(7))
    assert torch.equal(sw.window_mask(7, 7), causal_mask(7))
    assert sw.window_mask(6, 2, 1)[5].tolist() == [True, False, False, False, True, True]


@pytest.mark.parametrize(
    "args,error,message",
    [((0, 2), ValueError, "T: expected a positive int"), ((4, 0), ValueError, "window"),
     ((4, 2, -1), ValueError, "sinks: expected an int >= 0"), ((4, 2.0), TypeError, "window")],
)  # fmt: skip
def test_window_mask_names_a_bad_argument(args, error, message):
    with pytest.raises(error, match=message):
        sw.window_mask(*args)


@pytest.mark.parametrize("window,sinks", [(3, 0), (4, 1), (1, 0), (12, 2)])
def test_the_reach_is_where_gradients_flow_through_random_attention_layers(window, sinks):
    """Input j reaches query i after l layers exactly where d(output_i)/d(input_j) != 0 for
    l stacked attention layers (random weights, a residual) under the same mask."""
    T, D, L = 12, 8, 3
    mask = sw.window_mask(T, window, sinks)
    reach = sw.receptive_field(mask, L)
    g = torch.Generator().manual_seed(window)
    layers = [torch.randn(3, D, D, generator=g, dtype=torch.float64) for _ in range(L)]
    x0 = torch.randn(T, D, generator=g, dtype=torch.float64, requires_grad=True)
    x = x0
    for layer, (wq, wk, wv) in enumerate(layers):
        x = x + F.scaled_dot_product_attention(x @ wq, x @ wk, x @ wv, attn_mask=mask)
        for i in range(T):
            (grad,) = torch.autograd.grad(x[i].sum(), x0, retain_graph=True)
            flows = grad.abs().sum(-1) > 0  # (T,)
            assert torch.equal(flows, reach[layer, i]), (layer, i)


def test_receptive_field_names_a_bad_argument():
    with pytest.raises(TypeError, match="mask: expected a 2-D bool tensor"):
        sw.receptive_field(torch.ones(3, 3), 2)
    with pytest.raises(ValueError, match="num_layers"):
        sw.receptive_field(causal_mask(3), 0)


def test_without_a_window_the_windowed_forward_is_the_model(model):
    ids = torch.randint(BASE.vocab_size, (2, 40), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert torch.allclose(sw.windowed_logits(model, ids), model(ids), atol=1e-5)


def test_own_positions_are_the_models_blocks_with_the_mask(model):
    ids = torch.randint(BASE.vocab_size, (2, 40), generator=torch.Generator().manual_seed(2))
    mask = sw.window_mask(40, 6, 2)
    with torch.no_grad():
        x = model.embed(ids)
        for block in model.blocks:
            x = block(x, mask)
        expected = model.head(model.norm(x))
    assert torch.allclose(sw.windowed_logits(model, ids, 6, 2, "original"), expected, atol=1e-5)
    # without sinks the two ways of placing them are the same
    assert torch.allclose(
        sw.windowed_logits(model, ids, 6, 0, "cache"), sw.windowed_logits(model, ids, 6), atol=1e-6
    )


def _streaming(model, ids, window, sinks):
    """StreamingLLM written out: a rolling cache of unturned keys, sinks first; at each step
    every entry is turned at its place in the cache and the query at the last place."""
    model = model.double()
    B, T = ids.shape
    caches = [([], []) for _ in model.blocks]  # per layer: lists of (B, H, d) keys, values
    rows = []
    for t in range(T):
        x = model.embed(ids[:, t : t + 1])  # (B, 1, D)
        for block, (keys, values) in zip(model.blocks, caches, strict=True):
            attn = block.attn
            h = block.norm1(x)
            q, k, v = (
                u.view(B, attn.num_heads, -1) for u in attn.qkv(h)[:, 0].split(h.shape[-1], -1)
            )
            keys.append(k)
            values.append(v)
            if len(keys) > sinks + window:
                del keys[sinks], values[sinks]
            n = len(keys)
            kk = torch.stack(keys, 2)  # (B, H, n, d)
            kk = apply_rope(kk, torch.arange(n), attn.rope.base)
            qq = apply_rope(q[:, :, None], torch.tensor([n - 1]), attn.rope.base)
            y = F.scaled_dot_product_attention(qq, kk, torch.stack(values, 2))  # (B, H, 1, d)
            x = x + attn.out(y.transpose(1, 2).reshape(B, 1, -1))
            x = x + block.ff(block.norm2(x))
        rows.append(model.head(model.norm(x)))
    model.float()
    return torch.cat(rows, 1)  # (B, T, V)


@pytest.mark.parametrize("window,sinks", [(5, 1), (4, 3), (30, 1)])
def test_cache_positions_are_a_streaming_cache_fed_one_token_at_a_time(model, window, sinks):
    ids = torch.randint(BASE.vocab_size, (2, 24), generator=torch.Generator().manual_seed(window))
    with torch.no_grad():
        expected = _streaming(model, ids, window, sinks).float()
        got = sw.windowed_logits(model, ids, window, sinks, "cache")
    assert torch.allclose(got, expected, atol=1e-4)


def test_sink_offsets():
    assert sw.sink_offsets(8, 3, 1, "original")[:, 0].tolist() == list(range(8))
    assert sw.sink_offsets(8, 3, 1, "cache")[:, 0].tolist() == [0, 1, 2, 3, 3, 3, 3, 3]
    assert sw.sink_offsets(8, 3, 2, "cache")[:, 1].tolist() == [0, 0, 1, 2, 3, 3, 3, 3]


def test_the_windowed_forward_names_a_bad_argument(model):
    ids = torch.zeros(1, 4, dtype=torch.long)
    with pytest.raises(ValueError, match="positions: expected one of"):
        sw.windowed_logits(model, ids, 3, 1, "cached")
    with pytest.raises(TypeError, match="model: expected a TinyTransformer"):
        sw.windowed_logits(torch.nn.Linear(2, 2), ids, 3)


def test_first_key_mass_is_the_attention_weight_on_key_0(model):
    ids = torch.randint(BASE.vocab_size, (3, 10), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        _, weights = model(ids, return_weights=True)
    mass = sw.first_key_mass(model, ids)
    assert torch.allclose(mass, torch.stack([w[..., 0].mean(0) for w in weights]), atol=1e-6)


def test_the_table_readers_are_the_per_seed_numbers_of_the_file():
    """seed_excess, inside_excess, same_cache and against (lesson 15b) read the table the way the
    lesson's text says: per seed, the 0-30 mean over seeds, the plain window of the same cache,
    and lesson 01's bar, three times the larger seed range."""
    results = {
        "runs": [
            {"settings": {"a": {"beyond": {"all": a, "induction": 2 * a},
                                "by_position": [a] * 31 + [9.0] * 96},
                          "b": {"beyond": {"all": b, "induction": 0.0},
                                "by_position": [b] * 127}}}
            for a, b in ((0.1, 0.5), (0.3, 0.5), (0.2, 0.9))
        ]
    }  # fmt: skip
    assert sw.seed_excess(results, "a") == [0.1, 0.3, 0.2]
    assert sw.seed_excess(results, "a", "induction") == [0.2, 0.6, 0.4]
    assert sw.inside_excess(results, "a") == pytest.approx(0.2)
    row = sw.against(results, "a", "b")
    assert row["gaps"] == pytest.approx([-0.4, -0.2, -0.7])
    assert row["gap"] == pytest.approx(-1.3 / 3)
    assert row["bar"] == pytest.approx(3 * 0.4)  # b's range 0.4 beats a's 0.2
    assert sw.same_cache(31, 1) == sw.same_cache(29, 3) == sw.same_cache(32, 3) == "window 32"
    assert sw.same_cache(15, 1) == "window 16"
