"""Knocking heads out (course_lib.ablation), against a forward pass written out by hand in this
file, and the excess each knock-out costs on the toy language."""

import math

import pytest
import torch
import torch.nn.functional as F

import course_lib
from course_lib import ablation, corpus, train, variants
from course_lib.model import TinyTransformer


@pytest.fixture(scope="module")
def ids():
    return corpus.load_split("valid")[:40]  # (40, 32)


@pytest.fixture(scope="module")
def base():
    return variants.load_trained("base", 0)  # 2 layers of 4 heads


def random_model(seed: int = 0, positional: str = "rope") -> TinyTransformer:
    course_lib.set_seed(seed)
    return TinyTransformer(len(corpus.VOCAB), 32, 4, 64, 3, 32, positional=positional).eval()


def by_hand(model, idx, zeroed=(), meaned=()) -> torch.Tensor:
    """Logits (B, T, V) of a pre-norm TinyTransformer, from its weights alone: heads in
    `zeroed` hand on zeros, heads in `meaned` use their pattern averaged over the batch."""
    B, T = idx.shape
    x = model.embed.weight[idx]  # (B, T, D)
    if model.config.positional == "sinusoidal":
        x = x + model.pe[:T]
    future = torch.ones(T, T, dtype=torch.bool).triu(1)  # (T, T), True above the diagonal
    for layer, block in enumerate(model.blocks):
        a = block.attn
        H, d = a.num_heads, a.d_head
        h = F.layer_norm(x, x.shape[-1:], block.norm1.weight, block.norm1.bias)
        q, k, v = F.linear(h, a.qkv.weight, a.qkv.bias).split(H * d, dim=-1)  # each (B, T, D)
        q, k, v = (t.reshape(B, T, H, d).permute(0, 2, 1, 3) for t in (q, k, v))  # (B, H, T, d)
        if a.rope is not None:
            q, k = a.rope(q), a.rope(k)
        scores = q @ k.transpose(-1, -2) / math.sqrt(d)  # (B, H, T, T)
        w = scores.masked_fill(future, -math.inf).softmax(-1)
        heads_out = []
        for head in range(H):
            w_h = w[:, head]  # (B, T, T)
            if (layer, head) in meaned:
                w_h = w_h.mean(0, keepdim=True).expand(B, T, T)
            y = w_h @ v[:, head]  # (B, T, d)
            heads_out.append(torch.zeros_like(y) if (layer, head) in zeroed else y)
        x = x + F.linear(torch.cat(heads_out, -1), a.out.weight, a.out.bias)
        h = F.layer_norm(x, x.shape[-1:], block.norm2.weight, block.norm2.bias)
        ff_in, ff_out = block.ff[0], block.ff[2]
        x = x + F.linear(F.gelu(F.linear(h, ff_in.weight, ff_in.bias)), ff_out.weight,
                         ff_out.bias)  # fmt: skip
    x = F.layer_norm(x, x.shape[-1:], model.norm.weight, model.norm.bias)
    return x @ model.head.weight.T  # (B, T, V)


def knocked(model, ids, knocked_out, mode="zero") -> torch.Tensor:
    with torch.no_grad(), ablation.knockout(model, knocked_out, mode):
        return model(ids)


def test_the_hand_forward_is_the_model(ids):
    model = random_model()
    with torch.no_grad():
        torch.testing.assert_close(by_hand(model, ids), model(ids), rtol=1e-5, atol=1e-5)


def test_nothing_knocked_out_is_the_model_itself(ids, base):
    with torch.no_grad():
        assert torch.equal(knocked(base, ids, []), base(ids))
        torch.testing.assert_close(by_hand(base, ids), base(ids), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "heads", [[(0, 0)], [(1, 3)], [(2, 1), (2, 2)], [(0, 2), (2, 0)], [(1, 1), (1, 1)]]
)
def test_zeroing_heads_matches_the_hand_computation(ids, heads):
    model = random_model()
    got = knocked(model, ids, heads)
    torch.testing.assert_close(got, by_hand(model, ids, zeroed=set(heads)), rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        assert not torch.allclose(got, model(ids), atol=1e-4)


@pytest.mark.parametrize("heads", [[(0, 0)], [(1, 1), (1, 3)], [(0, 1), (2, 2)]])
def test_mean_pattern_matches_the_hand_computation(ids, base, heads):
    model = base if max(layer for layer, _ in heads) < 2 else random_model()
    got = knocked(model, ids, heads, mode="mean")
    want = by_hand(model, ids, meaned=set(heads))
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_the_model_is_unchanged_afterwards(ids, base):
    before = {k: v.clone() for k, v in base.state_dict().items()}
    with torch.no_grad():
        logits = base(ids)
    knocked(base, ids, [(0, 0), (1, 2)])
    knocked(base, ids, [(0, 1)], mode="mean")
    with pytest.raises(RuntimeError), ablation.knockout(base, [(0, 3)]):
        raise RuntimeError("the hooks must go even when the block fails")
    assert all(torch.equal(before[k], v) for k, v in base.state_dict().items())
    hooks = [m._forward_hooks or m._forward_pre_hooks for m in base.modules()]
    assert not any(hooks) and not base.training
    with torch.no_grad():
        assert torch.equal(base(ids), logits)


def test_bad_input_names_the_parameter(base):
    cases = [
        ({"knocked_out": [(2, 0)]}, r"knocked_out: layer expected an int in 0\.\.1.*got 2"),
        ({"knocked_out": [(0, 4)]}, r"knocked_out: head expected an int in 0\.\.3.*got 4"),
        ({"knocked_out": [(0, -1)]}, r"knocked_out: head .* got -1"),
        ({"knocked_out": (0, 1)}, r"knocked_out: expected an iterable of \(layer, head\) pairs"),
        ({"knocked_out": [0]}, r"knocked_out: expected \(layer, head\) pairs, got 0"),
        ({"mode": "resample"}, r"mode: expected one of \('zero', 'mean'\), got 'resample'"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=message), ablation.knockout(base, **kwargs):
            pass


# ---------------------------------------------------------------- excess per skill (lesson 12)


@pytest.mark.slow
def test_knockout_excess_is_the_excess_of_the_knocked_out_models_losses():
    model = variants.load_trained("base", 0)
    ids = corpus.load_split("valid")
    assert ablation.knockout_excess(model) == pytest.approx(variants.excess_loss(model, "valid"))
    with ablation.knockout(model, [(1, 3)]):
        want = corpus.excess_loss(train.token_losses(model, ids), "valid")
    got = ablation.knockout_excess(model, knocked_out=[(1, 3)])
    assert got == pytest.approx(want, abs=1e-9)
    assert got["all"] > ablation.knockout_excess(model)["all"]  # hooks gone: the model back


@pytest.mark.slow
def test_excess_table_is_one_knock_out_per_row():
    model = variants.load_trained("base", 0)
    labels, table = ablation.excess_table(model, skills=("induction", "all"))
    assert labels[0] is None and labels[1:] == [(a, b) for a in range(2) for b in range(4)]
    assert table.shape == (9, 2) and table.dtype == torch.float64
    one = ablation.knockout_excess(model, knocked_out=[labels[5]])
    assert table[5].tolist() == pytest.approx([one["induction"], one["all"]], abs=1e-9)
