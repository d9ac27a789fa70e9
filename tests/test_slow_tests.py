"""tests/slow_tests.txt, the tests `make quick` leaves to `make test` by their measured time."""

import subprocess
import sys

import pytest

from tools import slow_tests

pytestmark = pytest.mark.path_independent

DURATIONS = """\
============================= slowest durations ==============================
1.62s call     tests/test_a.py::test_forming
0.05s setup    tests/test_a.py::test_forming
0.42s call     tests/test_b.py::test_table[window 29 + 3 sinks, cache positions]
0.06s call     tests/test_b.py::test_quick
0.04s teardown tests/test_b.py::test_quick

(600 durations < 0.005s hidden.  Use -vv to show these durations.)
"""


def test_durations_sum_the_phases_of_each_test_and_keep_ids_with_spaces():
    assert slow_tests.durations(DURATIONS) == pytest.approx(
        {
            "tests/test_a.py::test_forming": 1.67,
            "tests/test_b.py::test_table[window 29 + 3 sinks, cache positions]": 0.42,
            "tests/test_b.py::test_quick": 0.10,
        }
    )


def test_every_listed_test_still_exists():
    gone = [node for node in slow_tests.listed() if not slow_tests.still_there(node)]
    assert slow_tests.listed(), "tests/slow_tests.txt lists no test"
    assert not gone, f"tests/slow_tests.txt names tests that no longer exist: {gone}"


def test_a_renamed_test_is_not_still_there():
    here = "tests/test_slow_tests.py::"
    assert slow_tests.still_there(here + "test_a_renamed_test_is_not_still_there")
    assert not slow_tests.still_there(here + "test_that_was_renamed[1]")
    assert not slow_tests.still_there("tests/test_no_such_file.py::test_x")


@pytest.mark.slow  # a fresh pytest process collects a test file
def test_make_quick_does_not_collect_a_listed_test():
    node = next(n for n in slow_tests.listed() if n.startswith("tests/test_ablation.py::"))
    file = node.split("::")[0]
    collected, everything = (
        subprocess.run(
            [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:nbval", *only, file],
            capture_output=True,
            text=True,
            cwd=slow_tests.ROOT,
            check=False,
        )
        for only in (["-m", "not slow"], [])
    )
    assert node in everything.stdout, everything.stdout + everything.stderr
    assert node not in collected.stdout


def test_writing_the_list_keeps_unmeasured_tests_that_still_exist(tmp_path, monkeypatch):
    here = "tests/test_slow_tests.py::"
    listed = tmp_path / "slow_tests.txt"
    listed.write_text(
        "# a comment\n"
        f"{here}test_a_renamed_test_is_not_still_there\n"  # not measured (deselected): kept
        f"{here}test_that_was_renamed\n"  # gone: dropped
        "tests/test_b.py::test_quick\n",  # measured under the threshold: dropped
        encoding="utf-8",
    )
    durations = tmp_path / "durations.txt"
    durations.write_text(
        "1.62s call     tests/test_a.py::test_forming\n"
        "0.42s call     tests/test_b.py::test_table[window 29 + 3 sinks, cache positions]\n"
        "0.03s call     tests/test_b.py::test_quick\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(slow_tests, "LIST", listed)
    assert slow_tests.main([str(durations)]) == 0
    assert slow_tests.listed(listed) == [
        "tests/test_a.py::test_forming",
        "tests/test_b.py::test_table[window 29 + 3 sinks, cache positions]",
        f"{here}test_a_renamed_test_is_not_still_there",
    ]
    assert slow_tests.main([]) == 2  # no durations file: the usage, and nothing written
