"""Lesson 11a's exercise: your own model from your parts.

CONTRACT (fixed: the lesson, lesson 11b and its checks rely on it):
- MyTransformer(vocab_size, d_model, num_heads, d_ff, num_layers), an nn.Module whose
  state_dict has exactly the names and shapes of a TinyTransformer's (the base model's,
  printed in the lesson); forward(idx (B, T) int64) -> logits (B, T, V): embedding, pre-norm
  blocks (causal multi-head attention with RoPE on q and k, feed-forward), final norm, head;
  built and run without the course's TinyTransformer, its blocks or lesson 15b's windowed forward
  (`forbidden`), calling each of the learner's eight functions of YOUR_FUNCTIONS with results
  that reach the logits (your_functions.py: each must run, and changing every tensor it
  returns, in place as it returns, must change the logits).

A class is not a function of tensors, so MyTransformer is checked through an adapter
(`model_logits`) that builds the class, loads a model's weights and returns its logits; its
reference is the course's TinyTransformer with the same weights. For the same reason the
reference is not what `earlier_work("MyTransformer")` hands lesson 11b for a class not written
yet: that is `StandIn`, a class with MyTransformer's arguments that builds the course's
TinyTransformer (lesson 11a's check refuses it, as it refuses any class built on the course's
model, so lesson 11b says the course's model stands in).
"""

from course_lib.exercises.lesson11a_build_your_model.my_transformer import (
    ARGUMENTS,
    MAX_LEN,
    MY_TRANSFORMER,
    StandIn,
    contract_of,
    model_logits,
    run_model,
    transformer_logits,
)
from course_lib.exercises.lesson11a_build_your_model.your_functions import (
    YOUR_FUNCTIONS,
    unused_functions,
)

EXERCISES = (MY_TRANSFORMER,)

__all__ = [
    "ARGUMENTS", "MAX_LEN", "MY_TRANSFORMER", "StandIn", "YOUR_FUNCTIONS", "contract_of",
    "model_logits", "run_model", "transformer_logits", "unused_functions", "EXERCISES",
]  # fmt: skip
