"""The run-time budget of every lesson: what one top-to-bottom run of its cells may take.

A lesson is one sitting for the learner and one CI step for the instructor, so its cells
together may take at most 20 s on the course's 2-core machines, the capstone (which trains a
model live) 60 s. The root conftest.py sums nbval's recorded call durations per notebook and,
under `pytest --lesson-budget` (`make test` passes it), fails the run when a lesson is over.
"""

LESSON_S = 20.0
CAPSTONE_S = 60.0
# the capstone's lesson that trains the learner's own model live (11a, which builds it, and
# 12_read_your_model, which reads it, train nothing and keep a lesson's budget)
CAPSTONES = ("11b_train_your_model",)


def budget(notebook: str) -> float:
    """Seconds a notebook's cells may take together: the capstone's, or a lesson's."""
    return CAPSTONE_S if any(name in notebook for name in CAPSTONES) else LESSON_S


def over_budget(durations: dict[str, float]) -> list[str]:
    """One line per notebook whose summed cell time is over its budget (none: all within)."""
    return [
        f"{name}: {seconds:.1f} s of cells, budget {budget(name):.0f} s"
        for name, seconds in sorted(durations.items())
        if seconds > budget(name)
    ]
