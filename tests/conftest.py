"""Unit-test setup: a headless matplotlib backend and the same seed before every test."""

import json
import os

import matplotlib
import pytest

import course_lib
from course_lib.runtime import one_thread
from tools.slow_tests import listed

matplotlib.use("Agg")

MEASURED_SLOW = frozenset(listed())  # tests/slow_tests.txt: see tools/slow_tests.py


def pytest_collection_modifyitems(config, items):
    # The explorers' tests build and redraw explorers (a PNG per change): a third of the unit
    # tests' time. `make quick` leaves them to `make test`, which runs them all.
    for item in items:
        uses = getattr(item, "fixturenames", ())  # a notebook cell (nbval) has none
        if item.path.name.startswith("test_widgets") or "built_explorer" in uses:
            item.add_marker(pytest.mark.explorers)
        # Tests measured at 0.05 s or more: `make quick` leaves them to `make test` too.
        if item.nodeid in MEASURED_SLOW:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def seed():
    course_lib.set_seed(0)


@pytest.fixture(autouse=True)
def single_thread():
    # the tests' tensors are tiny: a second torch thread only adds spin-waiting, up to ten
    # times slower on a busy 2-core machine
    with one_thread():
        yield


@pytest.fixture
def measure(request):
    """measure(name, value) -> value; with COURSE_MEASURE_FILE set, also logs it (one JSON line).

    tools/claim_margins.py reads the log to show each claim test's bar against what was measured.
    """
    path = os.environ.get("COURSE_MEASURE_FILE")

    def record(name, value):
        if path:
            line = json.dumps({"test": request.node.nodeid, "name": name, "value": float(value)})
            with open(path, "a") as f:
                f.write(line + "\n")
        return value

    return record


@pytest.fixture(scope="session")
def built_explorer():
    """built_explorer(cls): one explorer of that kind, built with no arguments as a lesson
    builds it, shared by every test that reads it (building all of them takes seconds). A test
    that moves a control puts it back before it ends."""
    built = {}

    def get(cls):
        if cls not in built:
            built[cls] = cls()
        return built[cls]

    return get
