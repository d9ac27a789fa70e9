"""Lesson 11's exercises: your own model from your parts, and the whole training loop.

CONTRACTS (fixed: the lesson and its checks rely on them):
- MyTransformer(vocab_size, d_model, num_heads, d_ff, num_layers), an nn.Module whose
  state_dict has exactly the names and shapes of a TinyTransformer's (the base model's,
  printed in the lesson); forward(idx (B, T) int64) -> logits (B, T, V): embedding, pre-norm
  blocks (causal multi-head attention with RoPE on q and k, feed-forward), final norm, head;
  built and run without the course's TinyTransformer, its blocks or lesson 15's windowed forward
  (`forbidden`), calling each of the learner's eight functions of YOUR_FUNCTIONS with results
  that reach the logits (your_functions.py: each must run, and changing every tensor it
  returns, in place as it returns, must change the logits).
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

A class is not a function of tensors, so MyTransformer is checked through an adapter
(`model_logits`) that builds the class, loads a model's weights and returns its logits; its
reference is the course's TinyTransformer with the same weights.

A training loop changes its model, so it is checked through an adapter (`loop_run`) that
turns the learner's loop into a function of its arguments: it runs the loop on a copy of a
small model that notes the mode of every forward pass made with gradients on, with a
callback that measures the model in eval mode, and returns the losses, the parameters after
the last step, whether every training forward ran in train mode, and what the callback saw.
The reference is course_lib.train.train run the same way; every bug is a loop written the
way a learner gets it wrong, run the same way.
"""

from course_lib.exercises.lesson11.my_transformer import (
    ARGUMENTS,
    MAX_LEN,
    MY_TRANSFORMER,
    contract_of,
    model_logits,
    run_model,
    transformer_logits,
)
from course_lib.exercises.lesson11.train_loop import (
    TRAIN_LOOP,
    loop_reference,
    loop_run,
    run_loop,
    watched_copy,
)
from course_lib.exercises.lesson11.your_functions import YOUR_FUNCTIONS, unused_functions

EXERCISES = (MY_TRANSFORMER, TRAIN_LOOP)

__all__ = [
    "ARGUMENTS", "MAX_LEN", "MY_TRANSFORMER", "YOUR_FUNCTIONS", "contract_of", "model_logits",
    "run_model", "transformer_logits", "unused_functions", "TRAIN_LOOP", "loop_reference",
    "loop_run", "run_loop", "watched_copy", "EXERCISES",
]  # fmt: skip
