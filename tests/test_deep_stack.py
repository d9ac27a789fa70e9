"""course_lib.deep_stack: lesson 08's stack builder and per-layer measurements, against a plain
backward pass. Lesson 08's claims about deep stacks are in
tests/test_lesson08_transformer_block.py."""

import pytest
import torch
from torch import nn

from course_lib.deep_stack import (
    activation_scales,
    build_stack,
    gradient_reaching,
    run_stack,
    stack_profile,
)
from helpers import stack_inputs as inputs


def test_gradient_reaching_matches_plain_backward():
    stack = build_stack(6, 16, 2, 64, norm="layer")
    x, probe = inputs(0)
    hs, h = [], x.clone().requires_grad_(True)
    for block in stack:  # the reference: retain_grad and one .backward(), nothing of ours
        h.retain_grad()
        hs.append(h)
        h = block(h)
    (h * probe).sum().backward()
    expected = torch.stack([t.grad.double().norm() for t in hs])  # float64, as gradient_reaching
    hidden = run_stack(stack, x)
    torch.testing.assert_close(gradient_reaching(hidden, probe), expected)
    # one forward pass serves every depth: the prefix equals a fresh 3-block stack's answer
    short = stack_profile(stack[:3], x, probe).grad_norms
    torch.testing.assert_close(gradient_reaching(hidden[:4], probe), short)
    torch.testing.assert_close(gradient_reaching(hidden, probe, depth=3), short)


def test_activation_scales_are_the_rms_of_each_output():
    stack = build_stack(4, 16, 2, 64)
    x, _ = inputs(1)
    hidden = run_stack(stack, x)
    h = x
    for layer, block in enumerate(stack):
        h = block(h)
        rms = torch.sqrt(torch.mean(h.detach() ** 2))
        torch.testing.assert_close(activation_scales(hidden)[layer], rms)


def test_build_stack_same_weights_for_every_variant_and_global_rng_untouched():
    torch.manual_seed(7)
    before = torch.random.get_rng_state()
    stacks = [
        build_stack(3, 16, 2, 64, norm=n, prenorm=p, residual=r, seed=4)
        for n in ("layer", "batch", "none")
        for p in (True, False)
        for r in (True, False)
    ]
    assert torch.equal(torch.random.get_rng_state(), before)
    ref = stacks[0]
    for stack in stacks[1:]:
        for a, b in zip(ref, stack, strict=True):
            assert torch.equal(a.attn.qkv.weight, b.attn.qkv.weight)
            assert torch.equal(a.ff[2].weight, b.ff[2].weight)
    assert not torch.equal(build_stack(1, 16, 2, 64, seed=5)[0].ff[0].weight, ref[0].ff[0].weight)


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda: build_stack(0, 16, 2, 64), "depth: expected a positive int, got 0"),
        (
            lambda: run_stack(nn.ModuleList(), torch.zeros(1, 2, 16)),
            "blocks: expected at least one",
        ),
        (
            lambda: gradient_reaching(
                run_stack(build_stack(2, 16, 2, 64), torch.randn(1, 3, 16)),
                torch.randn(1, 3, 16),
                depth=3,
            ),
            "depth: expected at most 2",
        ),
        (
            lambda: gradient_reaching(
                run_stack(build_stack(1, 16, 2, 64), torch.randn(1, 3, 16)), torch.randn(1, 4, 16)
            ),
            r"probe: expected the output's shape",
        ),
    ],
)
def test_bad_arguments_are_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()
