"""The folder the browser test's JupyterLab serves: what a learner meets first."""

import shutil
from pathlib import Path

import nbformat

from course_lib.exercises.stub import stub_source
from course_lib.workspace import prepare

# A learner's attention with a classic slip, the softmax over the queries instead of the
# keys: lesson 02b's checker must say TRY AGAIN, and its explorer, which runs the learner's
# function, must say DIFFERS in the page. Later lessons take it through earlier_work and must
# still run to the end.
SLIPPED_LESSON, SLIPPED_EXERCISE = "02b_attention_in_batches.ipynb", "attention"
LEARNER_SLIP = """def attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-2)  # the slip: over the queries
    return weights @ v, weights"""


def write_learners_folder(root: Path, notebooks: Path) -> None:
    """The workspace copies, lesson 02b with the slip, and the course's lessons in course/."""
    prepare(notebooks, root)
    path = root / SLIPPED_LESSON
    notebook = nbformat.read(path, as_version=4)
    stub = stub_source(SLIPPED_EXERCISE).splitlines()[-1].strip()  # the raise line
    (cell,) = [c for c in notebook.cells if c.cell_type == "code" and stub in c.source]
    cell.source = LEARNER_SLIP
    nbformat.write(notebook, path)
    shutil.copytree(notebooks, root / "course", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
