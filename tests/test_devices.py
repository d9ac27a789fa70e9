"""The course computes on the CPU by design (README, "On the CPU, by design"): a learner whose
torch sees a GPU, CUDA or Apple's MPS, gets the same lessons. Here torch is told that both are
there (torch.cuda.is_available and torch.backends.mps.is_available patched to say True), and
the lessons' code runs as before: same numbers, every tensor on the CPU, nothing asking for a
device. On this CPU-only torch a tensor sent to "cuda" or "mps" raises, so a lesson that moved
one would fail here rather than pass silently."""

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

import course_lib
from course_lib import corpus, train, variants
from course_lib.model import TinyTransformer, generate

ROOT = Path(__file__).resolve().parents[1]
LESSON = "notebooks/11b_train_your_model.ipynb"  # the lesson that trains
CLAIM = "torch.cuda.is_available = torch.backends.mps.is_available = lambda: True\n"

# The claim can be faked only on a torch built without CUDA, the build requirements.txt pins.
# A CUDA build (the only torch PyPI has for Linux, and so for Python 3.12 and 3.13 here) acts
# on the claim itself: on a machine without a GPU, torch's own optimizers then ask CUDA for its
# current stream (Adam's graph-capture check) and fail with "Found no NVIDIA driver"; with a
# GPU, a move to "cuda" succeeds. Seen on torch 2.13.0+cu130 under Python 3.12 and 3.13.
pytestmark = pytest.mark.skipif(
    torch.backends.cuda.is_built(),
    reason="torch is a CUDA build: a GPU claim can be faked only on a CPU-only torch",
)


@pytest.fixture
def gpu_claimed(monkeypatch):
    """torch says CUDA and MPS are there, for the test's duration."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)


def capstone_paths() -> list[torch.Tensor]:
    """What lesson 11b does, in small: a shipped model's logits and samples, and a few training
    steps of a fresh model, each tensor as the lesson gets it."""
    course_lib.set_seed(0)
    shipped = variants.load_trained("base", 0)
    valid = corpus.load_split("valid")  # (400, 32): a fiftieth of the train split's size
    ids = valid[:4]  # (4, 32)
    with torch.no_grad():
        logits = shipped(ids)  # (4, 32, V)
    samples = generate(shipped, ids[:, :4], 6, seed=1)  # (4, 10)
    small = TinyTransformer.from_config(replace(variants.BASE, d_model=16, d_ff=32))
    steps = train.TrainConfig(steps=3, batch_size=4, warmup_steps=1, eval_every=3)
    history = train.train(small, valid[4:20], ids, steps, progress=False)
    trained = [p.detach().clone() for p in small.parameters()]
    return [logits, samples, torch.tensor(history.train_loss + history.val_loss), *trained]


def test_torch_seeing_a_gpu_changes_nothing_in_the_capstones_code(request):
    on_cpu = capstone_paths()
    request.getfixturevalue("gpu_claimed")
    claimed = capstone_paths()
    assert torch.get_default_device().type == "cpu"
    assert all(t.device.type == "cpu" for t in claimed)
    assert len(claimed) == len(on_cpu)
    assert all(torch.equal(a, b) for a, b in zip(on_cpu, claimed, strict=True))


def test_the_claim_is_believed_and_a_device_move_would_fail(gpu_claimed):
    assert torch.cuda.is_available() and torch.backends.mps.is_available()
    with pytest.raises((AssertionError, RuntimeError)):  # a CPU-only build: no CUDA to move to
        torch.zeros(1).to("cuda")


# the lesson that trains (11b) under strict nbval in its own kernel: about 40 s. What it checks,
# that a GPU claim changes nothing, is the same on every kernel path (the plain nbval runs
# check the lesson's numbers on the other paths), so it runs on one path only
@pytest.mark.slow
@pytest.mark.path_independent
def test_the_capstone_lesson_runs_unchanged_where_torch_sees_a_gpu(tmp_path):
    """Every cell of lesson 11b in a kernel whose torch says CUDA and MPS are there (an IPython
    startup file, which kernels run before the first cell), compared with the stored outputs
    by strict nbval: recorded where torch sees no GPU, so every number must come out equal."""
    startup = tmp_path / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    seen = tmp_path / "claimed"
    (startup / "00-gpu.py").write_text(
        f"import pathlib, torch\n{CLAIM}pathlib.Path({str(seen)!r}).write_text('claimed')\n"
    )
    env = {**os.environ, "IPYTHONDIR": str(tmp_path / "ipython"), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "--nbval", "--nbval-current-env",
         "--nbval-cell-timeout=300", "--nbval-sanitize-with", "tests/sanitize.cfg", LESSON],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert seen.read_text() == "claimed", "the kernel did not run the startup file"
    assert done.returncode == 0, done.stdout[-4000:]
