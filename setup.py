"""The one build step pyproject.toml cannot say: a wheel carries the course's files.

The repository keeps data/ and notebooks/ at its top, beside course_lib/; a wheel installs only
packages, so its build copies every file in data/ and every lesson into course_lib/_files/,
where course_lib/paths.py looks first. An editable install copies nothing: it reads the
repository's own folders. Everything else about the package is in pyproject.toml.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
INSTALLED = Path("course_lib", "_files")  # course_lib/paths.py's INSTALLED, inside the package


def carried(root: Path = ROOT) -> list[Path]:
    """Every file the wheel carries besides the code, relative to root: data/'s files (texts,
    vocabulary, checkpoints, tables), whatever their kind, and every lesson in notebooks/."""
    data = [p for p in (root / "data").rglob("*") if p.is_file()]
    files = [p.relative_to(root) for p in [*data, *(root / "notebooks").glob("*.ipynb")]]
    return sorted(p for p in files if not any(part.startswith(".") for part in p.parts))


class BuildWithCourseFiles(build_py):
    """build_py, then data/ and the lessons copied into the package (not for editable installs)."""

    def run(self):
        super().run()
        if self.editable_mode:
            return
        files = carried()
        if {path.parts[0] for path in files} != {"data", "notebooks"}:
            raise RuntimeError(f"no data/ or no lessons in {ROOT}: build from the repository")
        target = Path(self.build_lib, INSTALLED)
        shutil.rmtree(target, ignore_errors=True)  # a file gone from data/ leaves the wheel too
        for path in files:
            self.mkpath(str((target / path).parent))
            self.copy_file(str(ROOT / path), str(target / path))


if __name__ == "__main__":  # as setuptools' build backend runs it; a test imports carried()
    setup(cmdclass={"build_py": BuildWithCourseFiles})
