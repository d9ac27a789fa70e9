"""Run the claim tests under every CPU kernel path and show each bar's measured range.

torch picks vectorised kernels by CPU, and different kernels round differently, so a claim
test's threshold must hold on all of them. This runs tests/test_lessonNN.py once per path
(the `measure` fixture in tests/conftest.py logs every measured quantity), then prints, for
each (test, measurement), the min..max seen on each path and overall (over every seed and
parametrisation of the test), with the path that gave the overall min and max, and lists
any test that failed on a path.

    .venv/bin/python -m tools.claim_margins
"""

import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PATHS = {
    "native": {},
    "generic": {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2"},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
}
# every lesson's claim tests: test_lessonNN.py, and test_lessonNN_<stem>.py where two lessons
# share a number (test_lesson05_encoder_decoder.py beside test_lesson05.py)
FILES = sorted(p.relative_to(ROOT).as_posix() for p in ROOT.glob("tests/test_lesson[0-9][0-9]*.py"))
PYTEST = ["-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadfile"]


def run_path(env_extra, log):
    env = {**os.environ, **env_extra, "COURSE_MEASURE_FILE": log}
    for key in ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS"):
        if key not in env_extra:
            env.pop(key, None)  # "native" means torch's own choice, whatever the caller set
    done = subprocess.run(
        [sys.executable, *PYTEST, *FILES], cwd=ROOT, env=env, capture_output=True, text=True
    )
    failed = re.findall(r"^(?:FAILED|ERROR) (\S+)", done.stdout, flags=re.MULTILINE)
    return done.returncode, failed, done.stdout[-2000:]


def fmt(v):
    return f"{v:.4g}" if math.isfinite(v) else str(v)


def main():
    values = {}  # (test, name) -> {path: [values]}
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        for path, env_extra in PATHS.items():
            log = os.path.join(tmp, f"{path}.jsonl")
            start = time.perf_counter()
            rc, failed, tail = run_path(env_extra, log)
            print(f"{path}: pytest rc {rc}, {time.perf_counter() - start:.0f} s", file=sys.stderr)
            if rc != 0:
                problems.append((path, rc, failed, tail))
            if not os.path.exists(log):
                continue
            with open(log) as f:
                for line in f:
                    row = json.loads(line)
                    test = row["test"].removeprefix("tests/").split("[")[0]
                    values.setdefault((test, row["name"]), {}).setdefault(path, []).append(
                        row["value"]
                    )
    header = "".join(f"{p:>22}" for p in PATHS) + f"{'overall':>22}  min at / max at"
    current = None
    for (test, name), by_path in sorted(values.items()):
        if test != current:
            print(f"\n{test}\n  {'':40}{header}")
            current = test
        cells, lows, highs = [], {}, {}
        for path in PATHS:
            seen = by_path.get(path)
            if seen:
                lows[path], highs[path] = min(seen), max(seen)
                cells.append(f"{fmt(lows[path])}..{fmt(highs[path])}")
            else:
                cells.append("-")
        low_path, high_path = min(lows, key=lows.get), max(highs, key=highs.get)
        overall = f"{fmt(lows[low_path])}..{fmt(highs[high_path])}"
        same = len(set(cells)) == 1  # to the 4 digits shown
        where = "same on every path" if same else f"{low_path} / {high_path}"
        print(f"  {name[:40]:40}" + "".join(f"{c:>22}" for c in cells) + f"{overall:>22}  {where}")
    print()
    for path, rc, failed, tail in problems:
        print(f"{path}: pytest returned {rc}; failed: {', '.join(failed) or '(none listed)'}")
        if not failed:
            print(tail)
    if not problems:
        print("every claim test passed on every path")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
