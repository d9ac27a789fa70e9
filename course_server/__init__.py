"""A Jupyter server extension of the course: no Nagle delay on kernel websockets.

An explorer's picture travels from the kernel to the browser over the server's websocket.
jupyter_server never sets TCP_NODELAY on that socket and Tornado leaves Nagle's algorithm on,
so a picture that follows a small message can wait 30-40 ms for the browser's ACK. The
handler below is jupyter_server's own kernel websocket handler, registered for the same URL
ahead of it, that turns Nagle off when a connection opens. The course's server settings
(jupyter_server_config.py here, read by `make lab`, start_lab and a class's servers) enable
it; GET /api/course/nodelay reports how many kernel websockets opened and how many of them
have TCP_NODELAY set, read back from the socket.

It imports nothing of course_lib (so no torch): the server process stays small.
"""

import json
import socket

from jupyter_server.base.handlers import APIHandler
from jupyter_server.services.kernels.handlers import _kernel_id_regex
from jupyter_server.services.kernels.websocket import KernelWebsocketHandler
from jupyter_server.utils import url_path_join
from tornado import web

COUNTS = "course_nodelay"  # where the counts live in the web application's settings


class NoDelayKernelWebsocketHandler(KernelWebsocketHandler):
    """jupyter_server's kernel websocket, with TCP_NODELAY set as soon as it opens."""

    async def open(self, kernel_id):
        self.set_nodelay(True)
        counts = self.settings[COUNTS]
        counts["kernel_websockets"] += 1
        sock = self.ws_connection.stream.socket if self.ws_connection else None
        if sock is not None and sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY):
            counts["nodelay"] += 1
        return await super().open(kernel_id)


class NoDelayStatusHandler(APIHandler):
    """How many kernel websockets opened, and how many have TCP_NODELAY set."""

    @web.authenticated
    def get(self):
        self.finish(json.dumps(self.settings[COUNTS]))


def _jupyter_server_extension_points():
    return [{"module": "course_server"}]


def _load_jupyter_server_extension(serverapp):
    web_app = serverapp.web_app
    web_app.settings[COUNTS] = {"kernel_websockets": 0, "nodelay": 0}
    base = web_app.settings["base_url"]
    # added after the server's own handlers, Tornado puts these rules ahead of them
    web_app.add_handlers(
        ".*$",
        [
            (
                url_path_join(base, rf"/api/kernels/{_kernel_id_regex}/channels"),
                NoDelayKernelWebsocketHandler,
            ),
            (url_path_join(base, "/api/course/nodelay"), NoDelayStatusHandler),
        ],
    )
