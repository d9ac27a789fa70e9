"""Every learner's Jupyter server on the hub: on one machine (deploy/jupyterhub_config.py puts
this folder on JUPYTER_CONFIG_PATH) and in the image (deploy/Dockerfile copies it to
/etc/jupyter/). The course's JupyterLab defaults (no news, no update checks) come from
tools/jupyterlab/overrides.json, installed into the environment as for `make lab`.
"""

c = get_config()  # noqa: F821 (Jupyter defines it when it loads this file)

# A kernel holds 320-550 MiB (benchmarks/RESULTS.md, "Class capacity"): free the kernels of
# lessons left idle, but never one a learner still has open in a tab.
c.MappingKernelManager.cull_idle_timeout = 20 * 60
c.MappingKernelManager.cull_interval = 60
c.MappingKernelManager.cull_connected = False

# ---- TCP_NODELAY on the kernel websocket (issue 15) ------------------------------------------
# course_server (installed with the course, as for `make lab`) turns Nagle's algorithm off on
# kernel websockets, so a new picture never waits 30-40 ms for an ACK; GET
# /user/<name>/api/course/nodelay counts the kernel websockets that have it (the class test
# reads it).
c.ServerApp.jpserver_extensions.update({"course_server": True})
# -----------------------------------------------------------------------------------------------
