"""Where the course's files are: data/ (texts, vocabulary, checkpoints, measured tables) and the
lessons (notebooks/), the one rule every module that reads them follows.

In the repository (and an editable install) both sit at the top, beside `course_lib/`. A wheel
(`pip install .`, `pip install git+URL`, Colab) installs only the package's own folder, so its
build (setup.py) copies both into `course_lib/_files/`: there they are looked for first.
"""

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
INSTALLED = "_files"  # the wheel's folder for data/ and notebooks/, inside the package (setup.py)


def course_root(package: Path = PACKAGE) -> Path:
    """The folder holding data/ and notebooks/: inside an installed package, else the repository."""
    installed = Path(package) / INSTALLED
    return installed if installed.is_dir() else Path(package).parent


ROOT = course_root()
DATA_DIR = ROOT / "data"
LESSONS_DIR = ROOT / "notebooks"
