"""One learner on the hub: a browser-like session, and kernels spoken to over the websocket."""

import json
import queue
import re
import struct
import threading
import time
import uuid
from urllib.parse import quote, urlencode

import requests
import websocket

from deploy.nbgitpuller_link import TARGET, link

from .hub import LocalHub

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
