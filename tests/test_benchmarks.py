"""A small smoke run of benchmarks/ so `make bench` does not rot (no timing is asserted)."""

import math

import ipywidgets

from benchmarks import attention, explorers
from course_lib.widgets import SoftmaxExplorer


def test_every_explorer_is_found_and_every_control_can_be_moved():
    found = explorers.all_explorers()
    assert SoftmaxExplorer in found
    for cls in found:
        explorer = cls()
        for name, control in explorer.controls.items():
            values = explorers.values_to_visit(control, 5)
            assert len(values) == 5, (cls.__name__, name)
            assert all(a != b for a, b in zip(values, values[1:], strict=False)), (
                cls.__name__,
                name,
            )


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
