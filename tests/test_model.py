from dataclasses import replace

import pytest
import torch
from torch import nn
from torch.testing import assert_close

from course_lib import language, variants
from course_lib.attention import causal_mask
from course_lib.block import TransformerBlock
from course_lib.model import CHECKPOINT_DIR, ModelConfig, TinyTransformer
from course_lib.multihead import MultiHeadAttention

V = len(language.VOCAB)


def small(positional="rope", **kw):
    return TinyTransformer(V, 32, 4, 64, 2, 24, positional=positional, **kw).eval()


@pytest.mark.parametrize("positional", ["rope", "sinusoidal", "none", "learned"])
def test_shapes_and_weights(positional):
    model = small(positional)
    idx = torch.randint(V, (3, 10))
    logits = model(idx)
    assert logits.shape == (3, 10, V)
    logits2, weights = model(idx, return_weights=True)
    assert_close(logits2, logits)  # fused and from-scratch attention agree
    assert len(weights) == 2
    for w in weights:
        assert w.shape == (3, 4, 10, 10)
        assert_close(w.sum(-1), torch.ones(3, 4, 10))
        assert (w.triu(1) == 0).all()  # no query looks ahead


@pytest.mark.parametrize("positional", ["rope", "sinusoidal", "none", "learned"])
@pytest.mark.parametrize("prenorm", [True, False])
def test_changing_a_future_token_never_changes_earlier_logits(positional, prenorm):
    model = small(positional, prenorm=prenorm)
    idx = torch.randint(V, (2, 16))
    before = model(idx)
    for t in (0, 5, 15):
        changed = idx.clone()
        changed[:, t] = (changed[:, t] + 1 + torch.arange(2)) % V
        after = model(changed)
        assert torch.equal(after[:, :t], before[:, :t]), f"position < {t} saw token {t}"
        assert not torch.allclose(after[:, t], before[:, t])  # the changed position itself does


def test_matches_a_torch_transformer_encoder_built_from_the_same_weights():
    model = TinyTransformer(V, 32, 4, 64, 2, 24, positional="none").eval()
    reference = nn.ModuleList(
        nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, activation="gelu", batch_first=True,
                                   norm_first=True)
        for _ in range(2)
    ).eval()  # fmt: skip
    for ours, theirs in zip(model.blocks, reference, strict=True):
        theirs.self_attn.in_proj_weight.data.copy_(ours.attn.qkv.weight)
        theirs.self_attn.in_proj_bias.data.copy_(ours.attn.qkv.bias)
        theirs.self_attn.out_proj.weight.data.copy_(ours.attn.out.weight)
        theirs.self_attn.out_proj.bias.data.copy_(ours.attn.out.bias)
        theirs.linear1.load_state_dict(ours.ff[0].state_dict())
        theirs.linear2.load_state_dict(ours.ff[2].state_dict())
        theirs.norm1.load_state_dict(ours.norm1.state_dict())
        theirs.norm2.load_state_dict(ours.norm2.state_dict())
    idx = torch.randint(V, (2, 12))
    x = model.embed(idx)
    torch_mask = ~causal_mask(12)  # torch: True = may NOT attend
    for layer in reference:
        x = layer(x, src_mask=torch_mask)
    expected = model.head(model.norm(x))
    assert_close(model(idx), expected, atol=1e-5, rtol=1e-4)


def test_made_only_of_course_blocks():
    model = small()
    assert all(type(b) is TransformerBlock for b in model.blocks)
    torch_transformer = (nn.Transformer, nn.TransformerEncoderLayer, nn.MultiheadAttention)
    assert not any(isinstance(m, torch_transformer) for m in model.modules())


def test_sinusoidal_table_is_rebuilt_not_saved():
    model = small("sinusoidal")
    assert "pe" not in model.state_dict()
    assert model.pe.shape == (24, 32)


def test_config_round_trip():
    model = small("sinusoidal", norm="layer", prenorm=False)
    rebuilt = TinyTransformer.from_config(model.config)
    expected = ModelConfig(V, 32, 4, 64, 2, 24, "sinusoidal", "layer", False)
    assert rebuilt.config == model.config == expected
    bare = TinyTransformer.from_config(replace(expected, residual=False, d_ff=0))
    assert not any(block.residual for block in bare.blocks)
    assert sum(p.numel() for b in bare.blocks for p in b.ff.parameters()) == 0


def test_a_tied_head_is_the_embedding_matrix_itself():
    untied, tied = small(), small(tied=True)
    assert not untied.config.tied and tied.config.tied
    assert tied.head.weight is tied.embed.weight  # one (V, D) parameter, read at both ends
    count = [sum(p.numel() for p in m.parameters()) for m in (untied, tied)]
    assert count[0] - count[1] == V * 32
    # its gradient is the sum of what reaches it through the lookup and through the head
    idx = torch.randint(V, (2, 7))
    tied(idx).logsumexp(-1).sum().backward()
    grad = tied.embed.weight.grad
    assert grad is not None and grad.abs().sum() > 0
    # saved and loaded as any checkpoint: both names in the state dict, one tensor again after
    again = TinyTransformer.from_config(tied.config)
    again.load_state_dict(tied.state_dict())
    assert again.head.weight is again.embed.weight
    assert_close(again.eval()(idx), tied(idx))
    # a card written before the field existed builds the untied model it always did
    card = {k: v for k, v in vars(untied.config).items() if k != "tied"}
    assert ModelConfig(**card) == untied.config


@pytest.mark.parametrize(
    "idx, message",
    [
        (torch.zeros(1, 25, dtype=torch.long), "at most max_len = 24 tokens, got 25"),
        (torch.zeros(1, 5), "int64"),
        (torch.zeros(5, dtype=torch.long), r"\(B, T\)"),
        (torch.full((1, 5), V), rf"\[0, {V}\)"),
        (torch.full((1, 5), -1), rf"\[0, {V}\)"),
    ],
)
def test_bad_input_raises(idx, message):
    with pytest.raises(ValueError, match=message):
        small()(idx)


def test_bad_configuration_raises():
    with pytest.raises(ValueError, match="positional"):
        TinyTransformer(V, 32, 4, 64, 2, 24, positional="alibi")
    with pytest.raises(ValueError, match="num_heads"):
        TinyTransformer(V, 32, 5, 64, 2, 24)


@pytest.fixture(scope="module")
def base():
    return variants.load_trained("base", 0)  # the new language's shipped base model, V = 104


def test_every_shipped_model_is_a_plain_state_dict_its_card_describes():
    names = {path.stem for path in CHECKPOINT_DIR.glob("*.json")}
    assert names == {f"lang-{v}-s{s}" for v, seeds in variants.CHECKPOINTS.items() for s in seeds}
    for variant, seeds in variants.CHECKPOINTS.items():
        for seed in seeds:
            card = variants.trained_card(variant, seed)
            model = TinyTransformer.from_config(ModelConfig(**card["config"]))
            # a plain state dict of tensors: loadable without unpickling arbitrary objects
            state = torch.load(CHECKPOINT_DIR / f"{card['name']}.pt", weights_only=True)
            assert all(isinstance(v, torch.Tensor) for v in state.values())
            model.load_state_dict(state)  # strict: every name and shape the card's config has
            assert (card["variant"], card["seed"]) == (variant, seed)
            assert card["parameters"] == sum(p.numel() for p in model.parameters())


def test_checkpoints_are_a_few_megabytes():
    # 13.20 MB (13,198,076 bytes), everything the course ships: the toy language's 16 trained
    # variants, 6.73 MB (base, sinusoidal, no positions and learned positions over 3 seeds,
    # 0.46-0.50 MB each; the one-layer models of 1, 2, 4 and 8 heads, 0.26 MB each; a 1.5 KB
    # card each), and lesson 11b's stand-in, 6.47 MB (its starting, final and 12 snapshot
    # weights, every 50th of its 600 steps, that lesson 12 reads, 0.46 MB each, and who trained
    # it). Another model crosses the bar.
    total = sum(p.stat().st_size for p in CHECKPOINT_DIR.iterdir())
    assert total < 13.5e6


def test_causal_mask_and_rope_tables_are_built_once_and_not_saved(monkeypatch):
    model = small("rope")
    L = model.config.max_len
    assert model.causal.dtype == torch.bool and torch.equal(model.causal, causal_mask(L))
    assert model.blocks[0].attn.rope.cos.shape[0] == L  # the tables are sized by max_len
    assert not any(k.endswith(("causal", "cos", "sin")) for k in model.state_dict())

    def rebuilt(*args, **kwargs):
        raise AssertionError("built during forward")

    # forward slices what __init__ built: nothing rebuilds the mask or the tables
    monkeypatch.setattr("course_lib.model.causal_mask", rebuilt)
    monkeypatch.setattr("course_lib.positional._cos_sin", rebuilt)
    model(torch.randint(0, 11, (2, 5)))


def test_layers_inside_the_model_skip_the_mask_check_a_lone_layer_keeps_it(monkeypatch):
    model = small("rope")
    ids = torch.randint(0, 11, (2, 5))
    expected = model(ids)

    def check_mask(*args):
        raise AssertionError("check_mask ran inside the model")

    monkeypatch.setattr("course_lib.multihead.check_mask", check_mask)
    torch.testing.assert_close(model(ids), expected, rtol=0, atol=0)
    model(ids, return_weights=True)
    monkeypatch.undo()
    empty_row = torch.zeros(5, 5, dtype=torch.bool)
    with pytest.raises(ValueError, match="query row 0"):
        MultiHeadAttention(32, 4)(torch.randn(1, 5, 32), empty_row)


# ---------------------------------------------------------------- sampling (lesson 10)


def _generate_before_top_k(model, prompt, num_tokens, temperature, seed):
    """generate as the lessons stored their outputs with it, before top_k came."""
    generator = torch.Generator().manual_seed(seed)
    ids = prompt
    with torch.no_grad():
        for _ in range(num_tokens):
            logits = model(ids[:, -model.config.max_len :])[:, -1]
            probs = torch.softmax(logits / temperature, dim=-1)
            ids = torch.cat([ids, torch.multinomial(probs, 1, generator=generator)], dim=1)
    return ids


@pytest.mark.parametrize("temperature, seed", [(1.0, 0), (0.7, 3), (1.5, 11)])
def test_generate_draws_the_tokens_it_drew_before_top_k(base, temperature, seed):
    from course_lib.model import generate

    prompt = torch.randint(V, (3, 5), generator=torch.Generator().manual_seed(seed))
    expected = _generate_before_top_k(base, prompt, 20, temperature, seed)
    assert torch.equal(generate(base, prompt, 20, temperature=temperature, seed=seed), expected)


def test_generate_greedy_top_k_and_crop(base):
    from course_lib.model import generate

    model = base
    prompt = torch.randint(V, (2, 4), generator=torch.Generator().manual_seed(1))
    greedy = generate(model, prompt, 12, temperature=0)
    with torch.no_grad():
        assert torch.equal(greedy[:, 4:], model(greedy)[:, 3:-1].argmax(-1))
    assert torch.equal(generate(model, prompt, 12, temperature=0.3, top_k=1, seed=5), greedy)
    sampled = generate(model, prompt, 12, top_k=2, seed=4)
    with torch.no_grad():
        top2 = torch.topk(model(sampled)[:, 3:-1], 2).indices
    assert (top2 == sampled[:, 4:, None]).any(-1).all()
    everything = model.config.vocab_size
    assert torch.equal(generate(model, prompt, 8, top_k=everything, seed=2),
                       generate(model, prompt, 8, seed=2))  # fmt: skip
    long = torch.randint(V, (1, model.config.max_len + 9))
    out = generate(model, long, 3, temperature=0)
    cropped = generate(model, long[:, -model.config.max_len :], 3, temperature=0)
    assert torch.equal(out[:, -3:], cropped[:, -3:])


def test_generate_names_each_bad_argument(base):
    from course_lib.model import generate

    model = base
    prompt = torch.zeros(1, 2, dtype=torch.long)
    V = model.config.vocab_size
    cases = [
        ({"temperature": -1.0}, ValueError, "temperature: expected a number >= 0"),
        ({"temperature": "hot"}, TypeError, "temperature: expected a number, got str"),
        ({"top_k": 0}, ValueError, "top_k: expected a positive int, got 0"),
        ({"top_k": 2.5}, TypeError, "top_k: expected a positive int"),
        ({"top_k": V + 1}, ValueError, f"top_k: expected at most the vocabulary size {V}"),
    ]
    for kwargs, error, message in cases:
        with pytest.raises(error, match=message):
            generate(model, prompt, 3, **kwargs)
    with pytest.raises(ValueError, match="prompt: expected at least one token"):
        generate(model, torch.zeros(2, 0, dtype=torch.long), 3)
    with pytest.raises(ValueError, match="prompt: expected at least one token"):
        generate(model, torch.zeros(0, 3, dtype=torch.long), 3)
