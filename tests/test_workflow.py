"""The CI workflow a fork gets (.github/workflows/ci.yml) and tools/readme_commands.py: every
command the workflow runs is one the README gives, and Linux runs the README's test command,
read from the README when CI runs, so changing that command in the README changes CI's."""

import sys
from pathlib import Path

import pytest
import yaml

from tools import readme_commands

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "ci.yml"

pytestmark = pytest.mark.path_independent


@pytest.fixture(scope="module")
def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))


def steps_on(job: dict, system: str) -> list[dict]:
    """The steps a runner of `system` (runner.os: Linux, macOS, Windows) takes."""
    wanted = {"Linux": "runner.os == 'Linux'", "other": "runner.os != 'Linux'"}
    other = "Linux" if system != "Linux" else "other"
    return [step for step in job["steps"] if step.get("if") != wanted[other]]


def test_the_readme_gives_a_lab_and_a_test_command():
    given = readme_commands.commands(readme_commands.README.read_text(encoding="utf-8"))
    assert {"lab", "test"} <= set(given), given


def test_linux_macos_on_apple_silicon_and_windows_in_one_matrix(workflow):
    (job,) = workflow["jobs"].values()
    runners = [entry["runner"] for entry in job["strategy"]["matrix"]["include"]]
    assert [r.split("-")[0] for r in runners] == ["ubuntu", "macos", "windows"]
    assert "intel" not in runners[1] and runners[1] not in ("macos-13", "macos-12")  # arm64
    assert job["strategy"]["fail-fast"] is False  # one system failing says nothing of others
    assert workflow["concurrency"]["group"] and workflow["concurrency"]["cancel-in-progress"]
    (setup,) = [s for s in job["steps"] if s.get("uses", "").startswith("actions/setup-python")]
    assert setup["with"]["cache"] == "pip" and setup["with"]["python-version"] == "3.11"
    assert "requirements.txt" in setup["with"]["cache-dependency-path"]


def test_linux_runs_the_readmes_test_command_and_the_others_compare_no_outputs(workflow):
    (job,) = workflow["jobs"].values()
    linux = [s["run"] for s in steps_on(job, "Linux") if "run" in s]
    assert linux == ["python -m tools.readme_commands test"]
    others = [s["run"] for s in steps_on(job, "macOS") if "run" in s]
    assert others[0] == "python -m pip install -r requirements.txt"
    assert "--ignore=tests/browser" in others[1] and " tests" in others[1]  # the unit tests
    assert "--nbval-lax" in others[2] and others[2].endswith(" notebooks")  # every lesson run
    assert "--nbval " not in others[2]  # strict comparison waits for a run there that passes


def test_every_command_the_workflow_runs_is_one_the_readme_gives(workflow):
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for job in workflow["jobs"].values():
        for step in job["steps"]:
            for line in step.get("run", "").splitlines():
                assert f"`{line.strip()}`" in readme, f"README does not give `{line.strip()}`"


def test_the_readme_command_runs_from_the_readmes_folder_with_its_exit_status(tmp_path, capfd):
    readme = tmp_path / "README.md"
    command = f'"{sys.executable}" -c "import os, sys; print(os.getcwd()); sys.exit(3)" test'
    readme.write_text(f"# Course\n\n```bash\nmake lab  # open it\n{command}  # check it\n```\n")
    assert readme_commands.commands(readme.read_text()) == {"lab": "make lab", "test": command}
    assert readme_commands.main(["test"], readme) == 3
    out = capfd.readouterr().out
    assert out.startswith(f"$ {command}\n") and str(tmp_path) in out
    assert readme_commands.main(["bench"], readme) == 2  # not a README command: said, not run
