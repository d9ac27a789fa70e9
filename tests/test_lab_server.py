"""The JupyterLab that `python course.py lab` (`make lab`) starts: lesson 00, behind a token,
and kernel websockets with Nagle's algorithm off.

Starts the README's lab command itself on a free port with a random token, reads lesson 00
through it (and is refused without the token), opens a kernel and its websocket as a browser
would, and reads back from the server (course_server's /api/course/nodelay) that the socket
has TCP_NODELAY set. The server is stopped at the end, kernels included. Those settings are
written in one file, course_server/jupyter_server_config.py, which the lab command, start_lab
(the browser test) and a class's servers all read: checking them here covers the others.
"""

import asyncio
import json
import os
import secrets
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from tornado.websocket import websocket_connect

from course_server.launch import answers, free_port, kill_group, session_options, wait_until
from helpers import tree_files

pytestmark = pytest.mark.path_independent

ROOT = Path(__file__).resolve().parents[1]
SERVER_CONFIG = "course_server/jupyter_server_config.py"
# what every course server shares: where one of these is written, a server's settings are
SHARED_SETTINGS = (
    "news_url",
    "check_for_updates_class",
    "NeverCheckForUpdate",
    '"course_server": True',
    "ServerApp.ip",
)


def files_containing(text: str) -> list[str]:
    """The course's text files (lessons and this file left out) in which `text` occurs."""
    here = Path(__file__).resolve().relative_to(ROOT).as_posix()
    found = []
    for name in tree_files():
        if name == here or name.endswith((".ipynb", ".png", ".pt", ".npz")):
            continue
        if text in (ROOT / name).read_text(encoding="utf-8", errors="ignore"):
            found.append(name)
    return found


@pytest.mark.parametrize("setting", SHARED_SETTINGS)
def test_the_shared_server_settings_are_written_in_one_file(setting):
    found = files_containing(setting)
    assert found == [SERVER_CONFIG], (
        f"{setting!r} is set outside {SERVER_CONFIG} (or not there): {found}; "
        "the course's servers share that one file"
    )


LAUNCH = ["course_server/launch.py"]


@pytest.mark.parametrize(
    "definition, where",
    [("def free_port(", LAUNCH), ('.bind(("127.0.0.1", 0))', LAUNCH),
     ("def wait_until(", LAUNCH), ("def wait_for(", [])],
)  # fmt: skip
def test_free_ports_and_waiting_are_written_once(definition, where):
    """Finding a free port and waiting for a server: course_server/launch.py, used everywhere."""
    found = files_containing(definition)
    assert found == where, f"{definition!r} is written in {found}, expected only in {where}"


@pytest.fixture(scope="module")
def lab():
    port, token = free_port(), secrets.token_hex(16)
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    process = subprocess.Popen(
        [sys.executable, "course.py", "lab", f"--port={port}", f"--token={token}"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        **session_options(),
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"

    def api(path, method="GET", token=token):
        request = urllib.request.Request(f"{base}{path}?token={token}", method=method)
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None

    wait_until(lambda: answers(process, api), 120, "course.py lab's /api/status", interval=0.5)
    yield api, f"ws://127.0.0.1:{port}", token
    try:
        api("/api/shutdown", method="POST")
        process.wait(timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        kill_group(process, force=True)
        process.wait(timeout=10)


@pytest.mark.slow
def test_the_lab_command_serves_lesson_00_behind_its_token(lab):
    api, _, _ = lab
    lesson = api("/api/contents/00_start_here.ipynb")
    assert lesson["type"] == "notebook" and lesson["content"]["cells"]
    with pytest.raises(urllib.error.HTTPError) as refused:
        api("/api/contents/00_start_here.ipynb", token="not-the-token")
    assert refused.value.code == 403


@pytest.mark.slow
def test_the_lab_command_sets_tcp_nodelay_on_kernel_websockets(lab):
    api, ws_base, token = lab
    assert api("/api/course/nodelay") == {"kernel_websockets": 0, "nodelay": 0}
    kernel = api("/api/kernels", method="POST")

    async def connect():
        url = f"{ws_base}/api/kernels/{kernel['id']}/channels?token={token}"
        connection = await websocket_connect(url)
        connection.close()

    asyncio.run(connect())
    counts = api("/api/course/nodelay")
    api(f"/api/kernels/{kernel['id']}", method="DELETE")
    assert counts["kernel_websockets"] == 1
    assert counts["nodelay"] == 1, "the kernel websocket's socket does not have TCP_NODELAY set"
