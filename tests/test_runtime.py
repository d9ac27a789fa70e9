"""course_lib.runtime: the thread count and eval mode are restored, even after an error."""

import pytest
import torch

from course_lib.runtime import evaluating, one_thread


def test_one_thread_restores_the_thread_count_after_an_error():
    torch.set_num_threads(2)
    with pytest.raises(RuntimeError), one_thread():
        assert torch.get_num_threads() == 1
        raise RuntimeError("inside")
    assert torch.get_num_threads() == 2


@pytest.mark.parametrize("training", [True, False])
def test_evaluating_sets_eval_mode_and_restores_the_mode_after_an_error(training):
    model = torch.nn.Sequential(torch.nn.Dropout(0.5))
    model.train(training)
    with pytest.raises(RuntimeError), evaluating(model) as inside:
        assert inside is model and not model.training and not model[0].training
        raise RuntimeError("inside")
    assert model.training is training and model[0].training is training
