"""Lesson run times: each notebook executed in a fresh kernel, kernel start excluded."""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from tools.lesson_budget import budget
from tools.run_notebooks import execute

ROOT = Path(__file__).resolve().parents[1]
TARGET_MAKE_TEST_S, TARGET_QUICK_S = 300.0, 30.0


def run_time(path: Path) -> float:
    """Seconds to execute every cell of path, measured after the kernel is up."""
    return execute(path)[1]


def measure(paths=None) -> list[dict]:
    rows = []
    for path in paths or sorted((ROOT / "notebooks").glob("*.ipynb")):
        seconds = run_time(path)
        rows.append(
            {
                "notebook": path.name,
                "seconds": seconds,
                "target_s": budget(path.stem),
                "ok": seconds <= budget(path.stem),
            }
        )
    return rows


def make_time(target: str = "test", slowest: int = 8) -> dict:
    """Wall time of `make test` or `make quick` (course.py's `test` or `quick`, which those
    run) with the .venv already in place, with each pytest run's `slowest` longest test phases
    (pytest --durations) and lesson cell times."""
    env = {**os.environ, "PYTEST_ADDOPTS": f"--durations={slowest}"}
    start = time.perf_counter()
    command = [sys.executable, str(ROOT / "course.py"), target]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - start
    limit = TARGET_MAKE_TEST_S if target == "test" else TARGET_QUICK_S
    lines = done.stdout.splitlines()
    return {
        "seconds": seconds,
        "passed": done.returncode == 0,
        "target_s": limit,
        "ok": done.returncode == 0 and seconds <= limit,
        "slowest": [line for line in lines if re.match(r"^\d+\.\d+s (call|setup|teardown) ", line)],
        "summaries": [line for line in lines if re.match(r"^=+ .*(passed|failed).* =+$", line)],
        "lessons": [line for line in lines if line.startswith("lesson cell time:")],
    }
