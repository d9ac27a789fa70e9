"""course_lib.toy: lesson 01's toy embeddings, projections and influence measure."""

import torch
from torch.testing import assert_close

from course_lib.toy import influence_on_last


def test_influence_matches_a_linear_map_worked_by_hand():
    w = torch.randn(5, 3)
    x = torch.randn(6, 5)
    influence = influence_on_last(lambda s: s @ w, x)  # (T, 5) @ (5, 3) -> (T, 3)
    expected = torch.zeros(6)
    expected[-1] = w.norm()  # only the last input reaches the last output, through w
    assert_close(influence, expected)
