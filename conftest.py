"""Root pytest hooks: the notebooks that strict nbval runs, the kernel path in the report,
which tests measure rounding-sensitive values, and every lesson's run-time budget."""

import os
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from tools.lesson_budget import over_budget

# jsonschema, which nbformat imports to validate notebooks, builds a grammar for its optional
# IRI format check (the rfc3987_syntax package) at import: about 1.2 s in every test process.
# No notebook schema uses a "format" keyword, so the check can never run on a notebook; the
# test processes go without it (None in sys.modules makes `import rfc3987_syntax` fail, which
# jsonschema treats as the package being absent). The lessons' own kernels are untouched.
sys.modules.setdefault("rfc3987_syntax", None)

# a learner's notebooks as an earlier course left them, read by the workspace tests: no lesson,
# so never run as one (their imports name modules the course has since split or renamed)
collect_ignore_glob = ["tests/fixtures/*"]

PATH_VARIABLES = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "OMP_NUM_THREADS")
_lesson_seconds: dict[str, float] = defaultdict(float)  # notebook stem -> summed cell time
_over: list[str] = []


def kernel_path() -> str:
    """Which of torch's CPU math paths this run uses, and the settings that chose it."""
    import torch

    chosen = " ".join(f"{k}={os.environ[k]}" for k in PATH_VARIABLES if k in os.environ)
    return f"{torch.backends.cpu.get_cpu_capability()} ({chosen or 'this CPU native'})"


def pytest_configure(config):
    # a notebook's kernel that died on the way up (a port taken by another process's kernel
    # in the same instant) is started again: tools/kernel_start.py
    try:
        import nbval.kernel
    except ImportError:  # the browser test runs without the nbval plugin
        return
    from tools.kernel_start import retrying

    if not hasattr(nbval.kernel.start_new_kernel, "__wrapped__"):
        nbval.kernel.start_new_kernel = retrying(nbval.kernel.start_new_kernel)


def pytest_addoption(parser):
    parser.addoption(
        "--lesson-budget",
        action="store_true",
        help="fail if a notebook's cells take longer than its budget (tools/lesson_budget.py)",
    )


def pytest_report_header(config):
    return f"kernel path: {kernel_path()}"


def pytest_collectstart(collector):
    # stderr carries warnings and progress-bar redraws that differ by machine; stored
    # outputs stay the lesson, stdout and results are compared in full.
    if collector.fspath and collector.fspath.ext == ".ipynb":
        collector.skip_compare += ("stderr",)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    # What rounds differently on another CPU kernel path: every notebook cell (strict nbval
    # compares printed digits) and every test that logs a measured value through the
    # `measure` fixture (the claim tests). `make test` runs only these on the generic path;
    # `make portable` runs the rest there too.
    for item in items:
        if item.path.suffix == ".ipynb" or "measure" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.rounding)


def pytest_runtest_logreport(report):
    path = report.nodeid.split("::", 1)[0]
    # with xdist the workers' reports arrive here too, so the controller sees every cell
    if report.when == "call" and path.endswith(".ipynb"):
        _lesson_seconds[Path(path).stem] += report.duration


def pytest_sessionfinish(session, exitstatus):
    if not _lesson_seconds or hasattr(session.config, "workerinput"):  # a worker: not here
        return
    _over[:] = over_budget(_lesson_seconds)
    if _over and session.config.getoption("--lesson-budget"):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if _lesson_seconds:
        # a lesson by its label ("04", "02a"), or by its stem where two share the label
        labels = [k.split("_")[0] for k in _lesson_seconds]
        each = ", ".join(
            f"{k.split('_')[0] if labels.count(k.split('_')[0]) == 1 else k} {v:.1f} s"
            for k, v in sorted(_lesson_seconds.items())
        )
        terminalreporter.write_line(f"lesson cell time: {each}")
    for problem in _over:
        terminalreporter.write_line(f"LESSON OVER BUDGET: {problem}", red=True)
    # said again at the end, beside the summary, so a failure names the path that broke
    terminalreporter.write_line(f"kernel path: {kernel_path()}", bold=exitstatus != 0)
