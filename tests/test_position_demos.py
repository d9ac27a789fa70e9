"""course_lib.position_demos: lesson 04's sinusoids at any position and the 2-D rotation.

Lesson 04's claims made with the demos (order blindness, RoPE's offset property) are in
tests/test_lesson04.py.
"""

import torch

from course_lib import position_demos, positional


def test_sinusoidal_at_extends_the_table():
    positions = torch.arange(-5, 40)
    table = position_demos.sinusoidal_at(positions, 16)
    torch.testing.assert_close(table[5:], positional.sinusoidal_encoding(40, 16))
    p, i = -3.0, 2
    angle = torch.tensor(p / 10000 ** (2 * i / 16))
    torch.testing.assert_close(table[2, 2 * i], angle.sin())
    torch.testing.assert_close(table[2, 2 * i + 1], angle.cos())


def test_rotate_pair_is_a_counter_clockwise_rotation():
    turned = position_demos.rotate_pair(torch.tensor([1.0, 0.0]), torch.pi / 2)
    torch.testing.assert_close(turned, torch.tensor([0.0, 1.0]))
    pairs = torch.randn(10, 2)
    angles = torch.rand(10) * 6
    turned = position_demos.rotate_pair(pairs, angles)
    expected = torch.view_as_real(torch.view_as_complex(pairs) * torch.exp(1j * angles))
    torch.testing.assert_close(turned, expected)
