"""Every learner's Jupyter server on the hub: the course's shared settings plus a class's own.

On one machine deploy/jupyterhub_config.py puts this folder on JUPYTER_CONFIG_PATH, and so does
the image (deploy/Dockerfile, with the course at /opt/course). The shared settings (no news, no
update checks, course_server's TCP_NODELAY on kernel websockets) are the ones `make lab` uses,
in course_server/jupyter_server_config.py; JupyterLab's own defaults come from
tools/jupyterlab/overrides.json, installed into the environment as for `make lab`.
"""

from pathlib import Path

c = get_config()  # noqa: F821 (Jupyter defines it when it loads this file)

SHARED = Path(__file__).resolve().parents[2] / "course_server" / "jupyter_server_config.py"
if not SHARED.is_file():  # load_subconfig passes over a missing file in silence
    raise FileNotFoundError(f"the course's server settings are missing: {SHARED}")
load_subconfig(str(SHARED))  # noqa: F821 (Jupyter defines it too)

# A kernel holds 320-550 MiB (benchmarks/RESULTS.md, "Class capacity"): free the kernels of
# lessons left idle, but never one a learner still has open in a tab.
c.MappingKernelManager.cull_idle_timeout = 20 * 60
c.MappingKernelManager.cull_interval = 60
c.MappingKernelManager.cull_connected = False
