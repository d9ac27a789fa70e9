"""Re-execute lesson notebooks in place, top to bottom, each in a fresh kernel (`make notebooks`).

Deterministic output: no timing metadata, no saved widget state, widget model ids
renumbered in order, and consecutive prints to one stream stored as one output (how the
kernel happened to flush them varies from run to run), so running it twice leaves
`git diff` empty. `execute` is the course's one way to run a notebook: `make notebooks` and
`make bench`'s lesson run times (benchmarks/notebooks.py) both use it.
"""

import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient


def renumber_widget_ids(notebook) -> None:
    ids = {}
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            view = output.get("data", {}).get("application/vnd.jupyter.widget-view+json")
            if view:
                model_id = view["model_id"]
                view["model_id"] = ids.setdefault(model_id, f"{len(ids) + 1:032x}")


def coalesce_streams(notebook) -> None:
    for cell in notebook.cells:
        merged = []
        for output in cell.get("outputs", []):
            last = merged[-1] if merged else None
            if (
                last is not None
                and output.output_type == last.output_type == "stream"
                and output.name == last.name
            ):
                last.text += output.text
            else:
                merged.append(output)
        if "outputs" in cell:
            cell.outputs = merged


def execute(path: Path, timeout: float = 600) -> tuple[nbformat.NotebookNode, float]:
    """Run the notebook at `path` top to bottom in a fresh python3 kernel, in its own folder.

    Returns the executed notebook (no timing metadata, no widget state) and the seconds from
    the kernel being ready to the end of the last code cell: kernel start and shutdown are
    left out. A cell that raises stops the run with nbclient's CellExecutionError.
    """
    if not timeout > 0:
        raise ValueError(f"timeout: expected seconds > 0, got {timeout!r}")
    notebook = nbformat.read(path, as_version=4)
    marks = {}
    client = NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(Path(path).parent)}},
        record_timing=False,
        store_widget_state=False,
        on_notebook_start=lambda **_: marks.update(start=time.perf_counter()),
        on_cell_executed=lambda **_: marks.update(end=time.perf_counter()),
    )
    client.execute()
    return notebook, marks.get("end", marks["start"]) - marks["start"]


def run(path: Path) -> float:
    """Execute the notebook at `path` and store it in place, deterministically; its seconds."""
    notebook, seconds = execute(path)
    renumber_widget_ids(notebook)
    coalesce_streams(notebook)
    notebook.metadata.pop("widgets", None)
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
    }
    nbformat.write(notebook, path)
    return seconds


if __name__ == "__main__":
    for name in sys.argv[1:]:
        print(f"{name}: {run(Path(name)):.1f} s")
