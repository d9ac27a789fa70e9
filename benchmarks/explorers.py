"""Explorer latency: time from setting a control to the figure redrawn and encoded as PNG."""

import statistics
import time

import ipywidgets

from course_lib.widgets import EXPLORERS

TARGET_MEDIAN_MS, TARGET_P95_MS = 50.0, 100.0


def all_explorers() -> list[type]:
    """Every explorer the course has, in lesson order."""
    return list(EXPLORERS)


def _zigzag(values: list, count: int) -> list:
    """Walk back and forth over values so consecutive entries always differ."""
    if len(values) < 2:
        return []
    cycle = values + values[-2:0:-1]
    return [cycle[i % len(cycle)] for i in range(count)]


def _spread(low, high, count: int) -> list[float]:
    return [low + (high - low) * i / (count - 1) for i in range(count)]


def values_to_visit(control, count: int) -> list:
    """`count` values, consecutive ones different, covering the control's whole range."""
    if hasattr(control, "options"):  # Dropdown, ToggleButtons, SelectionSlider, RadioButtons
        options = [o[1] if isinstance(o, tuple) else o for o in control.options]
        return _zigzag(options, count)
    if isinstance(control, ipywidgets.Checkbox | ipywidgets.ToggleButton):
        return _zigzag([control.value, not control.value], count)
    if isinstance(control, ipywidgets.FloatLogSlider):
        return _zigzag([control.base**e for e in _spread(control.min, control.max, 12)], count)
    if isinstance(control, ipywidgets.IntSlider):
        values = list(range(control.min, control.max + 1, control.step))
        if len(values) > 12:  # 12 of them, on the slider's own steps (a learner cannot set 55
            # on a slider that moves by 50, and an explorer may accept only those)
            values = sorted({values[round(i * (len(values) - 1) / 11)] for i in range(12)})
        return _zigzag(values, count)
    if isinstance(control, ipywidgets.FloatSlider):
        return _zigzag(_spread(control.min, control.max, 12), count)
    if isinstance(control, ipywidgets.Text):
        # free text: the explorer attaches a few sentences to type (lesson 12)
        return _zigzag(list(getattr(control, "sample_values", ())), count)
    raise TypeError(f"control: no way to move a {type(control).__name__}")


def time_control(explorer, name: str, changes: int) -> list[float]:
    """Milliseconds per change: setting the value fires update + redraw + PNG synchronously."""
    control = explorer.controls[name]
    original = control.value
    values = values_to_visit(control, changes + 1)
    if values and values[0] == control.value:
        values = values[1:]
    times = []
    for value in values[:changes]:
        start = time.perf_counter()
        control.value = value
        times.append((time.perf_counter() - start) * 1000)
    control.value = original
    return times


def measure(explorers=None, changes: int = 30) -> list[dict]:
    rows = []
    for cls in explorers or all_explorers():
        explorer = cls()
        for name in explorer.controls:
            times = time_control(explorer, name, changes)
            if not times:
                continue
            ordered = sorted(times)
            p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
            rows.append(
                {
                    "explorer": cls.__name__,
                    "control": name,
                    "changes": len(times),
                    "median_ms": statistics.median(times),
                    "p95_ms": p95,
                    "ok": statistics.median(times) <= TARGET_MEDIAN_MS and p95 <= TARGET_P95_MS,
                }
            )
    return rows
