"""course.py, the course's one entry point: the same on Linux, macOS and Windows.

Windows and other Pythons are simulated by patching `sys.platform`, `sys.version_info`,
`shutil.which` and `os.geteuid`; the README's commands themselves run for real in
test_lab_server.py (the lab) and in CI (.ci/run runs the test command).
"""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import course
from tools import readme_commands

pytestmark = pytest.mark.path_independent

ROOT = Path(__file__).resolve().parents[1]
SPACED = Path("/home/ada/my courses/transformer course")


@pytest.fixture
def on_windows(monkeypatch):
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.delattr(course.os, "geteuid", raising=False)  # Windows has none


@pytest.fixture
def on_linux(monkeypatch):
    monkeypatch.setattr(sys, "platform", "linux")


# ---------------------------------------------------------------- the venv's layout


def test_the_venv_python_is_scripts_python_exe_on_windows(on_windows):
    assert course.venv_python(SPACED / ".venv").parts[-3:] == (".venv", "Scripts", "python.exe")


@pytest.mark.parametrize("platform", ["linux", "darwin"])
def test_the_venv_python_is_bin_python_on_linux_and_macos(monkeypatch, platform):
    monkeypatch.setattr(sys, "platform", platform)
    assert course.venv_python(SPACED / ".venv").parts[-3:] == (".venv", "bin", "python")


# ---------------------------------------------------------------- which Python makes .venv


def not_called(*args):
    raise AssertionError(f"not expected: {args}")


def test_a_python_3_11_makes_the_venv_itself(monkeypatch):
    monkeypatch.setattr(sys, "version_info", (3, 11, 9, "final", 0))
    monkeypatch.setattr(course.shutil, "which", not_called)
    assert course.interpreter() == sys.executable


def test_another_python_hands_over_to_python3_11_on_linux_and_macos(monkeypatch, on_linux):
    monkeypatch.setattr(sys, "version_info", (3, 13, 0, "final", 0))
    found = {"python3.11": "/usr/local/bin/python3.11"}
    monkeypatch.setattr(course.shutil, "which", found.get)
    probed = []
    monkeypatch.setattr(course, "probe", lambda command: probed.append(command) or command[0])
    assert course.interpreter() == "/usr/local/bin/python3.11"
    assert probed == [["/usr/local/bin/python3.11"]]


def test_another_python_hands_over_to_the_py_launcher_on_windows(monkeypatch, on_windows):
    monkeypatch.setattr(sys, "version_info", (3, 12, 1, "final", 0))
    found = {"py": r"C:\Windows\py.exe"}
    monkeypatch.setattr(course.shutil, "which", found.get)
    python311 = r"C:\Users\Ada Lovelace\AppData\Local\Programs\Python\Python311\python.exe"
    probed = []
    monkeypatch.setattr(course, "probe", lambda command: probed.append(command) or python311)
    assert course.interpreter() == python311
    assert probed == [[r"C:\Windows\py.exe", "-3.11"]]


@pytest.mark.parametrize("platform, launcher", [("linux", None), ("win32", r"C:\Windows\py.exe")])
def test_without_a_3_11_the_running_python_makes_it_and_says_so(
    monkeypatch, capsys, platform, launcher
):
    """No python3.11 on PATH, or a `py` launcher that knows no 3.11 (its probe fails)."""
    monkeypatch.setattr(sys, "platform", platform)
    monkeypatch.setattr(sys, "version_info", (3, 12, 1, "final", 0))
    monkeypatch.setattr(course.shutil, "which", lambda name: launcher)
    monkeypatch.setattr(course, "probe", lambda command: None)
    assert course.interpreter() == sys.executable
    assert "no Python 3.11 found" in capsys.readouterr().err


def test_the_probe_gives_the_path_of_a_3_11_and_nothing_for_a_missing_one():
    assert course.probe([sys.executable]) == sys.executable  # the tests run on 3.11
    assert course.probe([str(SPACED / "no-such-python")]) is None


# ---------------------------------------------------------------- the install stamp


@pytest.fixture
def course_folder(tmp_path, monkeypatch):
    """A course folder whose path has a space, with its pins; `ran` records course.run's
    commands, and creating the venv makes its Python."""
    root = tmp_path / "my course"
    root.mkdir()
    for name in course.PINS:
        (root / name).write_text(f"{name}, version 1\n")
    ran = []

    def run(command, env=None, output=None, cwd=course.ROOT):
        ran.append((command, cwd))
        if command[1:3] == ["-m", "venv"]:
            python = course.venv_python(Path(command[3]))
            python.parent.mkdir(parents=True)
            python.touch()

    monkeypatch.setattr(course, "run", run)
    monkeypatch.setattr(course, "interpreter", lambda: "/usr/bin/python3.11")
    return root, ran


@pytest.mark.parametrize("platform", ["linux", "win32"])
def test_the_venv_is_made_once_and_reinstalled_only_when_the_pins_change(
    monkeypatch, course_folder, platform
):
    monkeypatch.setattr(sys, "platform", platform)
    root, ran = course_folder
    python = course.ensure_venv(root)
    assert python == course.venv_python(root / ".venv")
    assert [command[1:3] for command, _ in ran] == [["-m", "venv"], ["-m", "pip"]]
    assert ran[0][0] == ["/usr/bin/python3.11", "-m", "venv", str(root / ".venv")]
    assert {cwd for _, cwd in ran} == {root}  # pip's `-r requirements.txt` and `-e .` are here

    ran.clear()
    course.ensure_venv(root)
    (root / "requirements.txt").touch()  # a checkout that leaves the pins as they were
    course.ensure_venv(root)
    assert ran == []

    (root / "pyproject.toml").write_text("pyproject.toml, version 2\n")
    course.ensure_venv(root)
    assert [command[1:3] for command, _ in ran] == [["-m", "pip"]]


def test_a_failed_install_is_tried_again_next_time(monkeypatch, course_folder):
    root, ran = course_folder
    failing = course.run

    def fail_pip(command, env=None, output=None, cwd=course.ROOT):
        failing(command, env, output, cwd)
        if command[1:3] == ["-m", "pip"]:
            raise subprocess.CalledProcessError(1, command)

    monkeypatch.setattr(course, "run", fail_pip)
    with pytest.raises(subprocess.CalledProcessError):
        course.ensure_venv(root)
    monkeypatch.setattr(course, "run", failing)
    course.ensure_venv(root)
    assert [command[1:3] for command, _ in ran] == [["-m", "venv"], ["-m", "pip"], ["-m", "pip"]]


# ---------------------------------------------------------------- the lab


def test_the_lab_uses_the_one_server_config_a_token_and_no_address_of_its_own(on_linux):
    command = course.lab_command(ROOT / ".venv" / "bin" / "python", 8890, "f00d")
    config = ROOT / "course_server" / "jupyter_server_config.py"
    assert command[1:4] == ["-m", "jupyterlab", "--no-browser"]
    assert f"--config={config}" in command
    assert "--IdentityProvider.token=f00d" in command and "--ServerApp.port=8890" in command
    assert "--LabApp.default_url=/lab/tree/00_start_here.ipynb" in command
    # the address is the config file's (127.0.0.1), set nowhere else
    assert not [arg for arg in command if re.match(r"--[\w.]*\bip=", arg)]
    assert re.search(r'^c\.\w+\.ip = "127\.0\.0\.1"$', config.read_text(), re.MULTILINE)


def test_the_lab_keeps_a_folder_with_spaces_in_one_argument_each(on_linux):
    command = course.lab_command(SPACED / ".venv" / "bin" / "python", 8888, "f00d", root=SPACED)
    assert command[0] == str(SPACED / ".venv" / "bin" / "python")
    assert f"--config={SPACED}/course_server/jupyter_server_config.py" in command
    assert f"--ServerApp.root_dir={SPACED}/workspace" in command


def test_the_lab_refuses_an_empty_token():
    with pytest.raises(ValueError, match="non-empty"):
        course.lab_command(Path("python"), 8888, "")
    with pytest.raises(SystemExit):  # before anything is installed
        course.main(["lab", "--token="])


@pytest.mark.parametrize("uid, flagged", [(0, True), (1000, False)])
def test_the_lab_allows_root_only_when_run_as_root(monkeypatch, on_linux, uid, flagged):
    monkeypatch.setattr(course.os, "geteuid", lambda: uid, raising=False)
    assert ("--allow-root" in course.lab_command(Path("python"), 8888, "f00d")) == flagged


def test_the_lab_on_windows_has_no_root_to_allow(on_windows):
    assert "--allow-root" not in course.lab_command(Path("python.exe"), 8888, "f00d")


def test_each_lab_gets_a_fresh_token_printed_with_its_address(monkeypatch, capsys, on_linux):
    started = []

    class Server:
        def __init__(self, command, **kwargs):
            started.append(command)

        def wait(self):
            return 0

    monkeypatch.setattr(course.subprocess, "Popen", Server)
    for _ in range(2):
        assert course.lab(Path("python"), 8888, None) == 0
    tokens = [arg.split("=", 1)[1] for cmd in started for arg in cmd if "token=" in arg]
    assert len(tokens) == 2 and tokens[0] != tokens[1] and all(len(t) == 48 for t in tokens)
    printed = capsys.readouterr().out
    for token in tokens:
        assert f"http://127.0.0.1:8888/lab/tree/00_start_here.ipynb?token={token}" in printed


# ---------------------------------------------------------------- commands and lanes


def test_a_command_is_shown_with_each_platform_s_own_quoting(monkeypatch):
    command = [str(SPACED / "python"), "-c", "pass"]
    monkeypatch.setattr(sys, "platform", "win32")
    assert course.shown(command) == f'"{SPACED / "python"}" -c pass'
    monkeypatch.setattr(sys, "platform", "linux")
    assert course.shown(command, {"OMP_NUM_THREADS": "1"}) == (
        f"OMP_NUM_THREADS=1 '{SPACED / 'python'}' -c pass"
    )


def python_step(code: str) -> course.Step:
    return course.Step(Path(sys.executable), "-I", "-S", "-c", code)


def test_lanes_run_at_the_same_time_each_printed_whole(tmp_path, capfd):
    """Lane `a` waits for a file that lane `b` writes: run one after the other, it times out."""
    flag = tmp_path / "a folder" / "b ran"
    flag.parent.mkdir()
    wait = (
        f"import pathlib, time; f = pathlib.Path({str(flag)!r}); t = time.time()\n"
        "while not f.exists() and time.time() - t < 10: time.sleep(0.01)\n"
        "print('a waited' if f.exists() else 'a alone')"
    )
    lanes = {
        "a": [python_step(wait), python_step("print('a again')")],
        "b": [python_step(f"import pathlib; pathlib.Path({str(flag)!r}).touch(); print('b')")],
    }
    assert course.run_lanes(lanes) == 0
    lines = capfd.readouterr().out.splitlines()  # each command's line, then its output
    assert "a waited" in lines
    b = lines.index("b")  # b ends first, and is printed first, whole
    assert ".touch()" in lines[b - 1]
    assert b < lines.index("a waited") < lines.index("a again")


def test_a_failed_step_ends_its_lane_and_the_run_fails(capfd):
    lanes = {
        "a": [python_step("raise SystemExit(3)"), python_step("print('never')")],
        "b": [python_step("print('b ran')")],
    }
    assert course.run_lanes(lanes) == 3
    out = capfd.readouterr().out
    assert "b ran" in out and "never" not in out and "a failed (exit code 3)" in out


def test_test_lints_then_runs_the_native_lane_then_the_other_two_together(monkeypatch):
    done = []
    monkeypatch.setattr(course.Step, "run", lambda step, output=None: done.append(step.command))
    monkeypatch.setattr(course, "run_lanes", lambda lanes: done.append(sorted(lanes)) or 0)
    assert course.test(Path("python")) == 0
    assert [cmd[1:3] for cmd in done[:3]] == [["-m", "ruff"], ["-m", "ruff"], ["-m", "pytest"]]
    assert "--lesson-budget" in done[2]
    assert done[3:] == [["browser-lessons", "generic-then-site"]]


def test_the_kernel_path_of_each_lane():
    table = course.steps(Path("python"))
    assert [step.env for step in table["native"]] == [{"OMP_NUM_THREADS": "1"}]
    assert table["generic-then-site"][0].env == course.GENERIC
    assert table["browser-lessons"][0].env == {"OMP_NUM_THREADS": "1"}


# ---------------------------------------------------------------- one implementation


def test_course_py_runs_on_the_standard_library_alone_and_never_through_a_shell():
    tree = ast.parse((ROOT / "course.py").read_text(encoding="utf-8"))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.Import) for alias in node.names}  # fmt: skip
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom)}  # fmt: skip
    assert imported <= sys.stdlib_module_names, imported - sys.stdlib_module_names
    shells = [node.lineno for node in ast.walk(tree)
              if isinstance(node, ast.keyword) and node.arg == "shell"]  # fmt: skip
    assert shells == [], f"course.py passes shell= on line(s) {shells}"


def test_every_course_command_is_a_make_target_that_calls_it():
    makefile = (ROOT / "Makefile").read_text()
    listed = re.search(r"^COURSE_TARGETS := (.*?)\n\n", makefile, re.MULTILINE | re.DOTALL)
    targets = set(listed.group(1).replace("\\\n", " ").split())
    assert targets | {"lab"} == set(course.HELP)
    assert "$(COURSE_TARGETS):\n\t@$(COURSE) $@\n" in makefile
    assert "\t@$(COURSE) lab " in makefile


def test_the_readme_s_two_commands_are_course_py_s_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    given = readme_commands.commands(readme)
    assert (given["lab"], given["test"]) == ("python course.py lab", "python course.py test")
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert "python -m tools.readme_commands test" in ci  # as the fork's workflow runs it


class _Process:
    pid = 4321

    def __init__(self):
        self.calls = []

    def terminate(self):
        self.calls.append("terminate")

    def kill(self):
        self.calls.append("kill")


def test_the_test_labs_process_group_calls_exist_on_windows_too(monkeypatch):
    # course_server.launch starts and stops the browser test's JupyterLab: on Windows there
    # is no os.killpg, no os.getuid and no start_new_session
    import subprocess

    from course_server import launch

    monkeypatch.setattr(launch.os, "name", "nt")
    monkeypatch.delattr(launch.os, "getuid", raising=False)
    monkeypatch.setattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0x200, raising=False)
    assert launch.session_options() == {"creationflags": 0x200}
    assert launch.running_as_root() is False
    process = _Process()
    launch.kill_group(process)
    launch.kill_group(process, force=True)
    assert process.calls == ["terminate", "kill"]


def test_on_posix_the_whole_group_is_signalled(monkeypatch):
    import signal

    from course_server import launch

    sent = []
    monkeypatch.setattr(launch.os, "name", "posix")
    record = lambda pid, sig: sent.append((pid, sig))  # noqa: E731
    monkeypatch.setattr(launch.os, "killpg", record, raising=False)
    assert launch.session_options() == {"start_new_session": True}
    launch.kill_group(_Process())
    launch.kill_group(_Process(), force=True)
    assert sent == [(4321, signal.SIGTERM), (4321, signal.SIGKILL)]
