"""tools/kernel_start.py: a kernel that died before replying is started again, nothing else."""

import pytest

from tools.kernel_start import DIED_STARTING, retrying


def _start(failures: list):
    calls = []

    def start(*args, **kwargs):
        calls.append((args, kwargs))
        if failures:
            raise failures.pop(0)
        return "kernel manager", "kernel client"

    return start, calls


def test_a_kernel_that_died_starting_is_started_again():
    start, calls = _start([RuntimeError(DIED_STARTING)])
    assert retrying(start, wait_s=0)("python", startup_timeout=60) == (
        "kernel manager",
        "kernel client",
    )
    assert calls == [(("python",), {"startup_timeout": 60})] * 2


def test_it_gives_up_after_its_tries():
    start, calls = _start([RuntimeError(DIED_STARTING)] * 3)
    with pytest.raises(RuntimeError, match="Kernel died before replying"):
        retrying(start, tries=3, wait_s=0)()
    assert len(calls) == 3


@pytest.mark.parametrize(
    "error", [RuntimeError("Kernel didn't respond in 60 seconds"), OSError("no such kernel")]
)
def test_any_other_failure_is_reported_at_once(error):
    start, calls = _start([error])
    with pytest.raises(type(error)):
        retrying(start, wait_s=0)()
    assert len(calls) == 1


def test_nbval_starts_its_kernels_through_the_retry():
    import nbval.kernel

    assert nbval.kernel.start_new_kernel.__wrapped__ is not None
