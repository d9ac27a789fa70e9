"""The exercise checkers a lesson calls: `check_<name>(your_function)` and `hint()`.

Each exercise is an entry in course_lib/exercises/lessonNN.py, or lessonNN/<exercise>.py for
the module of course_lib/exercises that `course_lib.exercises.LESSONS` names for its lesson
(a file, or a folder of one file per exercise): the course's reference, the cases, the likely
bugs with their hints;
`course_lib.exercises.core.run` checks a function against it and returns a Verdict. The
`check_<name>` here prints that Verdict's first line:
a pass, "not implemented yet", or the symptom of the most likely bug. `hint()` then prints
the next, more specific hint, and its last one names the section of the lesson that holds
the idea.

A lesson's check cell only prints, so a learner who skips an exercise still runs the lesson
to the end; the copy nbgrader grades asserts it (`assert check_softmax(softmax).passed`, see
tools/nbgrader_metadata.py), so there the cell fails until the exercise passes.
"""

from collections.abc import Callable
from functools import partial

from course_lib.exercises import (
    lesson00,
    lesson01a_language_and_tokens,
    lesson01b_loss_and_floor,
    lesson02a_attention,
    lesson02b_attention_in_batches,
    lesson03a_why_scale,
    lesson03b_scale_in_models,
    lesson04a_multihead_layer,
    lesson05_encoder_decoder,
    lesson06_sinusoidal_and_rope,
    lesson07a_rope_in_a_model,
    lesson08_transformer_block,
    lesson09_feed_forward,
    lesson10,
    lesson11a_build_your_model,
    lesson11b_train_your_model,
    lesson12_read_your_model,
    lesson13a_what_generation_recomputes,
    lesson13b_kv_cache,
    lesson13c_grouped_query_attention,
    lesson14,
    lesson15a_sliding_window,
    lesson16a_interpolation_and_ntk,
    lesson16b_yarn_compared,
    lesson17a_online_softmax,
    lesson17b_tiled_memory_and_backward,
    lesson_label,
)
from course_lib.exercises.core import FAILED, Exercise, Verdict, run

_last: dict = {"verdict": None, "name": None}  # the last failed check, for hint()
_failed: dict[str, list] = {}  # exercise name -> [verdict, steps shown], for hint(name)


def show(verdict: Verdict) -> Verdict:
    """Print a verdict's first line the way every check cell does, and remember it for hint()
    (lesson 00)."""
    if verdict.passed:
        print(f"PASS  {verdict.message}")
    else:
        more = len(verdict.steps)
        tail = f"\n      (run hint() for a more specific hint: {more} more)" if more else ""
        print(f"TRY AGAIN  {verdict.message}{tail}")
    name = verdict.message.split(":", 1)[0]
    if verdict.passed or not verdict.steps:
        _failed.pop(name, None)
        if _last["verdict"] is not None and _last["verdict"].message.split(":", 1)[0] == name:
            _last["verdict"] = None
    else:
        _failed[name] = [verdict, 0]
        _last["verdict"], _last["name"] = verdict, name
    return verdict


def hint(name: str | None = None) -> None:
    """Print the next hint for the last failed check (or for exercise `name`) (lesson 00)."""
    if name is None:
        if _last["verdict"] is None:
            print("No failed check to give a hint for.")
            return
        name = _last["name"]
    if name not in _failed:
        print(f"No failed check of {name} to give a hint for: run its check first.")
        return
    verdict, shown = _failed[name]
    steps = verdict.steps
    step = steps[min(shown, len(steps) - 1)]
    _failed[name][1] = shown + 1
    left = len(steps) - shown - 1
    tail = f" ({left} more: run hint() again)" if left > 0 else ""
    print(f"HINT {min(shown, len(steps) - 1) + 1}/{len(steps)}  {name}: {step}{tail}")


def checker(exercise: Exercise, verdict: Callable | None = None) -> Callable:
    """The check_<name>(fn) a lesson calls: verdict(fn), printed; returns the Verdict (lesson
    00).

    verdict defaults to core.run(exercise, fn). Where what the learner writes is not a
    function of the cases' arguments (lesson 11a's class, 11b's training loop), it is the
    exercise's run_model / run_loop, which adapt it and then call core.run; lesson 17a's
    run_online and 17b's run_backward call core.run, then check what the numbers cannot show
    (the gradients, and that no (T_q, T_k) matrix is ever held).
    """
    judge = partial(run, exercise) if verdict is None else verdict

    def check(fn) -> Verdict:
        if fn is exercise.reference:  # core.run trusts the reference: never a learner's answer
            return show(Verdict(False, f"{exercise.name}: that is the course's own function, the "
                                "one the check compares with. Write yours in the exercise's cell.",
                                (), FAILED, "the course's"))  # fmt: skip
        return show(judge(fn))

    check.exercise = exercise  # the entry it runs (tests find every exercise's checker by it)
    check.__name__ = f"check_{exercise.name}"
    check.__doc__ = (
        f"Check your {exercise.name} (lesson {lesson_label(exercise.lesson)}); print the verdict."
    )
    return check


# ---------------------------------------------------------------- lesson 00
check_softmax = checker(lesson00.SOFTMAX)

# ---------------------------------------------------------------- lesson 01a_language_and_tokens
check_token_embedding = checker(lesson01a_language_and_tokens.TOKEN_EMBEDDING)
check_output_layer = checker(lesson01a_language_and_tokens.OUTPUT_LAYER)

# ---------------------------------------------------------------- lesson 01b_loss_and_floor
check_next_token_cross_entropy = checker(lesson01b_loss_and_floor.NEXT_TOKEN_CROSS_ENTROPY)

# ---------------------------------------------------------------- lesson 02a_attention
check_causal_mask = checker(lesson02a_attention.CAUSAL_MASK)
check_qkv_projection = checker(lesson02a_attention.QKV_PROJECTION)

# ---------------------------------------------------------------- lesson 02b_attention_in_batches
check_attention = checker(lesson02b_attention_in_batches.ATTENTION)
check_padding_mask = checker(lesson02b_attention_in_batches.PADDING_MASK)

# ---------------------------------------------------------------- lesson 04a_multihead_layer
check_split_heads = checker(lesson04a_multihead_layer.SPLIT_HEADS)
check_merge_heads = checker(lesson04a_multihead_layer.MERGE_HEADS)
check_multihead = checker(lesson04a_multihead_layer.MULTIHEAD)

# ---------------------------------------------------------------- lesson 03a_why_scale
check_softmax_jacobian = checker(lesson03a_why_scale.SOFTMAX_JACOBIAN)

# ---------------------------------------------------------------- lesson 03b_scale_in_models
check_score_variance = checker(lesson03b_scale_in_models.SCORE_VARIANCE)

# ---------------------------------------------------------------- lesson 05_encoder_decoder
check_cross_attention = checker(lesson05_encoder_decoder.CROSS_ATTENTION)
check_decoder_layer = checker(lesson05_encoder_decoder.DECODER_LAYER)

# ---------------------------------------------------------------- lesson 06_sinusoidal_and_rope
check_sinusoidal_encoding = checker(lesson06_sinusoidal_and_rope.SINUSOIDAL_ENCODING)
check_rotate_pair = checker(lesson06_sinusoidal_and_rope.ROTATE_PAIR)
check_rope_score = checker(lesson06_sinusoidal_and_rope.ROPE_SCORE)

# ---------------------------------------------------------------- lesson 07a_rope_in_a_model
check_rope_heads = checker(lesson07a_rope_in_a_model.ROPE_HEADS)
check_to_rotate_half = checker(lesson07a_rope_in_a_model.TO_ROTATE_HALF)

# ---------------------------------------------------------------- lesson 08_transformer_block
check_prenorm_block = checker(lesson08_transformer_block.PRENORM_BLOCK)
check_layer_norm = checker(lesson08_transformer_block.LAYER_NORM)

# ---------------------------------------------------------------- lesson 09_feed_forward
check_feed_forward = checker(lesson09_feed_forward.FEED_FORWARD)

# ---------------------------------------------------------------- lesson 10
check_generate = checker(lesson10.GENERATE, lesson10.run_generate)

# ---------------------------------------------------------------- lessons 13a, 13b, 13c
check_rope_from = checker(lesson13a_what_generation_recomputes.ROPE_FROM)
check_attend_cached = checker(lesson13a_what_generation_recomputes.ATTEND_CACHED)
check_forward_with_cache = checker(lesson13b_kv_cache.FORWARD_WITH_CACHE,
                                   lesson13b_kv_cache.run_forward)  # fmt: skip
check_generate_cached = checker(lesson13b_kv_cache.GENERATE_CACHED, lesson13b_kv_cache.run_generate)
check_grouped_multihead = checker(lesson13c_grouped_query_attention.GROUPED_MULTIHEAD)

# ---------------------------------------------------------------- lesson 11a_build_your_model
check_my_transformer = checker(
    lesson11a_build_your_model.MY_TRANSFORMER, lesson11a_build_your_model.run_model
)

# ---------------------------------------------------------------- lesson 11b_train_your_model
check_train_loop = checker(
    lesson11b_train_your_model.TRAIN_LOOP, lesson11b_train_your_model.run_loop
)

# ---------------------------------------------------------------- lesson 12
check_head_detector = checker(lesson12_read_your_model.HEAD_DETECTOR)

# ---------------------------------------------------------------- lesson 14
check_rms_norm = checker(lesson14.RMS_NORM)
check_swiglu = checker(lesson14.SWIGLU)


# ---------------------------------------------------------------- lesson 15a
check_sliding_window_mask = checker(lesson15a_sliding_window.SLIDING_WINDOW_MASK)
check_attend_rolling = checker(lesson15a_sliding_window.ATTEND_ROLLING)
# ---------------------------------------------------------------- lesson 16a
check_pi_angles = checker(lesson16a_interpolation_and_ntk.PI_ANGLES)
check_ntk_frequencies = checker(lesson16a_interpolation_and_ntk.NTK_FREQUENCIES)
# ---------------------------------------------------------------- lesson 16b
check_yarn_frequencies = checker(lesson16b_yarn_compared.YARN_FREQUENCIES)

# ---------------------------------------------------------------- lesson 17a
check_online_attention = checker(
    lesson17a_online_softmax.ONLINE_ATTENTION, lesson17a_online_softmax.run_online
)

# ---------------------------------------------------------------- lesson 17b
check_tiled_backward = checker(
    lesson17b_tiled_memory_and_backward.TILED_BACKWARD,
    lesson17b_tiled_memory_and_backward.run_backward,
)
