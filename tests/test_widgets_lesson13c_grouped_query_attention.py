"""KVCostExplorer (lesson 13c): its numbers are the counts, its weights the modules' own, and
the lesson's "things to try" hold."""

import pytest

from course_lib.gqa import GroupedQueryAttention, kv_cache_bytes
from course_lib.kv_cache import token_costs
from course_lib.model import TinyTransformer
from course_lib.widgets import KVCostExplorer
from helpers import picture


@pytest.fixture(scope="module")
def explorer():
    return KVCostExplorer()


def test_it_builds_with_no_arguments_and_starts_at_the_base_models_width(explorer):
    assert explorer.values() == {"T": 128, "D": 64, "kv": 4}
    assert explorer.state()["readout"].startswith("T = 128, D = 64, 4 key/value heads: ")
    assert repr(explorer) == "KVCostExplorer(controls: T, D, kv)"


@pytest.mark.parametrize("D", KVCostExplorer.WIDTHS[:2])
@pytest.mark.parametrize("kv", KVCostExplorer.KV_HEADS)
def test_the_weights_are_the_modules_own_count(explorer, D, kv):
    model = TinyTransformer(explorer.VOCAB, D, 4, 4 * D, 2, 8)
    for block in model.blocks:
        block.attn = GroupedQueryAttention(D, 4, kv)
    assert explorer.weight_count(D, kv) == sum(p.numel() for p in model.parameters())


def test_every_setting_shows_the_counts(explorer):
    start = explorer.values()
    for D in explorer.WIDTHS:
        for kv in explorer.KV_HEADS:
            for T in (16, 1024, 8192):
                explorer.controls["T"].value = T
                explorer.controls["D"].value = D
                explorer.controls["kv"].value = kv
                costs = explorer.state()["costs"]
                config = explorer.config(D)
                assert (
                    costs["cached"]
                    == token_costs(config, T, cached=True, num_kv_heads=kv)["multiply_adds"]
                )
                assert costs["recomputed"] == T * costs["cached"]
                assert costs["cache_bytes"] == kv_cache_bytes(2, kv, T, D // 4)
                # the projections alone: the cached count less 2 L D per key, T keys
                assert costs["projections"] == costs["cached"] - 2 * 2 * D * T
                readout = explorer.state()["readout"]
                assert f"{costs['cached']:,} multiply-adds cached" in readout
                assert f"{costs['recomputed']:,} recomputed ({T} times as many)" in readout
    for name, value in start.items():
        explorer.controls[name].value = value


def _first(explorer, D, kv, when):
    return next(T for T in range(1, 100_000) if when(explorer.costs(T, D, kv)))


def test_things_to_try_both_lengths_move_right_about_in_proportion_to_the_width(explorer):
    """Attention passes the projections past T = 6D + V / (2L) (2 T D against 12 D^2 per layer,
    the head's V D on top), and the cache (16 D T bytes) passes the weights (about 96 D^2 bytes,
    the embedding and the head 8 V D more) a little later."""
    attention = {
        D: _first(explorer, D, 4, lambda c: c["cached"] > 2 * c["projections"])
        for D in explorer.WIDTHS
    }
    cache = {
        D: _first(explorer, D, 4, lambda c: c["cache_bytes"] > c["weight_bytes"])
        for D in explorer.WIDTHS
    }
    assert 256 < attention[64] < 512 and 256 < cache[64] < 512  # between two slider settings
    V, L = explorer.VOCAB, explorer.LAYERS
    for D in explorer.WIDTHS:
        assert attention[D] == 6 * D + V // (2 * L) + 1
        assert cache[D] == 4 * explorer.weight_count(D, 4) // (16 * D) + 1
    for lengths in (attention, cache):  # 16 times the width: 14 to 15 times the length
        assert 0.85 < lengths[1024] / lengths[64] / 16 < 1


def test_things_to_try_one_kv_head_shrinks_the_cache_four_times_not_the_work(explorer):
    for D in explorer.WIDTHS:
        for T in explorer.CONTEXTS:
            one, four = explorer.costs(T, D, 1), explorer.costs(T, D, 4)
            assert four["cache_bytes"] == 4 * one["cache_bytes"]
            assert 0.85 < one["cached"] / four["cached"] < 1  # the projections shrink a little


def test_the_picture_changes_with_each_control(explorer):
    before = picture(explorer)
    for name, value in (("T", 1024), ("D", 256), ("kv", 1)):
        start = explorer.controls[name].value
        explorer.controls[name].value = value
        assert picture(explorer) != before
        explorer.controls[name].value = start
    assert picture(explorer) == before


def test_every_line_sits_inside_its_axes_at_every_setting(explorer):
    """The y range follows the width: at each setting every point of every line is inside it."""
    start = explorer.values()
    for D in explorer.WIDTHS:
        for kv in explorer.KV_HEADS:
            explorer.controls["D"].value = D
            explorer.controls["kv"].value = kv
            for ax in (explorer.ax_work, explorer.ax_bytes):
                low, high = ax.get_ylim()
                for line in ax.lines:
                    if line in explorer.marks:
                        continue
                    assert all(low < y < high for y in line.get_ydata()), (D, kv, line.get_label())
    for name, value in start.items():
        explorer.controls[name].value = value


def test_the_chosen_t_line_is_in_the_legend(explorer):
    for ax in (explorer.ax_work, explorer.ax_bytes):
        assert "the chosen T" in [t.get_text() for t in ax.get_legend().get_texts()]


def test_the_picture_names_its_setting(explorer):
    """A picture shown alone (a static page, a PNG) says which setting it is."""
    start = explorer.values()
    explorer.controls["T"].value = 1024
    explorer.controls["kv"].value = 1
    title = explorer.setting_title.get_text()
    assert title.startswith("T = 1024 (dashed), D = 64, 1 key/value heads")
    for name, value in start.items():
        explorer.controls[name].value = value


def test_things_to_try_at_8192_attention_does_most_of_the_work_and_one_kv_head_saves_little(
    explorer,
):
    four, one = explorer.costs(8192, 64, 4), explorer.costs(8192, 64, 1)
    assert 1 - four["projections"] / four["cached"] > 0.9  # attention: most of the work
    assert 0.99 < one["cached"] / four["cached"] < 1  # 1 key/value head saves under 1%
    assert four["cache_bytes"] == 4 * one["cache_bytes"]
