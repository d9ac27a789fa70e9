"""A real JupyterHub with five learners, each a Unix account of their own (localhub/ here).

`make class-test` runs this folder alone (`--confcutdir=tests/class`: none of the unit tests'
set-up), in the learners' environment .class/venv. It needs root, to create the accounts; where
it is not root it skips, unless CI=true or REQUIRE_CLASS_TEST=1, where that is a failure.
Everything it starts (git daemon, hub, proxy, learners' servers and kernels, Chromium) is
stopped at the end, the accounts removed, and their ports checked free.

The course the learners get is this working tree, as `git status` sees it; with
CLASS_TEST_COURSE=HEAD (or another commit) it is that commit instead.
"""

import importlib.util
import os
import shutil
from pathlib import Path

import pytest

from course_server.launch import CHROMIUM, CHROMIUM_FLAGS, wait_until
from localhub import Accounts, CourseRepo, Learner, LocalHub, port_open, processes_of

# `make test`, `make quick` and `make unit` collect tests/ in the course's .venv: this folder
# needs the learners' environment (JupyterHub in it: `make class-env`), so there it is left out
if importlib.util.find_spec("jupyterhub") is None:
    collect_ignore_glob = ["test_*.py"]

LEARNERS = 5
ARTEFACTS = Path(__file__).resolve().parents[2] / "artefacts" / "class"


def required() -> bool:
    return os.environ.get("REQUIRE_CLASS_TEST") == "1" or os.environ.get("CI") == "true"


def skip_or_fail(message: str) -> None:
    if required():
        pytest.fail(message + " (required here: CI=true or REQUIRE_CLASS_TEST=1)")
    pytest.skip(message)


@pytest.fixture(scope="session")
def course(tmp_path_factory, request):
    if os.geteuid() != 0:
        skip_or_fail("the class test creates learners' Unix accounts: run it as root")
    if shutil.which("git") is None:
        skip_or_fail("the class test needs git (nbgitpuller runs it)")
    repo = CourseRepo(tmp_path_factory.mktemp("course"), os.environ.get("CLASS_TEST_COURSE"))
    request.addfinalizer(repo.stop)
    return repo.start()


@pytest.fixture(scope="session")
def accounts(course, request):
    made = Accounts()
    request.addfinalizer(made.remove)
    made.create(LEARNERS)
    return made


@pytest.fixture(scope="session")
def hub(accounts, tmp_path_factory, request):
    # hub state in a folder every account can pass through (the learners' servers never need it)
    server = LocalHub(tmp_path_factory.mktemp("hub"), accounts.names)

    def stop_and_check():
        server.stop()

        def leftovers():
            left = {name: len(processes_of(name)) for name in accounts.names}
            return left, [port for port in server.ports() if port_open(port)]

        def settled():
            left, busy = leftovers()
            return not any(left.values()) and not busy

        # a learner's server may still be stopping its kernels: give it a few seconds
        try:
            wait_until(settled, 20, "the learners' processes and the hub's ports", interval=0.5)
        except TimeoutError:
            pass  # the assertions below say what is left
        left, busy = leftovers()
        assert not any(left.values()), f"learners' processes left running: {left}"
        assert not busy, f"ports still open after the hub stopped: {busy}"

    request.addfinalizer(stop_and_check)
    return server.start()


@pytest.fixture(scope="session")
def learners(hub, accounts) -> dict[str, Learner]:
    return {name: Learner(hub, name) for name in accounts.names}


@pytest.fixture(scope="session")
def chromium(request):
    """Debian's Chromium under Playwright: a fresh profile, closed at the end."""
    if not (CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK)):
        skip_or_fail(f"the browser learner needs Chromium at {CHROMIUM} (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    playwright = sync_playwright().start()
    request.addfinalizer(playwright.stop)
    browser = playwright.chromium.launch(
        executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS
    )
    request.addfinalizer(browser.close)
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    context.set_default_timeout(60_000)
    request.addfinalizer(context.close)
    return context


@pytest.fixture(scope="session")
def artefacts():
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    return ARTEFACTS
