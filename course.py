"""The course's one entry point, on Linux, macOS and Windows alike; `make` is its shorthand.

    python course.py lab     # set everything up on first use, then open the course in JupyterLab
    python course.py test    # set everything up on first use, then run every test and notebook

(`py course.py ...` on Windows, `python3 course.py ...` where there is no `python`;
`python course.py --help` lists every command.) It needs only Python's standard library: it
creates .venv with a Python 3.11 (the one running it, or else one it finds), installs
requirements.txt into it, again only when requirements.txt or pyproject.toml change, and runs
everything else with .venv's Python. Each command is a list of arguments, never a shell
string, so a course folder whose path has spaces works. The Makefile's targets call this file.
"""

import argparse
import hashlib
import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parent
PINNED_PYTHON = (3, 11)  # requirements.txt's stack is verified on this one (torch's CPU wheel)
PINS = ("requirements.txt", "pyproject.toml")  # a change in either reinstalls
FIRST_LESSON = "00_start_here.ipynb"

NBVAL = ["--nbval", "--nbval-current-env", "--nbval-cell-timeout=300",
         "--nbval-sanitize-with", "tests/sanitize.cfg"]  # fmt: skip
# Kernel paths. torch picks its vectorised math kernels by CPU (AVX-512, AVX2, ARM's, or the
# generic ones) and MKL picks its own; each rounds differently, so every stored output and
# every claim must hold on all of them. `test` runs everything on this CPU's own path, then
# unit tests and notebooks again on torch's generic path; `portable` adds AVX2 and other
# thread counts. The kernels nbval starts inherit these variables.
GENERIC = {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2"}
AVX2 = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
ONE_THREAD = {"OMP_NUM_THREADS": "1"}
UNIT_AND_NBVAL = ["-m", "pytest", "-rs", "-n", "2", "--dist", "loadfile",
                  "--ignore=tests/browser", "tests", *NBVAL, "notebooks"]  # fmt: skip
# The browser test needs none of the notebook, property-test or parallel plugins, nor the
# unit tests' conftest (which imports torch): without them pytest starts in 1 s, not 12 s.
BROWSER_PYTEST = ["-m", "pytest", "-rs", "--confcutdir=tests/browser", "-p", "no:nbval",
                  "-p", "no:hypothesispytest", "-p", "no:xdist", "-p", "no:xdist.looponfail",
                  "-p", "no:anyio"]  # fmt: skip
LINTED = ["course.py", "course_lib", "course_server", "tests", "tools", "notebooks", "deploy",
          "setup.py", "benchmarks"]  # fmt: skip


def windows() -> bool:
    return sys.platform == "win32"


def venv_python(venv: Path) -> Path:
    """The Python inside a virtual environment: Scripts\\python.exe on Windows, bin/python else."""
    return venv / "Scripts" / "python.exe" if windows() else venv / "bin" / "python"


def probe(command: list[str]) -> str | None:
    """The path of the Python that `command` starts, if it starts and is the pinned version."""
    check = f"import sys; print(sys.executable if sys.version_info[:2] == {PINNED_PYTHON} else '')"
    try:
        done = subprocess.run([*command, "-c", check], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (done.stdout.strip() or None) if done.returncode == 0 else None


def interpreter() -> str:
    """The Python that creates .venv: the one running this file when it is 3.11; else a 3.11
    found as `python3.11` (or on Windows through the `py -3.11` launcher); else this one."""
    if sys.version_info[:2] == PINNED_PYTHON:
        return sys.executable
    name = ["py", "-3.11"] if windows() else ["python3.11"]
    found = shutil.which(name[0])
    chosen = probe([found, *name[1:]]) if found else None
    if chosen:
        return chosen
    here = ".".join(map(str, sys.version_info[:2]))
    print(f"course: no Python 3.11 found ({shlex.join(name)}), so .venv gets this Python {here};"
          " the pinned stack is verified on 3.11 only", file=sys.stderr)  # fmt: skip
    return sys.executable


def shown(command: list[str], env: dict[str, str] | None = None) -> str:
    """A command as a terminal line, paths inside the course made relative (for the log only)."""
    inside = str(ROOT) + os.sep
    words = [os.path.relpath(a, ROOT) if a.startswith(inside) else a for a in command]
    line = subprocess.list2cmdline(words) if windows() else shlex.join(words)
    return " ".join([*(f"{k}={v}" for k, v in (env or {}).items()), line])


def run(command: list[str], env: dict[str, str] | None = None, output=None, cwd: Path = ROOT):
    """Run one command in the course folder, `env` added to this environment; raise
    CalledProcessError if it fails. `output`: a binary file for its stdout and stderr, else ours."""
    line = shown(command, env) + "\n"
    if output is None:
        print(line, end="", flush=True)
    else:
        output.write(line.encode())
        output.flush()
    subprocess.run(command, cwd=cwd, env={**os.environ, **(env or {})}, check=True,
                   stdout=output, stderr=subprocess.STDOUT if output else None)  # fmt: skip


def pins_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for name in PINS:
        digest.update((root / name).read_bytes())
    return digest.hexdigest()


def ensure_venv(root: Path = ROOT) -> Path:
    """Create .venv if it is missing, install the pins if they changed since the last install
    (the digest in .venv/.installed); return .venv's Python."""
    venv = root / ".venv"
    python, stamp = venv_python(venv), venv / ".installed"
    wanted = pins_digest(root)
    if not python.exists():
        run([interpreter(), "-m", "venv", str(venv)], cwd=root)
    elif stamp.is_file() and stamp.read_text() == wanted:
        return python
    print("course: installing requirements.txt into .venv (minutes the first time)", flush=True)
    run([str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q",
         "-r", "requirements.txt"], cwd=root)  # fmt: skip
    stamp.write_text(wanted)
    return python


def install_lab_overrides(venv: Path) -> None:
    """The course's JupyterLab defaults (no news or update checks: nothing reaches the internet
    and no prompt covers a lesson), where JupyterLab reads application-wide overrides."""
    source = ROOT / "tools" / "jupyterlab" / "overrides.json"
    target = venv / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    if not target.is_file() or target.read_bytes() != source.read_bytes():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)


def running_as_root() -> bool:
    return not windows() and os.geteuid() == 0


def lab_command(python: Path, port: int, token: str, root: Path = ROOT) -> list[str]:
    """JupyterLab over workspace/ on `port` with `token`, with the settings every course server
    reads from one file (course_server/jupyter_server_config.py: 127.0.0.1 only, no news or
    update checks, TCP_NODELAY on kernel websockets)."""
    if not token:
        raise ValueError("token: expected a non-empty string (an empty one lets anyone in)")
    config = root / "course_server" / "jupyter_server_config.py"
    command = [str(python), "-m", "jupyterlab", "--no-browser", f"--config={config}",
               f"--ServerApp.port={port}", f"--IdentityProvider.token={token}",
               f"--ServerApp.root_dir={root / 'workspace'}",
               f"--LabApp.default_url=/lab/tree/{FIRST_LESSON}"]  # fmt: skip
    return [*command, "--allow-root"] if running_as_root() else command


def lab(python: Path, port: int, token: str | None) -> int:
    """Serve workspace/ until the server stops (Ctrl-C, then `y`, stops it)."""
    token = token if token is not None else secrets.token_hex(24)
    command = lab_command(python, port, token)
    print(f"JupyterLab on http://127.0.0.1:{port}/lab/tree/{FIRST_LESSON}?token={token}",
          flush=True)  # fmt: skip
    server = subprocess.Popen(command, cwd=ROOT)
    while True:
        try:
            return server.wait()
        except KeyboardInterrupt:  # the server got it too, and asks or stops by itself
            continue


class Step:
    """One command: arguments after .venv's Python, and variables added to the environment."""

    def __init__(self, python: Path, *args: str, env: dict[str, str] | None = None):
        self.command, self.env = [str(python), *args], env

    def run(self, output=None) -> None:
        run(self.command, self.env, output)


def steps(python: Path) -> dict[str, list[Step]]:
    """Every command but lab, test and venv, as the steps it runs."""
    lessons = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "notebooks").glob("*.ipynb"))
    numbered = [p for p in lessons if re.match(r"\d\d[a-z]?_", Path(p).name)]
    linted = [p for p in LINTED if (ROOT / p).exists()]

    def step(*args, env=None):
        return Step(python, *args, env=env)

    return {
        "workspace": [step("-m", "course_lib.workspace", "notebooks", "workspace")],
        "learner": [step("-m", "tools.learner_copies")],
        "lint": [step("-m", "ruff", "check", *linted),
                 step("-m", "ruff", "format", "--check", *linted)],
        # unit tests and notebooks on two workers, whole files each (one notebook's cells stay
        # in one kernel), every lesson within its budget (tools/lesson_budget.py); one thread
        # per kernel: beside the other worker a second torch thread only waits for a core
        "native": [step(*UNIT_AND_NBVAL, "-m", "not retrains and not wheel", "--lesson-budget",
                        env=ONE_THREAD)],
        # on torch's generic path, what rounds differently there (marked `rounding` by
        # conftest.py), then the static site built and opened from disk
        "generic-then-site": [
            step("-m", "pytest", "-rs", "-p", "no:xdist", "--ignore=tests/browser", "tests",
                 *NBVAL, "notebooks", "-m", "rounding and not retrains", env=GENERIC),
            step(*BROWSER_PYTEST, "tests/browser/test_static_site.py"),
        ],
        # every lesson as a learner first meets it (the workspace copy), in JupyterLab
        "browser-lessons": [step(*BROWSER_PYTEST, "tests/browser/test_lessons_in_jupyterlab.py",
                                 env=ONE_THREAD)],
        "quick": [step("-m", "pytest", "-q", "-n", "2", "--dist", "worksteal", "-p", "no:nbval",
                       "--ignore=tests/browser", "--ignore=tests/class",
                       "-m", "not slow and not retrains and not explorers", "tests")],
        "portable": [
            step("-m", "pytest", "-rs", "-n", "2", "--dist", "loadfile", "--ignore=tests/browser",
                 "-m", "retrains", "tests"),
            step("-m", "pytest", "-rs", "-n", "2", "--dist", "loadfile", "--ignore=tests/browser",
                 "-m", "not rounding and not path_independent and not retrains and not wheel",
                 "tests", env=GENERIC),
            step(*UNIT_AND_NBVAL, "-m", "not path_independent and not wheel", env=AVX2),
            step("-m", "pytest", "-rs", "-p", "no:xdist", "--durations=4", "-m", "wheel",
                 "tests/test_wheel.py"),
            step("-m", "pytest", "-rs", "-n", "2", "--dist", "loadfile", *NBVAL, "notebooks",
                 env={"OMP_NUM_THREADS": "4"}),
        ],
        "margins": [step("-m", "tools.claim_margins")],
        "unit": [step("-m", "pytest", "tests", "--ignore=tests/browser", "-m", "not wheel")],
        "nbval": [step("-m", "pytest", *NBVAL, "notebooks")],
        "notebooks": [step("-m", "tools.run_notebooks", *lessons)],
        "html": [step("-m", "tools.build_site", "site", *numbered)],
        "browser": [step(*BROWSER_PYTEST, "tests/browser")],
        "bench": [step("-m", "benchmarks")],
    }  # fmt: skip


def run_lanes(lanes: dict[str, list[Step]]) -> int:
    """Run each lane's steps in order, the lanes at the same time; print each lane's output
    whole when it ends. Returns 0, or the exit code of a failed step."""

    def lane(name: str) -> tuple[int, bytes]:
        with tempfile.TemporaryFile() as output:
            code = 0
            try:
                for each in lanes[name]:
                    each.run(output)
            except subprocess.CalledProcessError as failed:
                code = failed.returncode
                output.write(f"course: {name} failed (exit code {code})\n".encode())
            output.seek(0)
            return code, output.read()

    codes = []
    with ThreadPoolExecutor(len(lanes)) as pool:
        for done in as_completed([pool.submit(lane, name) for name in lanes]):
            code, text = done.result()
            sys.stdout.buffer.write(text)
            sys.stdout.flush()
            codes.append(code)
    return next((code for code in codes if code), 0)


def test(python: Path) -> int:
    """lint; unit tests and notebooks on this CPU's path; then, at the same time, each on one
    core, the generic path and the site, and the lessons in JupyterLab (browser-lessons)."""
    table = steps(python)
    for each in [*table["lint"], *table["native"]]:
        each.run()
    return run_lanes({name: table[name] for name in ("generic-then-site", "browser-lessons")})


HELP = {
    "lab": "set up on first use, write workspace/, serve JupyterLab on 127.0.0.1 with a token",
    "test": "set up on first use, then lint, every test and every notebook (CI runs it)",
    "venv": "create .venv and install the pins; reinstall only when they change",
    "workspace": "copy new lessons into workspace/ (never overwrites)",
    "learner": "write learner/ (what the Colab links open) and every Colab link afresh",
    "quick": "the edit-test loop: unit and claim tests without the slow ones",
    "portable": "what `test` leaves out: retraining checks, other kernel paths, the wheel",
    "unit": "unit tests only",
    "nbval": "every notebook under strict nbval only",
    "notebooks": "re-execute every notebook in place",
    "lint": "ruff check and ruff format --check",
    "html": "every lesson as a static page in site/",
    "browser": "only the browser tests (needs /usr/bin/chromium)",
    "bench": "the performance figures, into benchmarks/RESULTS.md",
    "margins": "every claim test's measured values on each kernel path",
    "native": "test's first part: unit tests and notebooks on this CPU's kernel path",
    "generic-then-site": "test's parallel lane: the generic kernel path, then the static site",
    "browser-lessons": "test's other parallel lane: every lesson in JupyterLab under Chromium",
}


def token_argument(text: str) -> str:
    if not text:
        raise argparse.ArgumentTypeError("an empty token would let anyone on this machine in")
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="course.py", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, text in HELP.items():
        sub = commands.add_parser(name, help=text, description=text)
        if name == "lab":
            sub.add_argument("--port", type=int, default=8888)
            sub.add_argument("--token", type=token_argument,
                             help="default: a fresh random one, printed with the URL")  # fmt: skip
    args = parser.parse_args(argv)
    try:
        python = ensure_venv()
        if args.command in ("lab", "test", "browser", "browser-lessons"):
            install_lab_overrides(ROOT / ".venv")
        if args.command == "venv":
            return 0
        if args.command == "lab":
            for each in steps(python)["workspace"]:
                each.run()
            return lab(python, args.port, args.token)
        if args.command == "test":
            return test(python)
        for each in steps(python)[args.command]:
            each.run()
    except subprocess.CalledProcessError as failed:
        print(f"course: {shown(failed.cmd)} failed (exit code {failed.returncode})",
              file=sys.stderr)  # fmt: skip
        return failed.returncode
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
