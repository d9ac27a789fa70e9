"""Lesson run times: each notebook executed in a fresh kernel, kernel start excluded."""

import subprocess
import time
from pathlib import Path

from tools.run_notebooks import execute

ROOT = Path(__file__).resolve().parents[1]
TARGET_LESSON_S, TARGET_CAPSTONE_S, TARGET_MAKE_TEST_S = 20.0, 90.0, 300.0


def run_time(path: Path) -> float:
    """Seconds to execute every cell of path, measured after the kernel is up."""
    return execute(path)[1]


def target_for(path: Path) -> float:
    return TARGET_CAPSTONE_S if "capstone" in path.name else TARGET_LESSON_S


def measure(paths=None) -> list[dict]:
    rows = []
    for path in paths or sorted((ROOT / "notebooks").glob("*.ipynb")):
        seconds = run_time(path)
        rows.append(
            {
                "notebook": path.name,
                "seconds": seconds,
                "target_s": target_for(path),
                "ok": seconds <= target_for(path),
            }
        )
    return rows


def make_test_time() -> dict:
    """Wall time of the whole `make test` with the .venv already in place."""
    start = time.perf_counter()
    done = subprocess.run(["make", "test"], cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "passed": done.returncode == 0,
        "ok": done.returncode == 0 and seconds <= TARGET_MAKE_TEST_S,
    }
