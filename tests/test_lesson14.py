"""Lesson 14's claims, each measured: the defaults leave every model as it was, RMSNorm and
SwiGLU in the course's block are torch's, the parameter counts, your block against the
course's, and the trained rows the lesson reads from data/variants.json."""

import json
from dataclasses import asdict, fields
from functools import partial
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import course_lib
from course_lib import corpus, variants
from course_lib.block import TransformerBlock, make_norm
from course_lib.feedforward import SwiGLU, feedforward_parameters, swiglu_parameters
from course_lib.model import CHECKPOINT_DIR, ModelConfig, TinyTransformer
from course_lib.positional import RotaryEmbedding
from course_lib.train import TrainConfig, train
from helpers import lesson_markdown, notebook_functions

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "14_todays_block.ipynb"


def _fingerprint(model) -> list[float]:
    """Sum, sum of squares and a position-weighted sum of every parameter: a draw in another
    order or of another size changes them in the first digits, the kernel path (whose
    uniform_ rounds differently) only in the sixth decimal."""
    flat = torch.cat([p.detach().double().flatten() for p in model.state_dict().values()])
    weights = torch.arange(1, flat.numel() + 1, dtype=torch.float64) / flat.numel()
    return [float(flat.sum()), float((flat**2).sum()), float((flat * weights).sum())]


@pytest.fixture(scope="module")
def prose() -> str:
    return lesson_markdown(NOTEBOOK)


# ---------------------------------------------------------------- the defaults change nothing


def test_the_new_fields_come_after_residual_with_the_old_behaviour_as_default():
    names = [f.name for f in fields(ModelConfig)]
    assert names.index("ff") > names.index("residual") and names.index("bias") > names.index("ff")
    config = ModelConfig(vocab_size=104)
    assert (config.ff, config.bias, config.norm) == ("gelu", True, "layer")


def test_a_default_model_draws_the_same_parameters_as_before():
    # fingerprints of seed 0's models, computed with the code before ff and bias existed;
    # native 337.908452, generic 337.908439, AVX2 337.908452 for the first
    for config, before in (
        (ModelConfig(vocab_size=104), [337.908452, 809.771064, 210.754169]),
        (ModelConfig(vocab_size=104, norm="none", residual=False, d_ff=0),
         [23.352851, 272.706049, 1.722808]),
    ):  # fmt: skip
        course_lib.set_seed(0)
        model = TinyTransformer.from_config(config)
        assert _fingerprint(model) == pytest.approx(before, abs=1e-4)


def test_explicit_defaults_train_bit_for_bit_as_the_implicit_ones():
    ids = corpus.load_split("train")[:64]
    recipe = TrainConfig(steps=3, eval_every=3, batch_size=8, warmup_steps=1)
    trained = []
    for config in (ModelConfig(104), ModelConfig(104, ff="gelu", bias=True)):
        course_lib.set_seed(0)
        model = TinyTransformer.from_config(config)
        train(model, ids, ids[:8], recipe, progress=False)
        trained.append(model)
    a, b = (m.state_dict() for m in trained)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    with torch.no_grad():
        assert torch.equal(trained[0](ids[:2]), trained[1](ids[:2]))


def test_a_card_written_before_the_new_fields_loads_with_them_at_their_defaults():
    card = variants.trained_card("base", 0)
    before = {k: v for k, v in card["config"].items() if k not in ("ff", "bias")}
    model = TinyTransformer.from_config(ModelConfig(**before))
    assert (model.config.ff, model.config.bias) == ("gelu", True)
    assert isinstance(model.blocks[0].ff, nn.Sequential)
    state = torch.load(CHECKPOINT_DIR / f"{card['name']}.pt", weights_only=True)
    model.load_state_dict(state)  # strict: the shipped weights fit the model it describes


def test_stored_runs_from_before_the_new_fields_are_kept():
    table = json.loads(variants.RESULTS.read_text(encoding="utf-8"))
    stored = {k: v for k, v in table["configs"]["base"].items() if k not in ("ff", "bias")}
    assert variants._same_config(stored, variants.BASE)
    assert not variants._same_config(stored, variants.VARIANTS["llama-block"])
    assert not variants._same_config({**stored, "tied_or_other": True}, variants.BASE)


# ---------------------------------------------------------------- the pieces are torch's


def test_norm_rms_is_torchs_rmsnorm_with_layer_norms_eps():
    norm = make_norm("rms", 16)
    assert isinstance(norm, nn.RMSNorm) and norm.eps == 1e-5
    x = torch.randn(3, 5, 16)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
    expected = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * norm.weight
    assert torch.allclose(norm(x), expected, atol=1e-6)


def test_the_swiglu_layer_is_down_of_silu_gate_times_up():
    ff = SwiGLU(8, 12)
    x = torch.randn(2, 3, 8)
    expected = ff.down(F.silu(ff.gate(x)) * ff.up(x))
    assert torch.equal(ff(x), expected)
    assert all(layer.bias is None for layer in (ff.gate, ff.up, ff.down))
    assert sum(p.numel() for p in ff.parameters()) == swiglu_parameters(8, 12) == 3 * 8 * 12


def test_bad_block_arguments_name_the_parameter():
    with pytest.raises(ValueError, match="ff"):
        TransformerBlock(16, 2, 32, ff="relu")
    with pytest.raises(TypeError, match="bias"):
        TransformerBlock(16, 2, 32, bias="no")
    with pytest.raises(ValueError, match="norm"):
        TransformerBlock(16, 2, 32, norm="rmsnorm")


def test_a_bias_free_block_has_no_biases():
    block = TransformerBlock(16, 2, 24, norm="rms", ff="swiglu", bias=False)
    assert [n for n, _ in block.named_parameters() if "bias" in n] == []


# ---------------------------------------------------------------- the counts the lesson prints


def test_174_is_the_swiglu_width_nearest_the_course_blocks_parameters():
    def count(m):
        return sum(p.numel() for p in m.parameters())

    course = count(TransformerBlock(64, 4, 256))
    assert course == 49_984
    assert 2 * 64 * 256 + 256 + 64 == feedforward_parameters(64, 256) == 33_088
    llama = {h: count(TransformerBlock(64, 4, h, norm="rms", ff="swiglu", bias=False))
             for h in range(160, 200)}  # fmt: skip
    assert min(llama, key=lambda h: abs(llama[h] - course)) == 174
    assert llama[174] == 49_920 and variants.LLAMA["d_ff"] == 174
    alone = {h: count(TransformerBlock(64, 4, h, ff="swiglu")) for h in range(160, 200)}
    assert min(alone, key=lambda h: abs(alone[h] - course)) == variants.VARIANTS["swiglu"].d_ff


def test_the_variants_are_one_change_each_from_base():
    base = asdict(variants.BASE)
    for name, changed in (
        ("rms-norm", {"norm"}),
        ("swiglu", {"ff", "d_ff"}),
        ("llama-block", {"norm", "ff", "d_ff", "bias"}),
    ):
        config = asdict(variants.VARIANTS[name])
        assert {k for k in base if base[k] != config[k]} == changed


def test_an_rms_vector_near_5_comes_out_near_0_994():
    g = torch.Generator().manual_seed(5)
    x = 5 + 0.5 * torch.randn(64, generator=g)
    y = F.rms_norm(x, (64,), torch.ones(64), 1e-5)
    assert round(float(y.mean()), 3) == 0.994
    assert round(float(y.pow(2).mean().sqrt()), 3) == 1.0


def test_your_block_is_the_course_llama_style_block():
    mine = notebook_functions("make_causal_mask", "multihead", "rope_heads", "prenorm_block",
                              "rms_norm", "swiglu")  # fmt: skip
    torch.manual_seed(3)
    block = TransformerBlock(32, 4, 88, norm="rms", ff="swiglu", bias=False,
                             rope=RotaryEmbedding(8, max_len=16)).eval()  # fmt: skip
    x = torch.randn(2, 9, 32)
    mask = mine["make_causal_mask"](9)
    attn = partial(mine["multihead"], qkv=block.attn.qkv, out=block.attn.out, num_heads=4,
                   mask=mask, rope=mine["rope_heads"])  # fmt: skip
    ff = partial(mine["swiglu"], gate=block.ff.gate, up=block.ff.up, down=block.ff.down)
    n1 = partial(mine["rms_norm"], weight=block.norm1.weight)
    n2 = partial(mine["rms_norm"], weight=block.norm2.weight)
    with torch.no_grad():
        got = mine["prenorm_block"](x, attn, ff, n1, n2)
        assert torch.allclose(got, block(x, mask), atol=1e-5)


# ---------------------------------------------------------------- the trained rows


@pytest.fixture(scope="module")
def table():
    return json.loads(variants.RESULTS.read_text(encoding="utf-8"))


def _mean(table, name, skill):
    runs = [r for r in table["runs"] if r["variant"] == name]
    assert [r["seed"] for r in runs] == [0, 1, 2]
    return sum(r["valid"][skill] for r in runs) / 3


def test_the_lessons_rows_are_in_the_file(table):
    rows = [r for r in table["rows"] if r["lesson"] == "14"]
    assert [r["name"] for r in rows] == [
        "the Llama-style block at equal parameters",
        "SwiGLU against GELU at equal parameters",
        "RMSNorm against layer norm",
        "SwiGLU on the mark (seen after the runs)",
    ]
    assert table["parameters"]["llama-block"] == 113_216
    assert table["parameters"]["base"] == 113_408
    # the prose: no claim holds
    assert not any(c["holds"] for r in rows for c in r["claims"])


def test_the_prose_says_what_the_rows_show(table, prose):
    means = {n: _mean(table, n, "all") for n in ("base", "rms-norm", "swiglu", "llama-block")}
    said = "0.0089, 0.0067 and 0.0071 nats of excess against 0.0098"
    assert said in prose
    assert said == (f"{means['rms-norm']:.4f}, {means['swiglu']:.4f} and {means['llama-block']:.4f}"
                    f" nats of excess against {means['base']:.4f}")  # fmt: skip
    base = [r["valid"] for r in table["runs"] if r["variant"] == "base"]
    assert f"{min(r['all'] for r in base):.4f} to {max(r['all'] for r in base):.4f}" in prose
    mark = {n: [r["valid"]["mark"] for r in table["runs"] if r["variant"] == n]
            for n in ("base", "swiglu", "llama-block")}  # fmt: skip
    for n, words in (("base", "0.0388 to 0.0545"), ("swiglu", "0.0097 to 0.0164"),
                     ("llama-block", "0.0145 to 0.0214")):  # fmt: skip
        assert f"{min(mark[n]):.4f} to {max(mark[n]):.4f}" == words and words in prose
    assert max(mark["swiglu"]) < min(mark["base"])  # "the seeds do not overlap"
    assert round(max(mark["base"]) - min(mark["base"]), 3) == 0.016
    cpu = [sum(r["cpu_s"] for r in table["runs"] if r["variant"] == n) / 3 for n in means]
    assert {round(c) for c in cpu} <= {31, 32}  # "31 to 32 CPU seconds per run on average"
    objects = [_mean(table, n, "object") for n in means]
    assert "between 0.0015 and 0.0020 nats there" in prose
    assert (f"{min(objects):.4f}", f"{max(objects):.4f}") == ("0.0015", "0.0020")
