import os
import subprocess
import sys

import pytest
import torch

from course_lib.memory import Allocations, allocations, saved_for_backward


def test_saved_for_backward_counts_each_block_once():
    x = torch.randn(10, requires_grad=True)
    y = torch.randn(10, 3, requires_grad=True)
    saved = saved_for_backward(lambda: (x[:, None] * y).sum())
    assert sorted(saved.shapes) == [(10, 1), (10, 3)] and saved.bytes == 4 * (10 + 30)
    assert saved_for_backward(lambda: x * x).bytes == 4 * 10  # x saved twice, one block
    assert saved_for_backward(lambda: x.detach() + 1).shapes == ()


@pytest.mark.slow  # the profiler's first start takes about 1.5 s
def test_allocations_follows_each_block_and_the_peak():
    def three_blocks():
        a = torch.ones(1000)  # 4000 bytes
        b = torch.ones(2000)  # 8000 bytes, 12000 alive
        del a
        c = torch.ones(500)  # 2000 bytes, 10000 alive
        return b, c

    assert allocations(three_blocks) == Allocations(3, 8000, 12000, 14000)


@pytest.mark.parametrize("fn", [allocations, saved_for_backward])
def test_the_function_must_be_callable(fn):
    with pytest.raises(TypeError, match="fn: expected a function to call, got Tensor"):
        fn(torch.ones(2))


@pytest.mark.slow  # a fresh process: the profiler's engine reads its log level once, at start
def test_the_profiler_writes_nothing_to_stderr():
    # a notebook stores stderr: Kineto's start and stop lines carry the time and process id
    code = "import torch; from course_lib.memory import allocations; allocations(torch.ones, 4)"
    env = {k: v for k, v in os.environ.items() if k != "KINETO_LOG_LEVEL"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0 and done.stderr == "", done.stderr
