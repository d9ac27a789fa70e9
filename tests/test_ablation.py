"""Knocking heads and feed-forward layers out (course_lib.ablation), against a forward pass
written out by hand in this file."""

import math

import pytest
import torch
import torch.nn.functional as F

import course_lib
from course_lib import ablation, data, train
from course_lib.model import TinyTransformer, load_pretrained


@pytest.fixture(scope="module")
def ids():
    return data.load_split("valid")[:40]  # (40, 32): every skill occurs


def random_model(seed: int = 0, positional: str = "rope") -> TinyTransformer:
    course_lib.set_seed(seed)
    return TinyTransformer(len(data.VOCAB), 32, 4, 64, 3, 32, positional=positional).eval()


def by_hand(model, idx, zeroed=(), meaned=(), no_ff=()) -> torch.Tensor:
    """Logits (B, T, V) of a pre-norm TinyTransformer, from its weights alone: heads in
    `zeroed` hand on zeros, heads in `meaned` use their pattern averaged over the batch,
    layers in `no_ff` skip their feed-forward."""
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
        if layer not in no_ff:
            h = F.layer_norm(x, x.shape[-1:], block.norm2.weight, block.norm2.bias)
            ff_in, ff_out = block.ff[0], block.ff[2]
            x = x + F.linear(F.gelu(F.linear(h, ff_in.weight, ff_in.bias)), ff_out.weight,
                             ff_out.bias)  # fmt: skip
    x = F.layer_norm(x, x.shape[-1:], model.norm.weight, model.norm.bias)
    return x @ model.head.weight.T  # (B, T, V)


def losses_by_hand(model, ids, **knock) -> dict[str, float]:
    """Per-skill mean loss, the skills' positions taken from course_lib.data directly."""
    with torch.no_grad():
        logits = by_hand(model, ids[:, :-1], **knock)
    loss = F.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")  # (N, T-1)
    finders = {"agreement": data.subject_pairs, "brackets": data.bracket_pairs,
               "song": data.previous_token_pairs}  # fmt: skip
    out = {"overall": float(loss.mean())}
    for skill, find in finders.items():
        out[skill] = float(
            torch.stack([loss[b, q] for b, s in enumerate(ids) for q, _ in find(s)]).mean()
        )
    return out


def assert_same(got: dict, expected: dict) -> None:
    assert set(got) <= set(expected)
    for skill, value in got.items():
        assert value == pytest.approx(expected[skill], abs=1e-5), skill


def test_the_hand_forward_is_the_model(ids):
    model = random_model()
    with torch.no_grad():
        torch.testing.assert_close(by_hand(model, ids), model(ids), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["rope-h4", "sinusoidal-h4"])
def test_nothing_knocked_out_is_the_plain_loss(ids, name):
    model = load_pretrained(name)
    got = ablation.skill_losses(model, ids, skills=ablation.ALL_SKILLS)
    assert got["overall"] == pytest.approx(train.evaluate(model, ids), abs=1e-6)
    assert_same(got, losses_by_hand(model, ids))


@pytest.mark.parametrize(
    "knocked", [[(0, 0)], [(1, 3)], [(2, 1), (2, 2)], [(0, 2), (2, 0)], [(1, 1), (1, 1)]]
)
def test_zeroing_heads_matches_the_hand_computation(ids, knocked):
    model = random_model()
    got = ablation.skill_losses(model, ids, knocked_out=knocked, skills=ablation.ALL_SKILLS)
    assert_same(got, losses_by_hand(model, ids, zeroed=set(knocked)))
    assert got["overall"] != pytest.approx(ablation.skill_losses(model, ids)["overall"], abs=1e-4)


@pytest.mark.parametrize("knocked", [[(0, 0)], [(1, 1), (1, 3)], [(0, 1), (2, 2)]])
def test_mean_pattern_matches_the_hand_computation(ids, knocked):
    model = load_pretrained("rope-h4") if max(layer for layer, _ in knocked) < 2 else random_model()
    got = ablation.skill_losses(model, ids, knocked_out=knocked, mode="mean")
    assert_same(got, losses_by_hand(model, ids, meaned=set(knocked)))


def test_the_model_is_unchanged_afterwards(ids):
    model = load_pretrained("rope-h4")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        logits = model(ids)
    ablation.skill_losses(model, ids, knocked_out=[(0, 0), (1, 2)])
    ablation.skill_losses(model, ids, knocked_out=[(0, 1)], mode="mean")
    ablation.ablation_table(model, ids[:8], skills=("overall",))
    with pytest.raises(RuntimeError), ablation.knockout(model, [(0, 3)]):
        raise RuntimeError("the hooks must go even when the block fails")
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    hooks = [m._forward_hooks or m._forward_pre_hooks for m in model.modules()]
    assert not any(hooks) and not model.training
    with torch.no_grad():
        assert torch.equal(model(ids), logits)
    model.train()
    ablation.skill_losses(model, ids[:4], skills=("overall",))
    assert model.training  # the mode is given back too


def test_ablation_table_is_one_knock_out_per_row(ids):
    model = load_pretrained("rope-h2")
    labels, table = ablation.ablation_table(model, ids, skills=("brackets", "overall"))
    assert labels == [None, (0, 0), (0, 1), (1, 0), (1, 1)]
    assert table.shape == (5, 2)
    for label, row in zip(labels, table, strict=True):
        got = losses_by_hand(model, ids, zeroed={label} if label else set())
        assert row.tolist() == pytest.approx([got["brackets"], got["overall"]], abs=1e-5)


def test_skill_positions_on_a_labelled_sentence():
    tokens = 'Dogs near the cat sing bone run bone run ( the bird " the boys " ) .'.split()
    #         0    1    2   3   4    5    6   7    8   9 10  11   12 13  14  15 16 17
    got = ablation.skill_positions(data.encode(tokens)[None], ablation.ALL_SKILLS)
    positions = {skill: t.tolist() for skill, (_, t) in got.items()}
    assert positions["agreement"] == [3]  # "cat": next comes the verb "sing"
    assert positions["brackets"] == [14, 15]  # next: the closing " and the )
    assert positions["song"] == [6, 7]  # "run" -> "bone", "bone" -> "run"
    assert positions["overall"] == list(range(17))


def test_bad_input_names_the_parameter(ids):
    model = load_pretrained("rope-h4")
    cases = [
        ({"knocked_out": [(2, 0)]}, r"knocked_out: layer expected an int in 0\.\.1.*got 2"),
        ({"knocked_out": [(0, 4)]}, r"knocked_out: head expected an int in 0\.\.3.*got 4"),
        ({"knocked_out": [(0, -1)]}, r"knocked_out: head .* got -1"),
        ({"knocked_out": (0, 1)}, r"knocked_out: expected an iterable of \(layer, head\) pairs"),
        ({"knocked_out": [0]}, r"knocked_out: expected \(layer, head\) pairs, got 0"),
        ({"mode": "resample"}, r"mode: expected one of \('zero', 'mean'\), got 'resample'"),
        ({"skills": ("grammar",)}, r"skills: expected one of .*got 'grammar'"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            ablation.skill_losses(model, ids, **kwargs)
    with pytest.raises(ValueError, match=r"ids: expected a \(N, T\) tensor"):
        ablation.skill_losses(model, ids[0])
    with pytest.raises(ValueError, match="ids: no 'brackets' positions"):
        ablation.skill_losses(model, data.encode("Dogs run . Cat sleeps .")[None])
    with pytest.raises(ValueError, match=r"mode: expected one of"):
        ablation.ablation_table(model, ids, mode="Zero")


# ---------------------------------------------------------------- lesson 12: the toy language


@pytest.mark.slow
def test_knockout_excess_is_the_excess_of_the_knocked_out_models_losses():
    from course_lib import corpus, variants

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
    from course_lib import variants

    model = variants.load_trained("base", 0)
    labels, table = ablation.excess_table(model, skills=("induction", "all"))
    assert labels[0] is None and labels[1:] == [(a, b) for a in range(2) for b in range(4)]
    assert table.shape == (9, 2) and table.dtype == torch.float64
    one = ablation.knockout_excess(model, knocked_out=[labels[5]])
    assert table[5].tolist() == pytest.approx([one["induction"], one["all"]], abs=1e-9)


# ---------------------------------------------------------------- the scale


def test_flip_scale_turns_the_scale_on_for_a_model_trained_without_it():
    ids = data.load_split("valid")[:4]
    model = load_pretrained("rope-h4-noscale")
    flipped = ablation.flip_scale(model)
    assert flipped.config.scale is True and model.config.scale is False
    edited = load_pretrained("rope-h4-noscale")  # the scale on = queries divided by sqrt(d)
    D = edited.config.d_model
    with torch.no_grad():
        for block in edited.blocks:
            block.attn.qkv.weight[:D] /= 4
            block.attn.qkv.bias[:D] /= 4
    torch.testing.assert_close(flipped(ids), edited(ids), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(ablation.flip_scale(flipped)(ids), model(ids))
    with pytest.raises(ValueError, match="model: expected one trained with the 1/sqrt"):
        ablation.without_scale(model)
