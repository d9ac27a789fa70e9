"""Render lessons to static HTML for reading without a kernel (`make html` writes site/).

Usage: python -m tools.build_site OUT_DIR NOTEBOOK...

Each explorer still responds: the build runs it through the settings it lists
(tools/static_explorers.py) and the page switches between those pictures with a few lines of
JavaScript from site_template/explorers.js, inlined. Each concept check shows its question
with the answer folded away. Links between lessons point at the rendered pages, and
index.html lists them in order.

The pages load no JavaScript from anywhere: the only script is the inlined one above, and
formulas are converted from TeX to MathML here (latex2mathml), which browsers draw natively,
instead of nbconvert's MathJax from a CDN.
"""

import html
import re
import sys
from pathlib import Path

import nbformat
from latex2mathml.converter import convert
from nbconvert import HTMLExporter

from course_lib import widgets
from tools.static_explorers import explorer_figure

LESSON_LINK = re.compile(r'href="(\d\d[a-z]?_[\w-]+)\.ipynb(#[^"]*)?"')
TEMPLATE = Path(__file__).resolve().parent / "site_template" / "course_site.html.j2"
CODE = re.compile(r"(```.*?```|`[^`\n]*`)", re.S)  # left as they are: no math in code
MATH = re.compile(r"\$\$(.+?)\$\$|\$([^$\n]+?)\$", re.S)
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
EXPLORER_REPR = re.compile(r"^(\w+Explorer)\(controls: ")
SCRIPT = (Path(__file__).resolve().parent / "site_template" / "explorers.js").read_text()
# explorers a lesson builds from its own live state: the static page shows the same explorer
# built as a learner would without that state, and says so
STAND_INS = {
    "TrainedHeadsExplorer": "It shows the course's stand-in, lesson 11b's run with the course's "
    "solutions; the notebook shows the model you trained in lesson 11b. Typing your own line "
    "needs the notebook.",
    "KnockoutExplorer": "It shows the course's stand-in for lesson 11b's run, its lines written "
    "by the course's generate; the notebook shows your model and your generate.",
    "NextTokenExplorer": "It shows a first model built from the course's pieces (seed 0); the "
    "notebook shows the one you trained from yours.",
    "CrossAttentionExplorer": "It shows the course's model, trained with the course's pieces "
    "(seed 0); the notebook shows the model you trained with yours, every recorded step and "
    "all four sentences.",
}


def math_to_mathml(markdown: str) -> str:
    """Replace $$display$$ and $inline$ TeX outside code with MathML elements."""

    def one(match: re.Match) -> str:
        display = match[1] is not None
        tex = (match[1] if display else match[2]).strip()
        mathml = convert(tex, display="block" if display else "inline")
        # HTML knows <math> without a namespace, and nbconvert's re-serialisation of headings
        # would turn a namespaced one into <ns0:math>, which no browser draws
        mathml = mathml.replace(' xmlns="http://www.w3.org/1998/Math/MathML"', "")
        return f"\n\n{mathml}\n\n" if display else mathml

    pieces = CODE.split(markdown)  # odd pieces are code
    return "".join(p if i % 2 else MATH.sub(one, p) for i, p in enumerate(pieces))


def playable_explorers(nb, stem: str) -> int:
    """Replace each explorer's stored picture with its static, playable stand-in; count them."""
    count = 0
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            found = EXPLORER_REPR.match("".join(data.get("text/plain", "")))
            if WIDGET_VIEW not in data or not found:
                continue
            name = found[1]
            explorer = getattr(widgets, name)()
            count += 1
            output["data"] = {
                "text/html": explorer_figure(explorer, f"{stem}-{count}", STAND_INS.get(name, ""))
            }
    return count


def render(notebook: Path) -> str:
    """One lesson as a standalone HTML page, its links to other lessons made .html."""
    nb = nbformat.read(notebook, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = math_to_mathml(cell.source)
    explorers = playable_explorers(nb, notebook.stem)
    body, _ = HTMLExporter(template_file=str(TEMPLATE)).from_notebook_node(nb)
    if explorers:
        body = body.replace("</body>", f"<script>\n{SCRIPT}</script>\n</body>", 1)
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
        # a list without numbers of its own: each name carries its lesson's, and two lessons
        # can share one (05_encoder_decoder, 05_transformer_block)
        f"<h1>Transformer course: the lessons</h1>\n<ul>\n{items}\n</ul>\n",
        encoding="utf-8",
    )
    return pages


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    for page in build(Path(sys.argv[1]), [Path(name) for name in sys.argv[2:]]):
        print(page)
