"""One JupyterLab server and one headless Chromium, shared by every browser test.

The server runs over a temporary folder (its checkpoints and autosaves never touch the
repository) holding what a learner meets first: the workspace copy of every lesson, as
`make lab` writes it (solutions replaced by stubs, no outputs), except for one learner's slip
(learners_folder.py); and, in `course/`, the course's own notebooks with their stored
outputs. It runs on 127.0.0.1, a free port and a random token, with its own empty
settings, workspaces and runtime folders; it is always stopped at the end, kernels included.
Chromium is Debian's (/usr/bin/chromium), launched by path: `playwright install` is never
needed. Without it the tests skip with one line saying how to get it, unless
REQUIRE_BROWSER_TEST=1 or CI=true (set by .ci/run), where a missing browser is a failure.
"""

import os
from pathlib import Path

import pytest
from learners_folder import write_learners_folder

from course_server.launch import CHROMIUM, CHROMIUM_FLAGS, start_lab

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
ARTEFACTS = Path(__file__).resolve().parents[2] / "artefacts" / "browser"


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


@pytest.fixture(scope="session")
def lab(tmp_path_factory, request):
    """The course's JupyterLab as `make lab` runs it (course_server's TCP_NODELAY included)."""
    require_chromium()
    home = tmp_path_factory.mktemp("lab")
    root = home / "workspace"
    write_learners_folder(root, NOTEBOOKS)
    server = start_lab(home, root, nodelay=True)
    request.addfinalizer(server.stop)
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
