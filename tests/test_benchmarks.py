"""A small smoke run of benchmarks/ so `make bench` does not rot (no timing is asserted)."""

import math

import ipywidgets
import pytest

from benchmarks import attention, explorers, kernels
from course_lib.widgets import SoftmaxExplorer


def test_every_explorer_is_found_and_every_control_can_be_moved(built_explorer):
    found = explorers.all_explorers()
    assert SoftmaxExplorer in found
    for cls in found:
        explorer = built_explorer(cls)
        for name, control in explorer.controls.items():
            values = explorers.values_to_visit(control, 5)
            assert len(values) == 5, (cls.__name__, name)
            assert all(a != b for a, b in zip(values, values[1:], strict=False)), (
                cls.__name__,
                name,
            )


def test_an_int_slider_is_visited_on_its_own_steps():
    """Lesson 12's step slider moves by 50 over 0-600 (13 values) and its explorer has only
    those steps saved: the benchmark must not set 55."""
    slider = ipywidgets.IntSlider(value=600, min=0, max=600, step=50)
    values = explorers.values_to_visit(slider, 24)
    assert set(values) <= set(range(0, 601, 50)) and {0, 600} <= set(values)
    assert len(set(values)) == 12


def test_values_to_visit_covers_each_kind_of_control():
    assert explorers.values_to_visit(ipywidgets.IntSlider(value=1, min=1, max=3), 5) == [
        1,
        2,
        3,
        2,
        1,
    ]
    assert explorers.values_to_visit(ipywidgets.Checkbox(value=True), 3) == [True, False, True]
    assert explorers.values_to_visit(ipywidgets.Dropdown(options=["a", "b"], value="a"), 3) == [
        "a",
        "b",
        "a",
    ]
    log = explorers.values_to_visit(ipywidgets.FloatLogSlider(value=4, base=2, min=0, max=10), 12)
    assert math.isclose(log[0], 1) and math.isclose(log[-1], 1024)


def test_latency_rows_are_well_formed():
    rows = explorers.measure([SoftmaxExplorer], changes=3)
    assert [r["control"] for r in rows] == ["sharpness"]
    assert rows[0]["changes"] == 3 and 0 < rows[0]["median_ms"] <= rows[0]["p95_ms"]


def test_attention_comparison_runs_at_a_tiny_size():
    result = attention.compare(B=1, T=8, D=16, H=2, min_run_time=0.01)
    assert all(result[k] > 0 for k in ("torch_ms", "fused_ms", "scratch_ms"))
    assert math.isfinite(result["fused_ratio"]) and math.isfinite(result["scratch_ratio"])


def test_fitted_exponent_recovers_a_power_law():
    assert math.isclose(kernels.fitted_exponent([1, 2, 4, 8], [3, 12, 48, 192]), 2.0)
    assert math.isclose(kernels.fitted_exponent([256, 4096], [1.0, 1.0]), 0.0, abs_tol=1e-12)


def test_generation_rows_run_at_a_tiny_size():
    result = kernels.generation((8, 16), min_run_time=0.01, max_len=16)
    assert [r["T"] for r in result["rows"]] == [8, 16]
    assert all(
        r["cached_s"] > 0 and r["recomputed_macs"] > r["cached_macs"] for r in result["rows"]
    )
    assert math.isfinite(result["cached_exponent"]) and math.isfinite(result["recomputed_exponent"])


@pytest.mark.slow  # the profiler's first start takes about 1.5 s
def test_attention_kernel_rows_run_at_a_tiny_size():
    rows = kernels.attention_kernels(B=1, H=2, T=16, d=4, tile=4, min_run_time=0.01)
    assert len(rows) == 4 and all(r["forward_ms"] > 0 and r["both_peak_mib"] > 0 for r in rows)


def test_browser_breakdown_splits_one_move_into_its_steps():
    """One move's record, as browser_probe.js leaves it, becomes steps that add up: the
    kernel's dates (UTC, microseconds) are put on the page's clock through its time origin."""
    from datetime import UTC, datetime, timedelta

    from benchmarks import browser_latency

    origin = 1_800_000_000_000.0  # the page's time origin, ms since the epoch
    start = datetime.fromtimestamp(origin / 1000, UTC)

    def date(ms: float) -> str:  # as jupyter_client writes a header date
        return (start + timedelta(milliseconds=ms)).isoformat().replace("+00:00", "Z")

    log = {
        "input": {"t": 100.0, "type": "keydown"},
        "sends": [{"t": 101.5, "id": "m1"}],
        "kernel": [
            {"kind": "busy", "t": 104.0, "date": date(103.0), "parent": "m1", "bytes": 0},
            {"kind": "picture", "t": 125.0, "date": date(120.0), "parent": "m1", "bytes": 30720},
            {"kind": "idle", "t": 126.0, "date": date(121.0), "parent": "m1", "bytes": 0},
        ],
        "srcs": [{"t": 127.0}],
        "paints": [{"index": 0, "t": 140.0}],
    }
    steps = browser_latency.breakdown(log, origin)
    expected = {
        "input_to_send": 1.5,
        "send_to_kernel": 1.5,
        "kernel": 17.0,
        "kernel_to_browser": 5.0,
        "event_to_src": 2.0,
        "src_to_paint": 13.0,
        "total": 40.0,
    }
    assert {k: round(steps[k], 3) for k in expected} == expected
    assert math.isclose(sum(steps[k] for k in expected if k != "total"), steps["total"])
    assert steps["png_bytes"] == 30720
    # a move that only changed the readout: no picture came, so it has no timing
    update = {"kind": "update", "t": 110.0, "date": date(109.0), "parent": "m1", "bytes": 0}
    readout_only = log | {"kernel": [log["kernel"][0], update, log["kernel"][2]], "paints": []}
    assert browser_latency.breakdown(readout_only, origin) is None
    assert browser_latency.changed_readout(readout_only) and not browser_latency.changed_readout(
        log
    )


def test_browser_summary_and_targets():
    from benchmarks import browser_latency

    fast = {"total": 30.0, "png_bytes": 2048} | {k: 1.0 for k, _ in browser_latency.STEPS[:-1]}
    slow = fast | {"total": 120.0}
    rows = [
        {"explorer": "E", "control": "a", "kind": "slider", "moves": 2, "readout_only": 0,
         "no_change": 0, "timings": [fast, fast]},
        {"explorer": "E", "control": "b", "kind": "slider", "moves": 2, "readout_only": 0,
         "no_change": 0, "timings": [fast, slow]},
        {"explorer": "E", "control": "c", "kind": "checkbox", "moves": 2, "readout_only": 0,
         "no_change": 1, "timings": [fast]},
        {"explorer": "E", "control": "d", "kind": "text", "moves": 2, "readout_only": 1,
         "no_change": 0, "timings": [fast]},
    ]  # fmt: skip
    checked = browser_latency.control_rows(rows)
    # worst > 100 ms fails; so does a move that changed nothing, not one that changed a readout
    assert [r["ok"] for r in checked] == [True, False, False, True]
    assert checked[0]["png_kib"] == 2.0 and checked[1]["worst"] == 120.0
    assert browser_latency.step_table(rows)["moves"] == 6


def test_bench_reprints_the_variant_file_with_every_claim():
    # `make bench` rewrites RESULTS.md; the variant table comes from data/variants.json
    import json

    from benchmarks.__main__ import variants_section
    from course_lib import variants

    table = json.loads(variants.RESULTS.read_text(encoding="utf-8"))
    text, *screens = "\n".join(variants_section()).split("\n### A screen at ")
    claims = [c for row in table["rows"] for c in row["claims"]]
    assert text.count(" | yes |") + text.count(" | no |") == len(claims)
    # then each screen kept in benchmarks/screens/, a row per claim it completes
    assert [s.split(" (")[0] for s in screens] == [
        "4,000 steps",
        "learning rate 0.001",
        "learning rate 0.01",
    ]
    # each screen counts the claims it holds against the table's recipe on the same claims
    assert "12 of these 33 claims hold, against 9 with the table's recipe" in screens[0]
    assert "15 of these 40 claims hold, against 16 with the table's recipe" in screens[1]
    # the bare four-layer model diverges at learning rate 0.01, and the screen says so
    assert "Diverged" not in screens[0] + screens[1]
    diverged = ", ".join(f"layers-4-bare seed {s}" for s in (0, 1, 2))
    said = f"Diverged (excess above a uniform guess's 3.62, or not a number): {diverged}."
    assert said in screens[2]
    for name in table["configs"]:
        assert f"| {name} | {table['parameters'][name]:,} |" in text


def test_attention_growth_runs_at_tiny_sizes_and_fits_both_exponents():
    result = attention.growth(lengths=(16, 32), B=1, H=1, d=8, min_run_time=0.01)
    assert [r["T"] for r in result["rows"]] == [16, 32]
    assert all(r["scratch_peak"] > 0 and r["fused_s"] > 0 for r in result["rows"])
    for key in ("scratch_s_exponent", "fused_s_exponent", "scratch_peak_exponent"):
        assert math.isfinite(result[key])
    assert isinstance(result["ok"], bool)


def test_training_measures_lesson_11s_run_at_a_tiny_size():
    from dataclasses import replace

    from benchmarks import training

    assert (training.RECIPE.steps, training.RECIPE.seed) == (600, 0)  # lesson 11b's live run
    tiny = replace(training.RECIPE, steps=4, eval_every=2, warmup_steps=1, batch_size=4)
    result = training.measure(tiny)
    assert result["steps"] == 4 and result["jump_step"] in (2, 4)
    assert 0 < result["jump_s"] <= result["train_s"] and result["excess"] > 1.0
    (line,) = training.report(result)
    assert "4 steps" in line and "Target <= 60 s: met." in line


def test_the_kernel_benchmarks_model_is_the_shipped_base_models_shape():
    from dataclasses import replace

    from course_lib import variants

    model = kernels.random_model(max_len=64)
    assert model.config == replace(variants.BASE, max_len=64)
    assert model.config.vocab_size == 104
