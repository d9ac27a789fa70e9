"""The course's Jupyter server settings: the one place they are written.

Read by every server the course starts: `make lab` and `course_server.launch.start_lab` (the
browser test and benchmark) pass it as `--config=`, and every learner's server on a hub loads
it from deploy/singleuser/jupyter_server_config.py, which adds what only a class needs (kernel
culling). The port and the token are chosen per launch, on the command line. On a hub,
jupyterhub-singleuser sets the address, port and base URL itself, above any config file, so the
address below applies to the servers the course starts on this machine.

It imports nothing: Jupyter executes it with `c` (`get_config()`) defined.
"""

c = get_config()  # noqa: F821 (Jupyter defines it when it loads this file)

# only this machine can reach a course server (a hub's proxy reaches learners' servers)
c.ServerApp.ip = "127.0.0.1"

# nothing reaches the internet and no prompt covers a lesson: no news feed, no update check
# (tools/jupyterlab/overrides.json turns the same off in JupyterLab's settings)
c.LabApp.news_url = None
c.LabApp.check_for_updates_class = "jupyterlab.NeverCheckForUpdate"

# course_server (this package) sets TCP_NODELAY on every kernel websocket, so a new picture
# never waits 30-40 ms for the browser's ACK; GET /api/course/nodelay counts the websockets
# that have it. `update` keeps every other extension the environment enables.
c.ServerApp.jpserver_extensions.update({"course_server": True})
