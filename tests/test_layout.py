"""The code's layout: modules small enough to read, and each shared mechanism defined once.

A copy of a mechanism drifts from the original without anyone noticing (a schedule changed
in one place, a stub text in another), so each mechanism the course shares has exactly one
definition in the tree, and this test fails when a second one appears.
"""

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.path_independent

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 500
SOURCES = sorted(
    p
    for folder in ("course_lib", "course_server", "tests", "tools", "benchmarks", "deploy")
    for p in (ROOT / folder).rglob("*.py")
)

# mechanism -> the regular expression of its definition (matched line by line)
ONE_DEFINITION = {
    "restoring the thread count": r"^\s*def one_thread\(",
    "eval mode, restored afterwards": r"^\s*def evaluating\(",
    "the eval-mode save by hand": r"^\s*was_training = ",
    "one optimizer step of training": r"^\s*def train_step\(",
    "the training batches": r"^\s*def batches\(",
    "q, k and v per head": r"^\s*def qkv_heads\(",
    "a JupyterLab menu item": r"^\s*def click_menu\(",
    "Run All Cells, clicked again if lost": r"^\s*def (start_)?run_all\(",
    "a free port": r"^\s*def free_port\(",
    "waiting for a server": r"^\s*def wait_(until|for)\(",
    "a notebook run with nbclient": r"NotebookClient\(",
    "the stub's message": r"^\s*def stub_message\(",
    "the lesson run-time budget": r"^\s*def budget\(",
}
# also held once, by their own tests: the stub text (tests/test_exercises_stub.py), the
# server settings (tests/test_lab_server.py), the q/k/v permute (tests/test_multihead.py)
ALLOWED = {"the eval-mode save by hand": 1}  # the one inside evaluating()
# places that hold a mechanism's name for another reason: the tests' learner-style wrong
# versions of the exercise, the test that looks for nbclient's set-up
NOT_A_DEFINITION = {
    "one optimizer step of training": ("tests/",),
    "a notebook run with nbclient": ("tests/test_tools.py",),
}


@pytest.mark.parametrize(
    "path", sorted((ROOT / "course_lib").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT))
)
def test_no_course_lib_module_is_over_500_lines(path):
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(ROOT)}: {lines} lines; split it by lesson"


@pytest.mark.parametrize("mechanism", ONE_DEFINITION)
def test_each_shared_mechanism_is_defined_once(mechanism):
    pattern = re.compile(ONE_DEFINITION[mechanism], re.MULTILINE)
    skip = NOT_A_DEFINITION.get(mechanism, ())
    found = [
        f"{name}:{text[: m.start()].count(chr(10)) + 1}"
        for path in SOURCES
        if path != Path(__file__).resolve()
        for name in [path.relative_to(ROOT).as_posix()]
        if not name.startswith(skip)
        for text in [path.read_text(encoding="utf-8")]
        for m in pattern.finditer(text)
    ]
    assert len(found) == ALLOWED.get(mechanism, 1), f"{mechanism}: defined at {found}"
