"""Process settings the lessons and the training code share: thread count, eval mode."""

from contextlib import contextmanager

import torch


@contextmanager
def one_thread():
    """Run tiny tensor work on one thread, then restore the setting (lesson 02b onwards).

    For the course's sizes waking a thread pool costs more than it saves; on a busy 2-core
    machine it made lesson 03a's training run 10x slower.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextmanager
def evaluating(model: torch.nn.Module):
    """Put model in eval mode for the block, then back in the mode it had (lesson 11b).

    Dropout and batch norm behave differently in training; a measurement must not change
    the model it measures, even when it raises.
    """
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)
