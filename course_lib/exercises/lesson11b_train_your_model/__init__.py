"""Lesson 11b's exercise: the whole training loop.

CONTRACT (fixed: the lesson and its checks rely on it):
- train_loop(model, train_ids, config, callback=None) -> list of config.steps Python floats,
  the loss of each step's batch before its update; what course_lib.train.train does with
  the same arguments: one AdamW (lr config.lr, weight_decay config.weight_decay) made once;
  one torch.Generator seeded config.seed, each batch train_ids[torch.randint(len(train_ids),
  (config.batch_size,), generator=generator)]; the model in train mode for every step; at
  step s (from 0) the warm-up/cosine learning rate of course_lib.train.learning_rate in every
  param group, the gradients of this batch's next-token loss alone, their global norm
  clipped to config.grad_clip unless None, optimizer.step(); after step s, when (s + 1) is a
  multiple of config.eval_every or s is the last step, callback(s + 1, model) if callback is
  given, then train mode again (a callback may leave the model in eval mode); without
  course_lib.train's train, train_step, learning_rate or batches (`forbidden`).

A training loop changes its model, so it is checked through an adapter (`loop_run`) that
turns the learner's loop into a function of its arguments: it runs the loop on a copy of a
small model that notes the mode of every forward pass made with gradients on, with a
callback that measures the model in eval mode, and returns the losses, the parameters after
the last step, whether every training forward ran in train mode, and what the callback saw.
The reference is course_lib.train.train run the same way; every bug is a loop written the
way a learner gets it wrong, run the same way.
"""

from course_lib.exercises.lesson11b_train_your_model.train_loop import (
    TRAIN_LOOP,
    loop_reference,
    loop_run,
    run_loop,
    watched_copy,
)

EXERCISES = (TRAIN_LOOP,)

__all__ = ["TRAIN_LOOP", "loop_reference", "loop_run", "run_loop", "watched_copy", "EXERCISES"]
