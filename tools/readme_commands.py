"""The README's commands, read from its first shell block, so CI runs what a learner is told to.

Usage: python -m tools.readme_commands NAME   (NAME: lab or test)

Prints the README's command whose last word is NAME (`make test`, or whatever the README says
today) and runs it from the repository root; exits with its exit status. The CI workflow
(.github/workflows/ci.yml) runs the test command this way.
"""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SHELL_BLOCK = re.compile(r"^```(?:bash|sh|shell|console)\n(.*?)^```", re.M | re.S)


def commands(readme: str) -> dict[str, str]:
    """{last word: command} for the commands of the first shell block, comments left out."""
    block = SHELL_BLOCK.search(readme)
    if block is None:
        raise ValueError("README: expected a ```bash block with the course's commands")
    found = {}
    for line in block[1].splitlines():
        command = line.split("#", 1)[0].strip()
        if command:
            found.setdefault(command.split()[-1], command)
    return found


def main(argv: list[str], readme: Path = README) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    known = commands(readme.read_text(encoding="utf-8"))
    if argv[0] not in known:
        print(f"{readme.name} has no {argv[0]!r} command; it has {sorted(known)}", file=sys.stderr)
        return 2
    print(f"$ {known[argv[0]]}", flush=True)
    return subprocess.run(known[argv[0]], shell=True, cwd=readme.parent).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
