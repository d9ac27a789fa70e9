"""Render lessons to static HTML for reading without a kernel (`make html` writes site/).

Usage: python tools/build_site.py OUT_DIR NOTEBOOK...

Each explorer shows the PNG of its starting state from its display bundle (nbconvert skips
the widget view when a notebook stores no widget state, which tools/run_notebooks.py ensures),
and each concept check shows its question with the answer folded away. Links between
lessons point at the rendered pages, and index.html lists them in order.
"""

import html
import re
import sys
from pathlib import Path

from nbconvert import HTMLExporter

LESSON_LINK = re.compile(r'href="(\d\d_[\w-]+)\.ipynb(#[^"]*)?"')


def render(notebook: Path) -> str:
    """One lesson as a standalone HTML page, its links to other lessons made .html."""
    body, _ = HTMLExporter(template_name="lab").from_filename(str(notebook))
    return LESSON_LINK.sub(lambda m: f'href="{m[1]}.html{m[2] or ""}"', body)


def build(out: Path, notebooks: list[Path]) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    pages = []
    for notebook in sorted(notebooks):
        page = out / f"{notebook.stem}.html"
        page.write_text(render(notebook), encoding="utf-8")
        pages.append(page)
    items = "\n".join(
        f'<li><a href="{p.name}">{html.escape(p.stem.replace("_", " "))}</a></li>' for p in pages
    )
    (out / "index.html").write_text(
        "<!DOCTYPE html>\n<meta charset='utf-8'>\n<title>Transformer course</title>\n"
        f"<h1>Transformer course: the lessons</h1>\n<ol start='0'>\n{items}\n</ol>\n",
        encoding="utf-8",
    )
    return pages


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    for page in build(Path(sys.argv[1]), [Path(name) for name in sys.argv[2:]]):
        print(page)
