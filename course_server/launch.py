"""A JupyterLab of its own for the browser test and the browser benchmark.

`start_lab(home, root)` runs JupyterLab on 127.0.0.1, a free port and a random token, over
the folder `root`, with its settings, workspaces and runtime folders under `home` (nothing
of the user's own JupyterLab is read or written), and returns a `Lab`. `Lab.stop()` shuts
it down, kernels included. Its server settings are `make lab`'s, from SERVER_CONFIG; with
`nodelay=False` the course's server extension is off (the browser benchmark's "before").
"""

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

# Debian's Chromium, launched by path (`playwright install` is never needed), and its flags
CHROMIUM = Path(os.environ.get("COURSE_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",  # CI containers run as root, where Chromium's sandbox cannot start
    "--disable-gpu",
    "--disable-dev-shm-usage",  # containers give /dev/shm only 64 MB
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# the course's server settings (`make lab`, the class's servers): one file, read with --config
SERVER_CONFIG = Path(__file__).resolve().with_name("jupyter_server_config.py")
# User settings for a test or benchmark lab: every cell stays in the page (no windowing), so
# every explorer can be found and moved. News and update checks are off through the course's
# overrides.json, which course.py installs into .venv as for `python course.py lab`.
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the system picks it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(check, timeout: float, what: str, interval: float = 0.25):
    """Call `check()` until it returns something true, and return that; TimeoutError after
    `timeout` seconds, naming `what`. A check raises to stop waiting (a process that exited)."""
    if not timeout > 0:
        raise ValueError(f"timeout: expected seconds > 0, got {timeout!r}")
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{what}: not within {timeout:.0f} s")
        time.sleep(interval)


def answers(process: subprocess.Popen, api) -> bool:
    """Whether the server that `process` runs answers `api("/api/status")`; RuntimeError once
    the process has exited (waiting longer would only time out)."""
    if process.poll() is not None:
        raise RuntimeError(f"the server exited with code {process.returncode}")
    try:
        api("/api/status")
        return True
    except OSError:
        return False


def session_options() -> dict:
    """Popen options that start the server in a process group of its own, so that stopping it
    stops its kernels too: a new session on Linux and macOS, a new group on Windows."""
    if os.name == "nt":
        return {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}
    return {"start_new_session": True}


def kill_group(process: subprocess.Popen, *, force: bool = False) -> None:
    """Stop a process started with session_options() and, on Linux and macOS, its group (on
    Windows, where there are no signals to a group, the process itself)."""
    if os.name == "nt":
        process.kill() if force else process.terminate()
    else:
        os.killpg(process.pid, signal.SIGKILL if force else signal.SIGTERM)


def running_as_root() -> bool:
    """Whether this process is root (JupyterLab then needs --allow-root); never on Windows."""
    return hasattr(os, "getuid") and os.getuid() == 0


class Lab:
    """A running JupyterLab: its base URL, token and the folder it serves."""

    def __init__(self, root: Path, port: int, token: str, process: subprocess.Popen):
        self.root, self.port, self.token, self.process = root, port, token, process
        self.base = f"http://127.0.0.1:{port}"

    def url(self, path: str) -> str:
        joiner = "&" if "?" in path else "?"
        return f"{self.base}{path}{joiner}token={self.token}"

    def api(self, path: str, method: str = "GET"):
        request = urllib.request.Request(self.url(path), method=method)
        with urllib.request.urlopen(request, timeout=5) as response:
            body = response.read()
        return json.loads(body) if body else None

    def wait_ready(self, timeout: float = 90.0) -> None:
        wait_until(lambda: answers(self.process, self.api), timeout, "JupyterLab's /api/status")

    def stop(self) -> None:
        """Ask the server to shut down (it stops its kernels); kill the group if it won't."""
        if self.process.poll() is None:
            try:
                self.api("/api/shutdown", method="POST")
                self.process.wait(timeout=15)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if self.process.poll() is None:
            kill_group(self.process)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                kill_group(self.process, force=True)
                self.process.wait(timeout=10)


def start_lab(home: Path, root: Path, *, nodelay: bool = True, log_name="server.log") -> Lab:
    """Start JupyterLab over `root` with its state under `home`; wait until it answers."""
    home, root = Path(home), Path(root)
    for name, values in LAB_SETTINGS.items():
        path = home / "settings" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    env.update(
        JUPYTER_CONFIG_DIR=str(home / "config"),
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(home / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
    )
    port, token = free_port(), secrets.token_hex(24)
    command = [
        sys.executable, "-m", "jupyterlab", "--no-browser", f"--config={SERVER_CONFIG}",
        f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
    ]  # fmt: skip
    if not nodelay:  # the command line comes above the config file
        command.append('--ServerApp.jpserver_extensions={"course_server": False}')
    if running_as_root():
        command.append("--allow-root")
    with (home / log_name).open("wb") as log:
        process = subprocess.Popen(
            command, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT,
            **session_options(),
        )  # fmt: skip
    lab = Lab(root, port, token, process)
    try:
        lab.wait_ready()
    except BaseException:
        lab.stop()
        raise
    return lab
