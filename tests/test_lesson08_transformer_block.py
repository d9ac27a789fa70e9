"""Lesson 05's claims, each measured: residuals and gradient flow, layer norm vs batch norm.

Bars were measured on seeds 0-4 (more where a test says so) under the native, generic and AVX2
kernel paths (tools/claim_margins.py); each comment gives the worst case seen.
"""

import math

import pytest
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyBboxPatch
from torch import nn

from course_lib import viz
from course_lib.block import make_norm
from course_lib.deep_stack import (
    build_stack,
    run_stack,
    stack_profile,
)
from helpers import stack_inputs as inputs

SEEDS = range(5)


def first_layer_gradient(depth, seed, *, D=16, H=2, B=2, T=8, dtype=torch.float32, **kw):
    x, probe = inputs(seed, B, T, D, dtype)
    stack = build_stack(depth, D, H, 4 * D, seed=seed, dtype=dtype, **kw)
    return stack_profile(stack, x, probe).grad_norms


# ---------------------------------------------------------------- the measuring tools


# ---------------------------------------------------------------- residual connections


@pytest.mark.parametrize("D,H,B,T", [(16, 2, 2, 8), (32, 4, 4, 16)])
def test_depth_24_first_layer_gradient_without_residuals_is_over_10x_smaller(D, H, B, T, measure):
    # pre-norm, layer norm; with / without, worst over seeds 0-4 and the native/generic/AVX2
    # paths: 345 (D=16), 112 (D=32), same on every path
    for seed in SEEDS:
        on = first_layer_gradient(24, seed, D=D, H=H, B=B, T=T)[0]
        off = first_layer_gradient(24, seed, D=D, H=H, B=B, T=T, residual=False)[0]
        ratio = measure(f"with / without residuals, D={D}", on / off)
        assert ratio > 10, (seed, on.item(), off.item())


def test_with_no_norm_at_all_the_collapse_is_far_worse(measure):
    # a float64 stack: over seeds 0-4 and the native/generic/AVX2 paths 6.7e30 .. 5.3e32, same
    # on every path
    for seed in SEEDS:
        on = first_layer_gradient(24, seed, norm="none", dtype=torch.float64)[0]
        off = first_layer_gradient(24, seed, norm="none", residual=False, dtype=torch.float64)[0]
        ratio = measure("float64 with / without residuals", on / off)
        assert ratio > 1e20, (seed, on.item(), off.item())
    # the float32 stack the lesson runs (its norms taken in float64): not zero, but about 1e-30;
    # over seeds 0-4 and the three paths 2.1e-31 .. 4.1e-30, same on every path (a norm taken
    # in float32 gives exactly 0 here: every square underflows)
    for seed in SEEDS:
        off = first_layer_gradient(24, seed, norm="none", residual=False)[0]
        assert 0 < measure("float32 stack, no norm, no residuals", off) < 1e-25, seed
    x, probe = inputs(0)
    hidden = run_stack(build_stack(24, 16, 2, 64, norm="none", residual=False), x)
    grad = torch.autograd.grad((hidden[-1] * probe).sum(), hidden[0])[0]  # (B, T, D), float32
    assert grad.norm() == 0 and (grad != 0).all()  # why gradient_reaching works in float64


@pytest.mark.parametrize("norm", ["layer", "none"])
@pytest.mark.parametrize("prenorm", [True, False])
def test_without_residuals_first_layer_gradient_is_off_by_orders_of_magnitude(
    norm, prenorm, measure
):
    # it vanishes: log10(with / without), worst over seeds 0-7 and the native/generic/AVX2
    # paths, same on every path: layer norm 2.54 (pre-norm), 1.39 (post-norm); no norm 31.1
    # (its gradient without residuals is about 1e-30; batch norm: the next test)
    place = "pre" if prenorm else "post"
    for seed in range(8):
        on = first_layer_gradient(24, seed, norm=norm, prenorm=prenorm)[0].item()
        off = first_layer_gradient(24, seed, norm=norm, prenorm=prenorm, residual=False)[0].item()
        gap = math.log10(on / off)
        assert measure(f"log10(with / without), {norm} {place}-norm", gap) > 1, (seed, on, off)


@pytest.mark.parametrize("prenorm", [True, False])
def test_without_residuals_batch_norm_first_layer_gradient_is_out_of_control(prenorm, measure):
    """With batch norm and no residuals the first-layer gradient neither reliably vanishes nor
    explodes: from seed to seed it lands anywhere over many decades (some seeds below 1e-20)
    and differs from CPU to CPU, while with residuals it barely moves."""
    place = "pre" if prenorm else "post"
    on, off = [], []
    for seed in range(8):
        on.append(first_layer_gradient(24, seed, norm="batch", prenorm=prenorm)[0].item())
        grad = first_layer_gradient(24, seed, norm="batch", prenorm=prenorm, residual=False)[0]
        off.append(grad.item())
    # seeds 0-7 on the native/generic/AVX2 paths. Without residuals, log10 of the gradient
    # differs by path, except for two seeds, below 1e-20 on every path: pre-norm 1 and 4 (8.3e-36
    # and 9.8e-23), post-norm 2 and 4 (2.2e-23 and 8.7e-23 at most). The span, smallest: pre-norm
    # 39.0 decades (generic), post-norm 22.6 (AVX2), up to 40.5 (pre-norm native). With
    # residuals: max / min 2.01 (pre-norm), 1.59 (post-norm), same on every path.
    decades = [math.log10(g) for g in off]
    span = measure(f"no-residual decades, {place}-norm", max(decades) - min(decades))
    assert span > 15, off
    assert measure(f"no-residual smallest, {place}-norm", min(off)) < 1e-20, off
    assert measure(f"with residuals: max / min, {place}-norm", max(on) / min(on)) < 3, on


def test_the_collapse_deepens_with_depth(measure):
    # it holds up for the first few blocks, then falls by orders of magnitude (no residuals,
    # pre-norm layer norm); seed 0: depth 4 -> 1.0, 16 -> 3.1e-3, 48 -> 2.7e-7. Worst over
    # seeds 0-4 and the native/generic/AVX2 paths, same on every path: depth 4 / depth 16
    # 2.56 (seed 4: the first blocks hold up there), depth 16 / depth 48 4670
    for seed in SEEDS:
        g4, g16, g48 = (first_layer_gradient(d, seed, residual=False)[0] for d in (4, 16, 48))
        assert measure("depth 4 / depth 16", g4 / g16) > 1, (seed, g4.item(), g16.item())
        assert measure("depth 16 / depth 48", g16 / g48) > 1000, (seed, g16.item(), g48.item())


@pytest.mark.parametrize("norm", ["layer", "batch"])
@pytest.mark.parametrize("prenorm", [True, False])
def test_with_residuals_every_layer_of_48_gets_a_similar_gradient(norm, prenorm, measure):
    # max / min over the 48 layers, worst over seeds 0-4 and the native/generic/AVX2 paths,
    # same on every path: 2.54 (pre-norm layer norm), 2.51 (pre-norm batch norm), 1.89
    # (post-norm batch norm); post-norm layer norm is less even, its gradient dipping
    # mid-stack and peaking at the top layers: 9.73 (seed 4), so its bar is 20, not 5
    bar = 20 if (norm, prenorm) == ("layer", False) else 5
    place = "pre" if prenorm else "post"
    for seed in SEEDS:
        grads = first_layer_gradient(48, seed, norm=norm, prenorm=prenorm)
        spread = measure(f"max / min over 48 layers, {norm} {place}", grads.max() / grads.min())
        assert spread < bar, (seed, grads.max().item(), grads.min().item())


def test_postnorm_layer_norm_pins_the_activation_scale_prenorm_lets_it_grow(measure):
    for seed in SEEDS:
        x, probe = inputs(seed)
        post = stack_profile(build_stack(48, 16, 2, 64, prenorm=False, seed=seed), x, probe)
        pre = stack_profile(build_stack(48, 16, 2, 64, seed=seed), x, probe).act_scales
        torch.testing.assert_close(post.act_scales, torch.ones(48), atol=1e-4, rtol=0)
        # worst over seeds 0-4 and the native/generic/AVX2 paths: 2.58, same on every path (at
        # depth 24 it was only 1.71 .. 2.02 over seeds 0-7, native)
        assert measure("pre-norm scale layer 48 / layer 1", pre[-1] / pre[0]) > 2


# ---------------------------------------------------------------- layer norm vs batch norm


def skewed_batch(seed=2, shape=(4, 6, 8)):
    g = torch.Generator().manual_seed(seed)
    D = shape[-1]
    offsets, scales = torch.randn(D, generator=g) * 3, torch.rand(D, generator=g) * 4 + 0.5
    return torch.randn(*shape, generator=g) * scales + offsets


def test_layer_norm_standardises_tokens_batch_norm_standardises_features(measure):
    for seed in SEEDS:  # seed 2 is the notebook's batch
        x = skewed_batch(seed)
        ln = make_norm("layer", 8)(x).reshape(-1, 8)  # (B*T, D)
        bn = make_norm("batch", 8)(x).reshape(-1, 8)
        reference = nn.functional.layer_norm(x, (8,)).reshape(-1, 8)
        torch.testing.assert_close(ln, reference)
        # worst over seeds 0-4 and the native/generic/AVX2 paths: 1.1e-7 and 4.8e-7 (native)
        assert measure("layer norm: largest token mean", ln.mean(dim=1).abs().max()) < 1e-5
        assert measure("batch norm: largest feature mean", bn.mean(dim=0).abs().max()) < 1e-5
        # seed 2: layer norm's largest feature mean 1.16, batch norm's largest token mean 0.64;
        # worst over seeds 0-4 and the three paths: 1.16 and 0.57, same on every path
        assert measure("layer norm: largest feature mean", ln.mean(dim=0).abs().max()) > 0.5
        assert measure("batch norm: largest token mean", bn.mean(dim=1).abs().max()) > 0.3
        std = bn.std(dim=0, unbiased=False)
        torch.testing.assert_close(std, torch.ones(8), atol=1e-3, rtol=0)


def trained_blocks(seed=3):
    ln_block, bn_block = (
        build_stack(1, 16, 2, 64, norm=n, seed=seed)[0] for n in ("layer", "batch")
    )
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for _ in range(20):
            bn_block(torch.randn(8, 10, 16, generator=g))
    return ln_block, bn_block, torch.randn(8, 10, 16, generator=g)


@pytest.mark.parametrize("seed", [3, 4, 5])
def test_batch_of_one_layer_norm_matches_batch_norm_does_not(seed, measure):
    ln_block, bn_block, crowd = trained_blocks(seed)
    one = crowd[:1]
    with torch.no_grad():
        ln_alone, ln_crowd = ln_block.train()(one), ln_block(crowd)[:1]
        ln_eval = ln_block.eval()(one)
        bn_alone, bn_crowd = bn_block.train()(one), bn_block(crowd)[:1]
        bn_eval = bn_block.eval()(one)
    # seed 3 (the notebook's): batch norm 0.48 and 0.57; worst over seeds 3-5 and the
    # native/generic/AVX2 paths: layer norm exactly 0 (the bar allows rounding) and batch norm
    # 0.185 and 0.178 (seed 4), same on every path
    assert measure("layer norm: alone vs in a crowd", (ln_alone - ln_crowd).abs().max()) < 1e-6
    assert torch.equal(ln_alone, ln_eval)
    assert measure("batch norm: alone vs in a crowd", (bn_alone - bn_crowd).abs().max()) > 0.1
    assert measure("batch norm: train vs eval", (bn_alone - bn_eval).abs().max()) > 0.1


@pytest.mark.parametrize("seed", range(5, 10))
def test_padding_moves_batch_norm_statistics_not_layer_norm(seed, measure):
    real = skewed_batch(seed, (4, 5, 8))  # (B, 5, D): real tokens only

    def real_outputs(norm, length):
        padded = torch.zeros(4, length, 8)  # (B, T, D), zero padding
        padded[:, :5] = real
        with torch.no_grad():
            return norm(padded)[:, :5]

    ln, bn = make_norm("layer", 8), make_norm("batch", 8)
    assert torch.equal(real_outputs(ln, 6), real_outputs(ln, 12))
    torch.testing.assert_close(real_outputs(ln, 6), nn.LayerNorm(8)(real).detach())
    moved = (real_outputs(bn, 6) - real_outputs(bn, 12)).abs().max()
    # worst over seeds 5-9 and the native/generic/AVX2 paths: 1.07, same on every path
    assert measure("batch norm: padding 6 vs 12", moved) > 0.3


# ---------------------------------------------------------------- pictures


@pytest.mark.parametrize("prenorm", [True, False])
def test_block_diagram_draws_the_parts_in_order(prenorm):
    fig = viz.block_diagram(prenorm=prenorm)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    words = [
        t.get_text()
        for t in sorted(ax.texts, key=lambda t: t.get_position()[0])
        if t.get_text() in {"LayerNorm", "+", "x", "out"}
        or "attention" in t.get_text()
        or "feed-forward" in t.get_text()
    ]
    words = ["attn" if "attention" in w else "ff" if "feed" in w else w for w in words]
    expected = (
        ["x", "LayerNorm", "attn", "+", "LayerNorm", "ff", "+", "out"]
        if prenorm
        else ["x", "attn", "+", "LayerNorm", "ff", "+", "LayerNorm", "out"]
    )
    assert words == expected
    assert sum(isinstance(p, FancyBboxPatch) for p in ax.patches) == 4
    assert sum(isinstance(p, Circle) for p in ax.patches) == 2
    red = [
        a
        for a in ax.texts
        if getattr(a, "arrow_patch", None) is not None
        and a.arrow_patch.get_edgecolor()[:3] == pytest.approx((0.839, 0.153, 0.157), abs=1e-2)
    ]
    assert len(red) == 2  # one residual arrow around each sub-layer
    # each residual path splits off an arrow between two parts, never out of a box, and the
    # second one carries what the first sub-layer outputs: after its "+" (pre-norm) or after
    # its LayerNorm (post-norm)
    edges = sorted(
        (p.get_x(), p.get_x() + p.get_width()) if isinstance(p, FancyBboxPatch)
        else (p.center[0] - p.radius, p.center[0] + p.radius)
        for p in ax.patches
    )  # fmt: skip
    splits = sorted(line.get_xdata()[0] for line in ax.lines if len(line.get_xdata()) == 3)
    assert len(splits) == 2
    assert splits[0] < edges[0][0]  # the first copies x itself
    first_output = edges[2]  # the third part drawn: "+" (pre-norm) or LayerNorm (post-norm)
    assert first_output[1] < splits[1] < edges[3][0]
    assert len(viz.block_diagram(residual=False).axes[0].texts) < len(ax.texts)
    assert viz.to_png(fig).startswith(b"\x89PNG")


def test_pin_to_limits_and_depth_figure():
    clipped, below, above = viz.pin_to_limits([0.0, 1e-20, 1.0, 1e9], (1e-10, 1e5))
    assert clipped == [1e-10, 1e-10, 1.0, 1e5]
    assert below == [True, True, False, False] and above == [False, False, False, True]
    fig = viz.depth_profile_figure({"a": ([1.0, 0.0, 2.0], [1.0, 1.0, 1.0])})
    ax_grad, ax_scale = fig.axes
    assert ax_grad.get_ylim() == pytest.approx(viz.GRAD_LIMITS)
    assert ax_scale.get_ylim() == pytest.approx(viz.SCALE_LIMITS)
    pinned = [line for line in ax_grad.lines if line.get_marker() == "v"]
    assert list(pinned[0].get_xdata()) == [2]
    with pytest.raises(ValueError, match="curves: expected at least one"):
        viz.depth_profile_figure({})


# ---------------------------------------------------------------- the feed-forward layer


@pytest.fixture(scope="module")
def trained():
    from course_lib import data
    from course_lib.model import load_pretrained

    return load_pretrained("rope-h4"), data.load_split("valid")


def loss_without_feedforward_by_hand(model, ids, removed):
    """The overall loss written out block by block, the feed-forward of `removed` left out."""
    from course_lib.attention import causal_mask

    with torch.no_grad():
        x = model.embed(ids[:, :-1])  # (N, T, D); rope-h4 adds no positions to the embeddings
        mask = causal_mask(ids.shape[1] - 1)
        for layer, block in enumerate(model.blocks):
            x = x + block.attn(block.norm1(x), mask)
            if layer != removed:
                x = x + block.ff(block.norm2(x))
        logits = model.head(model.norm(x))  # (N, T, V)
        return torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids[:, 1:]).item()


@pytest.mark.parametrize("layer", [0, 1])
def test_without_feedforward_is_the_block_with_its_ff_left_out(trained, layer):
    from course_lib.ablation import skill_losses, without_feedforward

    model, valid = trained
    before = skill_losses(model, valid)["overall"]
    with without_feedforward(model, layer):
        removed = skill_losses(model, valid)["overall"]
    assert removed == pytest.approx(loss_without_feedforward_by_hand(model, valid, layer), abs=1e-5)
    assert skill_losses(model, valid)["overall"] == before  # the model is given back unchanged


def test_removing_block_0s_feed_forward_breaks_every_skill(trained, measure):
    from course_lib.ablation import ALL_SKILLS, skill_losses, without_feedforward

    model, valid = trained
    base = skill_losses(model, valid, skills=ALL_SKILLS)
    with without_feedforward(model, 0):
        removed = skill_losses(model, valid, skills=ALL_SKILLS)
    for skill in ALL_SKILLS:
        # one shipped checkpoint, so no seeds: measured 2.12 (agreement) .. 3.77 (song), the
        # same to 5 digits on the native (AVX-512), generic and AVX2 paths: margin 0.62
        assert measure(f"block 0 FF removed: {skill} rise", removed[skill] - base[skill]) > 1.5


def test_removing_block_1s_feed_forward_hurts_agreement_and_the_song_not_brackets(trained, measure):
    from course_lib.ablation import ALL_SKILLS, skill_losses, without_feedforward

    model, valid = trained
    base = skill_losses(model, valid, skills=ALL_SKILLS)
    with without_feedforward(model, 1):
        removed = skill_losses(model, valid, skills=ALL_SKILLS)
    rise = {skill: measure(f"block 1 FF removed: {skill} rise", removed[skill] - base[skill])
            for skill in ALL_SKILLS}  # fmt: skip
    # measured, the same to 5 digits on the native, generic and AVX2 paths: overall 0.188,
    # agreement 0.268, song 0.588, brackets -0.052; margins 0.088, 0.118, 0.188, 0.042
    assert rise["overall"] > 0.1 and rise["agreement"] > 0.15 and rise["song"] > 0.4
    assert rise["brackets"] < -0.01


# ---------------------------------------------------------------- the width sweep (shipped JSON)


def test_the_width_sweep_is_complete_and_its_4d_run_is_the_shipped_model():
    from dataclasses import asdict

    from course_lib.feedforward import feedforward_parameters
    from course_lib.ffn_width import SEEDS, WIDTHS, load_results
    from course_lib.model import load_card
    from course_lib.train import RECIPES

    results = load_results()
    model_config, train_config = RECIPES["rope-h4"]
    # ModelConfig fields added after the sweep ran (e.g. residual) count at their defaults
    model = {**asdict(model_config), **results["model"]}
    assert model == asdict(model_config) | {"d_ff": model["d_ff"]}
    assert set(asdict(model_config)) - set(results["model"]) <= {
        "d_ff",
        "residual",
        "tied",
        "ff",
        "bias",
        "num_kv_heads",
    }
    assert results["train"] == {k: v for k, v in asdict(train_config).items() if k != "seed"}
    assert results["widths"] == list(WIDTHS) and results["seeds"] == list(SEEDS)
    runs = {(r["d_ff"], r["seed"]): r for r in results["runs"]}
    assert set(runs) == {(w, s) for w in WIDTHS for s in SEEDS}
    card = load_card("rope-h4")
    for (width, _), record in runs.items():
        assert record["cpu_time_s"] < 60 and record["val_step"][-1] == train_config.steps
        # parameters counted independently: the 4D model's, minus what the narrower FF lacks
        ff_change = feedforward_parameters(64, 256) - (
            feedforward_parameters(64, width) if width else 0
        )
        assert record["parameters"] == card["parameters"] - model_config.num_layers * ff_change
    # same recipe, same seed: the sweep's 4D seed-0 run retrains the shipped checkpoint
    assert runs[256, 0]["final_val_loss"] == pytest.approx(card["val_loss"], abs=5e-4)


@pytest.mark.retrains  # trains 100 steps; the sweep file itself is what lesson 05 shows
def test_the_sweep_comes_from_its_code_the_first_100_steps_retrained(measure):
    """A cheap proxy for rerunning the sweep (18 runs, minutes): the first 100 steps are the
    warm-up, the same in a 100-step run as in a 1000-step one, so retraining them must land on
    the sweep's step-100 validation loss, here for the narrowest and the attention-only model."""
    from dataclasses import replace

    from course_lib import data
    from course_lib.ffn_width import build_model, load_results
    from course_lib.train import RECIPES, train

    runs = {(r["d_ff"], r["seed"]): r for r in load_results()["runs"]}
    train_ids, valid_ids = data.load_split("train"), data.load_split("valid")
    for width in (0, 16):
        config = replace(RECIPES["rope-h4"][1], steps=100, eval_every=100, seed=1)
        history = train(build_model(width, 1), train_ids, valid_ids, config, progress=False)
        gap = abs(history.val_loss[-1] - runs[width, 1]["val_loss"][0])
        # the JSON keeps 4 decimals (rounding up to 5e-5); measured 3.5e-5 (d_ff 0) and 1.6e-5
        # (d_ff 16), the same on the native, generic and AVX2 paths and on one thread
        assert measure(f"d_ff {width}: step-100 loss vs the sweep", gap) < 1e-4


def test_the_width_sweep_says_what_lesson_05_says():
    """What the lesson reads off data/ffn-width.json. These are the shipped runs (native path,
    3 seeds each); retraining all 18 under every kernel path takes too long for a test, so the
    test above retrains their first 100 steps on each path instead, as a proxy."""
    from statistics import mean

    from course_lib.ffn_width import final_losses, load_results, mean_curves

    results = load_results()
    curves, losses = mean_curves(results), final_losses(results)
    at_200 = {w: loss[steps.index(200)] for w, (steps, loss) in curves.items()}
    # early, width helps: d_ff >= 2D at 1.383..1.396 by step 200, d_ff <= D/4 at 1.463..1.472
    assert min(at_200[0], at_200[16]) - max(at_200[w] for w in (128, 256, 512)) > 0.05  # 0.067
    # at the end it does not: width means 1.2927..1.3006, within 0.0079; seeds of one width
    # spread up to 0.0058
    means = [mean(v) for v in losses.values()]
    assert max(means) - min(means) < 0.01
    assert max(max(v) - min(v) for v in losses.values()) > 0.004
    # every 8D run ends above every narrower run: 1.2997 against 1.2982 (a 0.0015 gap)
    assert min(losses[512]) > max(x for w, v in losses.items() if w < 512 for x in v)
