"""Write lesson 12's stand-in, data/checkpoints/lesson11-stand-in.pt: the file lesson 11b saves
when it runs with the course's solutions (course_lib.capstone).

    python -m tools.lesson11_stand_in            # data/checkpoints/lesson11-stand-in.pt
    python -m tools.lesson11_stand_in OUT.pt     # the same run, written to OUT.pt

`python -m course_lib.train` runs it after the trained variants, with every other shipped file.

It runs lesson 11b top to bottom in a fresh kernel, on one thread, in a temporary copy of the
lessons (lesson 11b reads the earlier lessons' solutions there, 11a's MyTransformer among them,
as a learner's workspace holds their own), and copies the my_model_11.pt it saved. About a
minute and a half.
"""

import argparse
import os
import shutil
import tempfile
from pathlib import Path

from course_lib import capstone
from course_lib.paths import LESSONS_DIR
from tools.run_notebooks import execute

LESSON = "11b_train_your_model.ipynb"


def build(lessons: Path = LESSONS_DIR, target: Path = capstone.STAND_IN) -> Path:
    """Run lesson 11b in a copy of `lessons` and copy the run it saved to `target`."""
    os.environ["OMP_NUM_THREADS"] = "1"  # the kernel inherits it: the run of make test
    with tempfile.TemporaryDirectory() as folder:
        for notebook in Path(lessons).glob("*.ipynb"):
            shutil.copy(notebook, folder)
        execute(Path(folder) / LESSON)
        shutil.copy(Path(folder) / capstone.MODEL_FILE, target)
    return target


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Run lesson 11b and keep its run as the stand-in.")
    parser.add_argument("target", nargs="?", type=Path, default=capstone.STAND_IN,
                        help="where to write it (default: the shipped stand-in)")  # fmt: skip
    print(f"wrote {build(target=parser.parse_args().target)}")
