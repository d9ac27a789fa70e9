"""A real JupyterHub on this machine with temporary learners: what the class test and the
capacity benchmark drive (tests/class/, benchmarks/class_capacity.py). Needs root.

It runs deploy/jupyterhub_config.py as an instructor would, with what a test changes: a
shared-password login (test-only), 127.0.0.1 and free ports, the hub's state in a temporary
folder, and an API token for the test. Learners are Unix accounts it creates and removes, each
with a home of their own. The course reaches them from a git daemon on 127.0.0.1 serving a
snapshot of this working tree (`CourseRepo`), as a class's repository would.
"""

import json
import os
import pwd
import queue
import re
import secrets
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import quote, urlencode

import psutil
import requests
import websocket

from course_server.launch import free_port, wait_until
from deploy.nbgitpuller_link import TARGET, link

COURSE = Path(__file__).resolve().parents[1]
VENV = Path(sys.prefix)
PROXY = COURSE / ".class" / "node_modules" / ".bin" / "configurable-http-proxy"
ACCOUNT_MARK = "course class test (temporary)"  # the GECOS field of every account made here
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Course",
    "GIT_AUTHOR_EMAIL": "course@example.invalid",
    "GIT_COMMITTER_NAME": "Course",
    "GIT_COMMITTER_EMAIL": "course@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
}


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def stop_process(process: subprocess.Popen, timeout: float = 20) -> None:
    """SIGTERM the process (its own session), then SIGKILL its group if it lingers."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


# ---------------------------------------------------------------- the course, served by git


class CourseRepo:
    """A snapshot of the course as a git repository, served on git://127.0.0.1.

    The snapshot is this working tree (tracked and new files, as `git status` sees them), or,
    with commit="HEAD" (or any commit), that commit of the course.
    """

    def __init__(self, folder: Path, commit: str | None = None):
        self.folder = Path(folder)
        self.commit = commit
        self.work = self.folder / "course"  # where the instructor commits
        self.served = self.folder / "served"
        self.port = free_port()
        self.url = f"git://127.0.0.1:{self.port}/course.git"
        self.daemon = None

    def git(self, *args, cwd=None) -> str:
        return subprocess.run(
            ["git", *args],
            cwd=cwd or self.work,
            env={**os.environ, **GIT_ENV},
            check=True,
            capture_output=True,
            text=True,
        ).stdout

    def start(self) -> "CourseRepo":
        self.work.mkdir(parents=True)
        if self.commit:
            self.export_commit()
        else:
            self.copy_working_tree()
        self.git("init", "-q", "-b", "main")
        self.git("add", "-A")
        self.git("commit", "-q", "-m", "The course, as the class starts")
        self.served.mkdir()
        self.git("clone", "-q", "--bare", str(self.work), str(self.served / "course.git"))
        self.git("remote", "add", "origin", str(self.served / "course.git"))
        # learners' servers run as other accounts: they read the repository through the daemon
        # (git refuses a local clone of a repository another account owns)
        self.daemon = subprocess.Popen(
            [
                "git", "daemon", "--reuseaddr", "--export-all", "--listen=127.0.0.1",
                f"--port={self.port}", f"--base-path={self.served}", str(self.served),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        wait_until(lambda: port_open(self.port), 20, "git daemon")
        return self

    def copy_working_tree(self) -> None:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=COURSE,
            check=True,
            capture_output=True,
        ).stdout.decode()
        for name in filter(None, listed.split("\0")):
            source = COURSE / name
            if source.is_file():  # a tracked file deleted in the working tree is left out
                (self.work / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, self.work / name)

    def export_commit(self) -> None:
        archive = subprocess.run(
            ["git", "archive", "--format=tar", self.commit],
            cwd=COURSE,
            check=True,
            capture_output=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(self.work)], input=archive, check=True)

    def publish(self, changes: dict, message: str) -> str:
        """Commit {path: new text} to the course and push it; return the new commit."""
        for name, text in changes.items():
            (self.work / name).write_text(text, encoding="utf-8")
        self.git("commit", "-q", "-a", "-m", message)
        self.git("push", "-q", "origin", "main")
        return self.git("rev-parse", "HEAD").strip()

    def read(self, name: str) -> str:
        return (self.work / name).read_text(encoding="utf-8")

    def stop(self) -> None:
        if self.daemon is not None:
            stop_process(self.daemon)


# ---------------------------------------------------------------- learners' Unix accounts


def processes_of(username: str) -> list[psutil.Process]:
    return [p for p in psutil.process_iter(["username"]) if p.info["username"] == username]


def end_processes(username: str) -> None:
    """End what the test started as this account, process by process (by id)."""
    for process in processes_of(username):
        try:
            process.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(processes_of(username), timeout=10)
    for process in alive:
        process.kill()


class Accounts:
    """Unix accounts for test learners, each with a home of their own; removed at the end."""

    def __init__(self, prefix: str = "classtest"):
        self.prefix = prefix
        self.names: list[str] = []

    @staticmethod
    def leftovers() -> list[str]:
        return [u.pw_name for u in pwd.getpwall() if u.pw_gecos == ACCOUNT_MARK]

    def create(self, count: int) -> list[str]:
        for name in self.leftovers():  # from an earlier run that was killed
            self.remove_one(name)
        for i in range(1, count + 1):
            name = f"{self.prefix}{i}"
            subprocess.run(
                ["useradd", "--create-home", "--comment", ACCOUNT_MARK, "--shell", "/bin/sh", name],
                check=True,
            )
            self.names.append(name)
        return list(self.names)

    @staticmethod
    def remove_one(name: str) -> None:
        end_processes(name)
        subprocess.run(["userdel", "--remove", name], check=False, capture_output=True)

    def remove(self) -> None:
        for name in self.names:
            self.remove_one(name)
        self.names = []


def home(name: str) -> Path:
    return Path(pwd.getpwnam(name).pw_dir)


# ---------------------------------------------------------------- the hub

TEST_CONFIG = """\
# deploy/jupyterhub_config.py, as an instructor runs it, then what a test changes
load_subconfig({deploy_config!r})
c.JupyterHub.bind_url = "http://127.0.0.1:{port}"
c.JupyterHub.hub_bind_url = "http://127.0.0.1:{hub_port}"
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_api_port}"
c.JupyterHub.db_url = "sqlite:///{state}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = "{state}/jupyterhub_cookie_secret"
c.ConfigurableHTTPProxy.pid_file = "{state}/jupyterhub-proxy.pid"
# test-only login: any listed learner with the shared password
c.JupyterHub.authenticator_class = "shared-password"
c.SharedPasswordAuthenticator.user_password = {password!r}
c.Authenticator.allowed_users = set({learners!r})
c.Authenticator.admin_users = set()
# the test's own API token: create learners' tokens, start and stop their servers
c.JupyterHub.services = [{{"name": "class-test", "api_token": {token!r}}}]
c.JupyterHub.load_roles = [
    {{
        "name": "class-test",
        "scopes": ["admin:users", "admin:servers", "tokens", "list:users"],
        "services": ["class-test"],
    }}
]
"""


class LocalHub:
    """deploy/jupyterhub_config.py running on 127.0.0.1, with a shared test password."""

    def __init__(self, folder: Path, learners: list[str]):
        self.folder = Path(folder)
        self.learners = list(learners)
        self.password = secrets.token_urlsafe(12)
        self.token = secrets.token_hex(32)
        self.port, self.hub_port, self.proxy_api_port = free_port(), free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = None
        self.log_path = self.folder / "jupyterhub.log"

    def start(self, timeout: float = 60) -> "LocalHub":
        if not PROXY.exists():
            raise FileNotFoundError(f"{PROXY} is missing: `make class-env` installs the proxy")
        self.folder.mkdir(parents=True, exist_ok=True)
        config = self.folder / "jupyterhub_config.py"
        config.write_text(
            TEST_CONFIG.format(
                deploy_config=str(COURSE / "deploy" / "jupyterhub_config.py"),
                port=self.port,
                hub_port=self.hub_port,
                proxy_api_port=self.proxy_api_port,
                state=self.folder,
                password=self.password,
                learners=sorted(self.learners),
                token=self.token,
            )
        )
        env = {k: v for k, v in os.environ.items() if k not in ("MPLBACKEND", "PYTHONPATH")}
        env["PATH"] = f"{VENV / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [str(VENV / "bin" / "jupyterhub"), "-f", str(config)],
                cwd=self.folder,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

        def up():
            if self.process.poll() is not None:
                raise RuntimeError(f"JupyterHub exited:\n{self.log_tail()}")
            try:
                return requests.get(f"{self.url}/hub/health", timeout=2).ok
            except requests.ConnectionError:
                return False

        wait_until(up, timeout, "JupyterHub /hub/health")
        return self

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def api(self, method: str, path: str, **kwargs):
        response = requests.request(
            method,
            f"{self.url}/hub/api{path}",
            headers={"Authorization": f"token {self.token}"},
            timeout=30,
            **kwargs,
        )
        response.raise_for_status()
        return response.json() if response.content else None

    def user(self, name: str) -> dict:
        return self.api("GET", f"/users/{name}")

    def new_token(self, name: str) -> str:
        """An API token of the learner's own (what they would make on the hub's token page)."""
        body = {"note": "class test", "expires_in": 3600}
        return self.api("POST", f"/users/{name}/tokens", json=body)["token"]

    def wait_ready(self, name: str, timeout: float = 180) -> None:
        def ready():
            server = self.user(name).get("servers", {}).get("")
            if server and server.get("ready"):
                return True
            if server is None and not self.user(name).get("pending"):
                raise RuntimeError(f"{name}'s server is not starting:\n{self.log_tail()}")
            return False

        wait_until(ready, timeout, f"{name}'s server", interval=0.5)

    def start_server(self, name: str) -> None:
        self.api("POST", f"/users/{name}/server")

    def stop_server(self, name: str) -> None:
        try:
            self.api("DELETE", f"/users/{name}/server")
        except requests.HTTPError:
            pass

    def stop(self) -> None:
        """Stop the hub: it stops every learner's server and its proxy."""
        if self.process is not None:
            stop_process(self.process, timeout=60)
        pid_file = self.folder / "jupyterhub-proxy.pid"
        if pid_file.exists():  # the proxy outlived the hub: end it by its id
            try:
                os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)
            except (ValueError, ProcessLookupError):
                pass

    def ports(self) -> list[int]:
        return [self.port, self.hub_port, self.proxy_api_port]


# ---------------------------------------------------------------- one learner


class Learner:
    """A learner on the hub: a browser-like session (cookies) and an API token of their own."""

    def __init__(self, hub: LocalHub, name: str):
        self.hub, self.name = hub, name
        self.session = requests.Session()
        self.token = None
        self.server = f"{hub.url}/user/{name}"

    def login(self) -> None:
        page = self.session.get(f"{self.hub.url}/hub/login", timeout=30)
        xsrf = re.search(r'name="_xsrf" value="([^"]+)"', page.text).group(1)
        response = self.session.post(
            f"{self.hub.url}/hub/login",
            data={"username": self.name, "password": self.hub.password, "_xsrf": xsrf},
            allow_redirects=False,
            timeout=30,
        )
        if response.status_code != 302:
            raise RuntimeError(f"{self.name}: login refused ({response.status_code})")

    def link(self, repo: str, branch: str = "main", lesson: str = "00_start_here") -> str:
        return link(self.hub.url, repo, branch, lesson)

    def open_link(self, url: str, timeout: float = 180) -> requests.Response:
        """Follow an nbgitpuller link as a browser does, up to its page on the learner's server.

        The page's script then calls the pull API (see `pull`); the first visit spawns the server.
        """
        deadline = time.monotonic() + timeout
        while True:
            response = self.session.get(url, timeout=60)
            if f"/user/{self.name}/git-pull" in response.url and response.ok:
                return response
            if "spawn-pending" not in response.url or time.monotonic() > deadline:
                raise RuntimeError(f"{self.name}: the link ended at {response.url}")
            self.hub.wait_ready(self.name, timeout=max(1.0, deadline - time.monotonic()))

    def pull(self, repo: str, branch: str = "main") -> list[str]:
        """What the nbgitpuller page's script does: call /git-pull/api and read its events."""
        query = urlencode({"repo": repo, "branch": branch, "targetpath": TARGET})
        response = self.session.get(f"{self.server}/git-pull/api?{query}", stream=True, timeout=120)
        response.raise_for_status()
        lines = []
        for raw in response.iter_lines(decode_unicode=True):
            if not raw or not raw.startswith("data:"):
                continue
            event = json.loads(raw[len("data:") :])
            if event.get("output"):
                lines.append(event["output"].rstrip())
            if event.get("phase") == "error":
                raise RuntimeError(f"{self.name}: nbgitpuller failed: {event.get('message')}")
            if event.get("phase") == "finished":
                return lines
        raise RuntimeError(f"{self.name}: nbgitpuller's stream ended without finishing")

    def api(self, method: str, path: str, token: str | None = None, **kwargs):
        return requests.request(
            method,
            f"{self.server}/api{path}",
            headers={"Authorization": f"token {token or self.token}"},
            timeout=60,
            **kwargs,
        )

    def notebook(self, path: str) -> dict:
        response = self.api("GET", f"/contents/{quote(path)}?content=1")
        response.raise_for_status()
        return response.json()["content"]

    def save_notebook(self, path: str, notebook: dict) -> None:
        body = {"type": "notebook", "format": "json", "content": notebook}
        self.api("PUT", f"/contents/{quote(path)}", json=body).raise_for_status()

    def kernel(self, path: str) -> "Kernel":
        """A kernel for the notebook at path (cwd: its folder), as opening it in JupyterLab."""
        body = {"path": path, "type": "notebook", "name": "", "kernel": {"name": "python3"}}
        response = self.api("POST", "/sessions", json=body)
        response.raise_for_status()
        kernel_id = response.json()["kernel"]["id"]
        ws = self.server.replace("http://", "ws://")
        return Kernel(f"{ws}/api/kernels/{kernel_id}/channels", self.token, self, kernel_id)


# ---------------------------------------------------------------- a kernel, over the websocket


class KernelError(RuntimeError):
    pass


class Kernel:
    """Jupyter's kernel protocol over the server's websocket (what JupyterLab speaks).

    A thread reads the websocket all the time, as a browser does: the server pings every
    websocket and closes one that does not answer, even while the learner is only reading.
    """

    def __init__(self, url: str, token: str, learner: Learner, kernel_id: str):
        self.learner, self.id = learner, kernel_id
        self.session = uuid.uuid4().hex
        self.ws = websocket.create_connection(url, header=[f"Authorization: token {token}"])
        self.inbox = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while True:
            try:
                frame = self.ws.recv()  # answers the server's pings on the way
            except (websocket.WebSocketException, OSError):
                self.inbox.put(None)
                return
            self.inbox.put(frame)

    def send(self, msg_type: str, content: dict, channel: str = "shell") -> str:
        msg_id = uuid.uuid4().hex
        header = {
            "msg_id": msg_id,
            "msg_type": msg_type,
            "session": self.session,
            "username": self.learner.name,
            "version": "5.3",
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        message = {
            "header": header,
            "parent_header": {},
            "metadata": {},
            "content": content,
            "channel": channel,
            "buffers": [],
        }
        self.ws.send(json.dumps(message))
        return msg_id

    def receive(self, timeout: float = 300) -> dict:
        frame = self.inbox.get(timeout=timeout)
        if frame is None:
            raise KernelError(f"{self.learner.name}: the kernel's websocket closed")
        if isinstance(frame, bytes):  # a message with binary buffers: offsets, JSON, buffers
            (count,) = struct.unpack("!I", frame[:4])
            offsets = struct.unpack(f"!{count}I", frame[4 : 4 + 4 * count])
            end = offsets[1] if count > 1 else len(frame)
            message = json.loads(frame[offsets[0] : end].decode())
            bounds = [*offsets, len(frame)]
            message["buffers"] = [frame[bounds[i] : bounds[i + 1]] for i in range(1, count)]
            return message
        return json.loads(frame)

    def execute(self, code: str, allow_error: bool = False) -> str:
        """Run code; return its text output (stdout and results); raise KernelError on an error."""
        msg_id = self.send(
            "execute_request",
            {"code": code, "silent": False, "store_history": True, "allow_stdin": False,
             "user_expressions": {}, "stop_on_error": True},
        )  # fmt: skip
        text, error, idle, replied = [], None, False, False
        while not (idle and replied):
            message = self.receive()
            if message.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, content = message["header"]["msg_type"], message["content"]
            if kind == "stream":
                text.append(content["text"])
            elif kind in ("execute_result", "display_data"):
                text.append(content["data"].get("text/plain", "") + "\n")
            elif kind == "error":
                error = f"{content['ename']}: {content['evalue']}"
            elif kind == "status" and content["execution_state"] == "idle":
                idle = True
            elif kind == "execute_reply":
                replied = True
        if error and not allow_error:
            raise KernelError(f"{self.learner.name}: {error}\nin:\n{code[:300]}")
        return "".join(text)

    def run_notebook(self, notebook: dict) -> list[str]:
        """Every code cell top to bottom (as Run All); return each cell's text output."""
        outputs = []
        for cell in notebook["cells"]:
            source = "".join(cell["source"])
            if cell["cell_type"] != "code" or not source.strip():
                continue
            raises = "raises-exception" in cell.get("metadata", {}).get("tags", [])
            outputs.append(self.execute(source, allow_error=raises))
        return outputs

    def comm_update(self, comm_id: str, state: dict) -> None:
        """What JupyterLab sends when a learner moves a control: the widget model's new state."""
        self.send("comm_msg", {"comm_id": comm_id, "data": {"method": "update", "state": state,
                                                            "buffer_paths": []}})  # fmt: skip

    def wait_picture(self, image_id: str) -> bytes:
        """Wait for the Image widget's next value: the picture a browser would show."""
        while True:
            message = self.receive()
            if message["header"]["msg_type"] != "comm_msg":
                continue
            data = message["content"]["comm_id"] == image_id and message["content"]["data"]
            if (
                data
                and data.get("method") == "update"
                and ["value"] in data.get("buffer_paths", [])
            ):
                return message["buffers"][data["buffer_paths"].index(["value"])]

    def close(self) -> None:
        self.ws.close()
        self.reader.join(timeout=10)
        self.learner.api("DELETE", f"/kernels/{self.id}")


EXPLORER = """\
import json as _json
from course_lib.widgets import SoftmaxExplorer as _Explorer
explorer = _Explorer()
print(_json.dumps({"control": explorer.controls["sharpness"].model_id,
                   "image": explorer.image.model_id}))
"""


class Slider:
    """Lesson 00's explorer in a learner's kernel, moved as JupyterLab moves it (comm messages)."""

    VALUES = [0.5, 1.5, 2.5, 4.0, 6.0, 8.0, 3.0, 0.0]

    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        ids = json.loads(kernel.execute(EXPLORER).strip().splitlines()[-1])
        self.control, self.image = ids["control"], ids["image"]
        self.moves = 0

    def move(self) -> tuple[float, bytes]:
        """Set the next value; return seconds until the new picture arrived, and the picture."""
        value = self.VALUES[self.moves % len(self.VALUES)]
        self.moves += 1
        start = time.perf_counter()
        self.kernel.comm_update(self.control, {"value": value})
        picture = self.kernel.wait_picture(self.image)
        return time.perf_counter() - start, picture


# ---------------------------------------------------------------- memory


def memory_of(username: str) -> dict:
    """MB of the learner's processes: server and kernels, RSS and PSS (shared pages split)."""
    totals = {"server_rss": 0.0, "server_pss": 0.0, "kernel_rss": 0.0, "kernel_pss": 0.0}
    for process in processes_of(username):
        try:
            info = process.memory_full_info()
            kind = "kernel" if "ipykernel" in " ".join(process.cmdline()) else "server"
        except psutil.NoSuchProcess:
            continue
        totals[f"{kind}_rss"] += info.rss / 2**20
        totals[f"{kind}_pss"] += info.pss / 2**20
    return totals
