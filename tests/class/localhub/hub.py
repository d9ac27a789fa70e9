"""The hub, its learners' Unix accounts and the course's git daemon (the package says how)."""

import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import requests

from course_server.launch import free_port, wait_until

COURSE = Path(__file__).resolve().parents[3]
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
