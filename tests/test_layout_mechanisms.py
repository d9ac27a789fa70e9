"""The mechanism modules hold the mechanisms only; lessons' experiments live beside them.

A learner who opens attention.py from lesson 01 should meet attention, not lesson 02's training
run. The calls below are what only an experiment makes in these modules: a backward pass,
random draws, a forked RNG, an optimiser. On the tree before the experiments moved out
(toy.py, saturation.py, position_demos.py, deep_stack.py, ablation.py), this test failed on
attention.py (13 calls: torch.randn, torch.rand, torch.autograd.functional.jacobian, backward)
and on block.py (torch.random.fork_rng, torch.autograd.grad); it passes now.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "course_lib"
MECHANISMS = ("attention", "multihead", "positional", "block", "model", "seq2seq")
RANDOM = {"randn", "rand", "randint", "randperm", "randn_like", "rand_like", "normal"}


def _dotted(node) -> str:
    """'torch.autograd.grad' for the expression torch.autograd.grad; '' for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def experiment_calls(source: str) -> list[str]:
    """Each call in source that only an experiment makes here, as 'line: name'."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        last = name.rsplit(".", 1)[-1]
        if (
            last == "backward"
            or "autograd.grad" in name
            or "autograd.functional" in name
            or (name.startswith("torch.") and last in RANDOM)
            or last == "fork_rng"
            or name.startswith(("torch.optim.", "optim."))
        ):
            found.append((node.lineno, name))
    return [f"{line}: {name}" for line, name in sorted(found)]


def test_the_detector_finds_each_kind_of_experiment_call():
    snippet = """
loss.backward()
torch.autograd.grad(loss, x)
torch.autograd.functional.jacobian(f, x)
torch.randn(3)
torch.randperm(4, generator=g)
with torch.random.fork_rng(devices=[]):
    pass
opt = torch.optim.SGD(params, lr=0.1)
y = torch.softmax(x, dim=-1)  # the mechanisms' own calls are not flagged
"""
    assert [c.split(": ")[1] for c in experiment_calls(snippet)] == [
        "loss.backward",
        "torch.autograd.grad",
        "torch.autograd.functional.jacobian",
        "torch.randn",
        "torch.randperm",
        "torch.random.fork_rng",
        "torch.optim.SGD",
    ]


@pytest.mark.parametrize("module", MECHANISMS)
def test_mechanism_module_holds_no_lesson_experiment(module):
    calls = experiment_calls((PACKAGE / f"{module}.py").read_text(encoding="utf-8"))
    assert not calls, (
        f"course_lib/{module}.py runs an experiment ({calls}): move it to its own module"
    )
