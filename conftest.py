"""Root pytest hooks: the notebooks that strict nbval runs, and the kernel path in the report."""

import os

PATH_VARIABLES = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "OMP_NUM_THREADS")


def kernel_path() -> str:
    """Which of torch's CPU math paths this run uses, and the settings that chose it."""
    import torch

    chosen = " ".join(f"{k}={os.environ[k]}" for k in PATH_VARIABLES if k in os.environ)
    return f"{torch.backends.cpu.get_cpu_capability()} ({chosen or 'this CPU native'})"


def pytest_report_header(config):
    return f"kernel path: {kernel_path()}"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    # said again at the end, beside the summary, so a failure names the path that broke
    terminalreporter.write_line(f"kernel path: {kernel_path()}", bold=exitstatus != 0)


def pytest_collectstart(collector):
    # stderr carries warnings and progress-bar redraws that differ by machine; stored
    # outputs stay the lesson, stdout and results are compared in full.
    if collector.fspath and collector.fspath.ext == ".ipynb":
        collector.skip_compare += ("stderr",)
