"""Unit-test setup: a headless matplotlib backend and the same seed before every test."""

import matplotlib
import pytest

import course_lib
from course_lib.attention import one_thread

matplotlib.use("Agg")


@pytest.fixture(autouse=True)
def seed():
    course_lib.set_seed(0)


@pytest.fixture(autouse=True)
def single_thread():
    # the tests' tensors are tiny: a second torch thread only adds spin-waiting, up to ten
    # times slower on a busy 2-core machine
    with one_thread():
        yield
