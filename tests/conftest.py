"""Unit-test setup: a headless matplotlib backend and the same seed before every test."""

import matplotlib
import pytest

import course_lib

matplotlib.use("Agg")


@pytest.fixture(autouse=True)
def seed():
    course_lib.set_seed(0)
