"""Lesson 06's exercises: your own model, the next-token loss, one training step.

CONTRACTS (fixed: the lesson and its checks rely on them):
- MyTransformer(vocab_size, d_model, num_heads, d_ff, num_layers), an nn.Module whose
  state_dict has exactly the names and shapes of a TinyTransformer's (rope-h4's, printed in
  the lesson); forward(idx (B, T) int64) -> logits (B, T, V): embedding, pre-norm blocks
  (causal multi-head attention with RoPE on q and k, feed-forward), final norm, head.
- next_token_loss(model, ids) -> 0-d tensor in the logits' dtype: the mean cross-entropy of
  predicting ids[:, t + 1] from ids[:, : t + 1], as course_lib.train.lm_loss.
- train_step(model, optimizer, ids, step, config) -> float: one step of course_lib.train.train
  (AdamW's lr set from the warm-up/cosine schedule at `step`, gradients of this batch only,
  global norm clipped to config.grad_clip unless None, optimizer.step); returns the loss.

A class is not a function of tensors, and a training step changes its arguments, so two
exercises are checked through an adapter that turns what the learner writes into a function
of tensors: `model_logits(MyTransformer)` builds the model, loads a checkpoint's weights and
returns its logits; `trajectory(train_step)` runs a few steps on a copy of a small model and
returns the losses, the parameters after the steps and the learning rates. The references
and the bugs are functions of the same arguments, so every entry stays data: reference,
cases, bugs.

One module per exercise: my_transformer (MyTransformer), next_token_loss, train_step;
`inputs` loads the checkpoints and splits their cases read, once per process.
"""

from course_lib.exercises.lesson06.my_transformer import (
    ARGUMENTS,
    MAX_LEN,
    MY_TRANSFORMER,
    contract_of,
    model_logits,
    run_model,
    transformer_logits,
)
from course_lib.exercises.lesson06.next_token_loss import (
    NEXT_TOKEN_LOSS,
    FixedLogits,
    next_token_loss_reference,
)
from course_lib.exercises.lesson06.train_step import (
    TRAIN_STEP,
    course_step,
    run_step,
    steps_reference,
    trajectory,
)

EXERCISES = (MY_TRANSFORMER, NEXT_TOKEN_LOSS, TRAIN_STEP)

__all__ = [
    "ARGUMENTS",
    "MAX_LEN",
    "MY_TRANSFORMER",
    "contract_of",
    "model_logits",
    "run_model",
    "transformer_logits",
    "NEXT_TOKEN_LOSS",
    "FixedLogits",
    "next_token_loss_reference",
    "TRAIN_STEP",
    "course_step",
    "run_step",
    "steps_reference",
    "trajectory",
    "EXERCISES",
]
