"""Lesson 10's exercise: sampling a model, with temperature, greedy decoding and top-k.

CONTRACTS (fixed: the lesson, its explorer and its checks rely on them):
- generate(model, prompt, num_tokens, *, temperature=1.0, top_k=None, seed=0) -> (B, T0 +
  num_tokens) int64: model a TinyTransformer (model(ids) gives logits (B, T, V) for ids of
  at most model.config.max_len tokens), prompt (B, T0) int64 with T0 >= 1; the prompt
  followed by num_tokens new ids, each picked from the logits of the last position of the
  sequence so far, fed as its last max_len tokens. With top_k, every logit below the k-th
  largest is set to -inf first. Temperature 0 takes the argmax (greedy); any other draws one
  torch.multinomial(softmax(logits / temperature), 1, generator=generator) over the whole
  vocabulary, from one torch.Generator().manual_seed(seed) made before the loop. A negative
  temperature, top_k below 1 or above V, and a prompt of no tokens raise a ValueError (a
  TypeError for a wrong type) that names the parameter: course_lib.model.generate's tokens.

Every wrong version below is a mistake a learner makes, written the way it comes out; a test
(tests/test_exercises_lesson10.py) writes each again as a learner would and checks its hint.
"""

from course_lib.exercises.lesson10.generate import (
    BAD_ARGUMENTS,
    GENERATE,
    generate_reference,
    promises,
    run_generate,
)

EXERCISES = (GENERATE,)

__all__ = [
    "BAD_ARGUMENTS", "GENERATE", "generate_reference", "promises", "run_generate", "EXERCISES",
]  # fmt: skip
