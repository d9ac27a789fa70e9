"""The tests `make quick` leaves to `make test` by their measured time: tests/slow_tests.txt.

`make quick` runs the tests not marked `slow`. Besides the tests marked in their files (training,
a fresh process, the profiler's first start), tests/conftest.py marks every test listed in
tests/slow_tests.txt, which this module writes from a run's durations:

    .venv/bin/python -m pytest -n 2 -p no:nbval --ignore=tests/browser --ignore=tests/class \
        -m "not slow and not retrains and not explorers" tests --durations=0 > durations.txt
    .venv/bin/python -m tools.slow_tests durations.txt

A test goes on the list when its setup, call and teardown together take THRESHOLD_S or more.
Tests already on the list stay on it (they were not run), unless they no longer exist.
"""

import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIST = ROOT / "tests" / "slow_tests.txt"
THRESHOLD_S = 0.05
HEADER = f"""\
# Tests that `make quick` leaves to `make test`: each took {THRESHOLD_S} s or more (setup, call and
# teardown) in a `make quick` run on a 2-core machine. tests/conftest.py marks them `slow`.
# Written by `python -m tools.slow_tests DURATIONS`; tests/test_slow_tests.py checks that each
# still names a test.
"""
PHASE = re.compile(r"^\s*([0-9.]+)s (?:setup|call|teardown)\s+(\S.*?)\s*$")  # ids may hold spaces


def durations(text: str) -> dict[str, float]:
    """Seconds per test node id, summed over its phases, from pytest's --durations output."""
    total = defaultdict(float)
    for line in text.splitlines():
        match = PHASE.match(line)
        if match:
            total[match.group(2)] += float(match.group(1))
    return dict(total)


def listed(path: Path | None = None) -> list[str]:
    """The node ids on the list (tests/slow_tests.txt unless another path), without its
    comments and blank lines."""
    path = path or LIST
    if not path.exists():
        return []
    lines = (line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def function_of(node_id: str) -> tuple[Path, str]:
    """(file, test function) of a node id such as tests/test_x.py::test_y[case]."""
    file, _, rest = node_id.partition("::")
    return ROOT / file, rest.split("::")[-1].split("[")[0]


def still_there(node_id: str) -> bool:
    """Whether the node id's file still defines its test function."""
    file, function = function_of(node_id)
    return file.exists() and f"def {function}(" in file.read_text(encoding="utf-8")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    measured = durations(Path(argv[0]).read_text(encoding="utf-8"))
    slow = {node for node, seconds in measured.items() if seconds >= THRESHOLD_S}
    kept = {node for node in listed() if node not in measured and still_there(node)}
    LIST.write_text(HEADER + "".join(f"{node}\n" for node in sorted(slow | kept)), encoding="utf-8")
    print(
        f"{LIST.name}: {len(slow | kept)} tests ({len(slow)} measured at "
        f"{THRESHOLD_S} s or more, {len(kept)} kept from the list)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
