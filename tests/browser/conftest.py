"""One JupyterLab server and one headless Chromium, shared by every browser test.

The server runs over a temporary copy of notebooks/ (its checkpoints and autosaves never
touch the repository), on 127.0.0.1, a free port and a random token, with its own empty
settings, workspaces and runtime folders; it is always stopped at the end, kernels included.
Chromium is Debian's (/usr/bin/chromium), launched by path: `playwright install` is never
needed. Without it the tests skip with one line saying how to get it, unless
REQUIRE_BROWSER_TEST=1 or CI=true (set by .ci/run), where a missing browser is a failure.
"""

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = Path(os.environ.get("COURSE_CHROMIUM", "/usr/bin/chromium"))
NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
ARTEFACTS = Path(__file__).resolve().parents[2] / "artefacts" / "browser"
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
# User settings for the test's JupyterLab: every cell stays in the page (no windowing). News
# and update checks are not set here: the course's own overrides.json (installed into .venv by
# the Makefile, as for `make lab`) turns them off, and a test checks that it does.
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


def browser_required() -> bool:
    return os.environ.get("REQUIRE_BROWSER_TEST") == "1" or os.environ.get("CI") == "true"


def require_chromium() -> None:
    """Skip (or fail, where the browser test is required) when Chromium is missing."""
    if CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK):
        return
    message = (
        f"browser test needs Chromium at {CHROMIUM}: "
        "`apt-get install chromium` (Debian/Ubuntu) to run it"
    )
    if browser_required():
        pytest.fail(message + " (required here: REQUIRE_BROWSER_TEST=1 or CI=true)")
    pytest.skip(message)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with code {self.process.returncode}")
            try:
                self.api("/api/status")
                return
            except OSError:
                time.sleep(0.25)
        raise TimeoutError(f"JupyterLab did not answer /api/status within {timeout:.0f} s")

    def stop(self) -> None:
        """Ask the server to shut down (it stops its kernels); kill the group if it won't."""
        if self.process.poll() is None:
            try:
                self.api("/api/shutdown", method="POST")
                self.process.wait(timeout=15)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)


@pytest.fixture(scope="session")
def lab(tmp_path_factory, request):
    require_chromium()
    home = tmp_path_factory.mktemp("lab")
    root = home / "notebooks"
    shutil.copytree(NOTEBOOKS, root, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
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
        sys.executable, "-m", "jupyterlab", "--no-browser",
        "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}", "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]  # fmt: skip
    if os.getuid() == 0:
        command.append("--allow-root")
    log = (home / "server.log").open("wb")
    process = subprocess.Popen(
        command, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    server = Lab(root, port, token, process)
    request.addfinalizer(log.close)
    request.addfinalizer(server.stop)
    server.wait_ready()
    return server


@pytest.fixture(scope="session")
def playwright(request):
    """One Playwright driver for the session: its sync API allows only one per process."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    driver = sync_playwright().start()
    request.addfinalizer(driver.stop)
    return driver


@pytest.fixture(scope="session")
def browser_context(lab, playwright, tmp_path_factory, request):
    context = playwright.chromium.launch_persistent_context(
        str(tmp_path_factory.mktemp("chromium-profile")),  # a new, empty user-data-dir
        executable_path=str(CHROMIUM),
        headless=True,
        args=CHROMIUM_FLAGS,
        viewport={"width": 1280, "height": 1000},
    )
    request.addfinalizer(context.close)
    context.set_default_timeout(30_000)
    return context


@pytest.fixture(scope="session")
def chromium(playwright, request):
    """Headless Chromium with no server behind it, for pages opened from disk."""
    browser = playwright.chromium.launch(
        executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS
    )
    request.addfinalizer(browser.close)
    return browser


@pytest.fixture(scope="session")
def artefacts():
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    return ARTEFACTS
