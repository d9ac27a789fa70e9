"""Every exercise of the course as data: one module of entries per lesson, on a shared core.

`core` holds the Exercise/Bug/Verdict types and `run`, which checks a learner's function and
returns a Verdict without printing. `lessonNN` holds lesson NN's entries in `EXERCISES`; a
lesson that shares its number with another is keyed by its full stem instead
(`lesson05_encoder_decoder`, beside `lesson05` for 05_transformer_block;
`lesson01_language_and_loss`, beside `lesson01` for 01_attention_qkv), and `lesson_key` /
`lesson_file` are the one rule that maps a notebook to its key and back.
`stub` writes and recognises the stub a learner's copy holds, and decides yours or the
course's (for the checkers, the explorers, course_lib.mywork, the workspace and nbgrader).
`course_lib.checks` turns each entry into the `check_<name>` a lesson calls, which prints.
"""

import importlib
from pathlib import Path

from course_lib.exercises.core import Bug, Case, Exercise, Verdict, run

# each lesson's key, in the order its notebook file sorts: a two-digit number, or a full stem
# where two lessons share the number
LESSONS = (
    "00", "01", "01_language_and_loss", "02", "03", "04", "05", "05_encoder_decoder", "06", "10",
    "11", "13", "14", "15", "16", "17",
)  # fmt: skip

__all__ = [
    "Bug", "Case", "Exercise", "Verdict", "run", "all_exercises", "by_name", "lesson_file",
    "lesson_key", "LESSONS",
]  # fmt: skip


def lesson_key(stem: str) -> str | None:
    """The key that lesson notebook `stem`'s exercises are filed under: a key of LESSONS that
    names a lesson whole where the stem starts with it ("05_encoder_decoder", and a copy such
    as "05_encoder_decoder-Copy1"), else its two-digit number ("05_transformer_block" ->
    "05"); None for a notebook that is no lesson of these."""
    whole = [key for key in LESSONS if len(key) > 2 and stem.startswith(key)]
    if whole:
        return max(whole, key=len)
    number = stem[:2]
    if stem[2:3] == "_" and number in LESSONS:
        return number
    return None


def lesson_file(folder, key: str) -> Path | None:
    """The notebook in `folder` that holds lesson `key`'s exercises, None when there is none:
    for "05" that is 05_transformer_block.ipynb, never 05_encoder_decoder.ipynb, whose key is
    its stem. Of several (a lesson and a copy of it), the shortest name: the lesson itself."""
    if key not in LESSONS:
        raise ValueError(f"key: expected one of {LESSONS}, got {key!r}")
    found = [p for p in Path(folder).glob(f"{key[:2]}_*.ipynb") if lesson_key(p.stem) == key]
    return min(found, key=lambda p: (len(p.name), p.name), default=None)


def all_exercises() -> list[Exercise]:
    """Every exercise of every lesson, in course order."""
    found = []
    for lesson in LESSONS:
        module = importlib.import_module(f"course_lib.exercises.lesson{lesson}")
        found.extend(module.EXERCISES)
    return found


def by_name(name: str) -> Exercise:
    """The exercise whose function is called name (say "attention")."""
    for exercise in all_exercises():
        if exercise.name == name:
            return exercise
    names = ", ".join(e.name for e in all_exercises())
    raise ValueError(f"name: expected one of {names}; got {name!r}")
