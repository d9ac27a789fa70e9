"""Every exercise of the course as data: one module of entries per lesson, on a shared core.

`core` holds the Exercise/Bug/Verdict types and `run`, which checks a learner's function and
returns a Verdict without printing. Each lesson's entries are `EXERCISES` in the module that
`LESSONS` names for it; a lesson's key is its notebook's file name without `.ipynb`
("05_encoder_decoder"), so two lessons can never be mixed up, even while a learner's workspace still
holds a lesson under an earlier name. `lesson_key` / `lesson_file` are the one rule that maps
a notebook to its key and back, and `FORMER` the one record of lessons that replaced earlier
ones (`course_lib.mywork` reads a learner's functions from the earlier file too).
`stub` writes and recognises the stub a learner's copy holds, and decides yours or the
course's (for the checkers, the explorers, course_lib.mywork, the workspace and nbgrader).
`course_lib.checks` turns each entry into the `check_<name>` a lesson calls, which prints.
"""

import importlib
from pathlib import Path

from course_lib.exercises.core import Bug, Case, Exercise, Verdict, run

# each lesson's notebook (its file name without .ipynb) -> the module of its entries, in the
# order the notebooks sort, which is the order of the course
LESSONS = {
    "00_start_here": "lesson00",
    "01a_language_and_tokens": "lesson01a_language_and_tokens",
    "01b_loss_and_floor": "lesson01b_loss_and_floor",
    "02a_attention": "lesson02a_attention",
    "02b_attention_in_batches": "lesson02b_attention_in_batches",
    "03a_why_scale": "lesson03a_why_scale",
    "03b_scale_in_models": "lesson03b_scale_in_models",
    "04a_multihead_layer": "lesson04a_multihead_layer",
    "04b_when_heads_help": "lesson04b_when_heads_help",
    "05_encoder_decoder": "lesson05_encoder_decoder",
    "06_sinusoidal_and_rope": "lesson06_sinusoidal_and_rope",
    "07a_rope_in_a_model": "lesson07a_rope_in_a_model",
    "07b_positions_past_training": "lesson07b_positions_past_training",
    "08_transformer_block": "lesson08_transformer_block",
    "09_feed_forward": "lesson09_feed_forward",
    "10_sampling_and_cost": "lesson10",
    "11a_build_your_model": "lesson11a_build_your_model",
    "11b_train_your_model": "lesson11b_train_your_model",
    "12_read_your_model": "lesson12_read_your_model",
    "13a_what_generation_recomputes": "lesson13a_what_generation_recomputes",
    "13b_kv_cache": "lesson13b_kv_cache",
    "13c_grouped_query_attention": "lesson13c_grouped_query_attention",
    "14_todays_block": "lesson14",
    "15a_sliding_window": "lesson15a_sliding_window",
    "15b_attention_sinks": "lesson15b_attention_sinks",
    "16a_interpolation_and_ntk": "lesson16a_interpolation_and_ntk",
    "16b_yarn_compared": "lesson16b_yarn_compared",
    "17a_online_softmax": "lesson17a_online_softmax",
    "17b_tiled_memory_and_backward": "lesson17b_tiled_memory_and_backward",
}

# a lesson that replaced earlier ones -> the earlier notebooks' names. A renamed lesson arrives
# as a new file (a learner's workspace copy is never overwritten, and nbgitpuller keeps the
# learner's version), so a workspace may still hold the earlier file with the learner's work
# in it: course_lib.mywork reads it there wherever the new lesson's exercise is still a stub.
FORMER: dict[str, tuple[str, ...]] = {
    "01a_language_and_tokens": ("01_language_and_loss",),
    "01b_loss_and_floor": ("01_language_and_loss",),
    "02a_attention": ("01_attention_qkv", "02_attention_and_masks"),
    "02b_attention_in_batches": ("01_attention_qkv", "02_attention_and_masks"),
    "03a_why_scale": ("02_scaling", "03_scaling"),
    "03b_scale_in_models": ("02_scaling", "03_scaling"),
    "04a_multihead_layer": ("03_multihead", "04_multihead"),
    "04b_when_heads_help": ("03_multihead", "04_multihead"),
    "06_sinusoidal_and_rope": ("04_positional_encoding",),
    "07a_rope_in_a_model": ("04_positional_encoding", "07_rope_in_real_models"),
    "07b_positions_past_training": ("04_positional_encoding", "07_rope_in_real_models"),
    "08_transformer_block": ("05_transformer_block",),
    "09_feed_forward": ("05_transformer_block",),
    "11a_build_your_model": ("06_capstone_train_tiny_transformer", "11_build_and_train"),
    "11b_train_your_model": ("11_build_and_train",),
    "12_read_your_model": ("06_capstone_train_tiny_transformer",),
    "13a_what_generation_recomputes": ("13_kv_cache_and_gqa",),
    "13b_kv_cache": ("13_kv_cache_and_gqa",),
    "13c_grouped_query_attention": ("13_kv_cache_and_gqa",),
    "15a_sliding_window": ("15_sliding_window",),
    "15b_attention_sinks": ("15_sliding_window",),
    "16a_interpolation_and_ntk": ("16_longer_than_trained",),
    "16b_yarn_compared": ("16_longer_than_trained",),
    "17a_online_softmax": ("17_tiled_attention",),
    "17b_tiled_memory_and_backward": ("17_tiled_attention",),
}

__all__ = [
    "Bug", "Case", "Exercise", "Verdict", "run", "all_exercises", "by_name", "lesson_file",
    "lesson_key", "lesson_label", "former_files", "LESSONS", "FORMER",
]  # fmt: skip


def _key_of(stem: str, keys) -> str | None:
    """The key that `stem` is, or is a copy of ("05_encoder_decoder-Copy1",
    "05_encoder_decoder (1)")."""
    found = [k for k in keys if stem == k or (stem.startswith(k) and stem[len(k)] in "- ")]
    return max(found, key=len, default=None)


def lesson_key(stem: str) -> str | None:
    """The key of lesson notebook `stem` (a key of LESSONS: the stem itself, or the lesson a
    copy such as "05_encoder_decoder-Copy1" was made from); None for a notebook that is no
    lesson of these, an earlier lesson's file among them."""
    return _key_of(stem, LESSONS)


def _shortest(paths) -> Path | None:
    return min(paths, key=lambda p: (len(p.name), p.name), default=None)


def lesson_file(folder, key: str) -> Path | None:
    """The notebook in `folder` that holds lesson `key`'s exercises, None when there is none.
    Of several (a lesson and a copy of it), the shortest name: the lesson itself."""
    if key not in LESSONS:
        raise ValueError(f"key: expected one of {tuple(LESSONS)}, got {key!r}")
    return _shortest(p for p in Path(folder).glob("*.ipynb") if lesson_key(p.stem) == key)


def former_files(folder, key: str) -> list[Path]:
    """The earlier notebooks in `folder` that lesson `key` replaced (FORMER), oldest first."""
    if key not in LESSONS:
        raise ValueError(f"key: expected one of {tuple(LESSONS)}, got {key!r}")
    found = []
    for stem in FORMER.get(key, ()):
        path = _shortest(p for p in Path(folder).glob("*.ipynb") if _key_of(p.stem, [stem]))
        if path is not None:
            found.append(path)
    return found


def lesson_label(key: str) -> str:
    """How messages name lesson `key`: by its number, "05" (a lesson split in two: "02a")."""
    return key.split("_")[0]


def all_exercises() -> list[Exercise]:
    """Every exercise of every lesson, in course order."""
    found = []
    for module in LESSONS.values():
        found.extend(importlib.import_module(f"course_lib.exercises.{module}").EXERCISES)
    return found


def by_name(name: str) -> Exercise:
    """The exercise whose function is called name (say "attention")."""
    for exercise in all_exercises():
        if exercise.name == name:
            return exercise
    names = ", ".join(e.name for e in all_exercises())
    raise ValueError(f"name: expected one of {names}; got {name!r}")
