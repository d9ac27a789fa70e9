"""JupyterHub for a class on one machine: every learner a Unix account, their own server and home.

Run as root from the course folder, after `make class-env` (the course's .venv plus JupyterHub,
nbgitpuller and the proxy):

    sudo .venv/bin/jupyterhub -f deploy/jupyterhub_config.py

Learners log in with their Unix account (PAM) and each server runs as that account, so one
learner's kernel cannot read another's home. Put the hub behind HTTPS (a reverse proxy, or
`c.JupyterHub.ssl_cert` / `ssl_key` below). The class test (tests/class/) runs this file with a
test-only login, on 127.0.0.1 and free ports. For Kubernetes, see deploy/config.yaml.
"""

import os
import pwd
import sys
from pathlib import Path

COURSE = Path(__file__).resolve().parents[1]
VENV = Path(sys.prefix)  # the environment running the hub is the learners' environment too
TARGET = "course"  # nbgitpuller's targetpath: the course is cloned into ~/course

c = get_config()  # noqa: F821 (JupyterHub defines it when it loads this file)

# ---------------------------------------------------------------- the hub
c.JupyterHub.bind_url = os.environ.get("COURSE_HUB_URL", "http://:8000")
# c.JupyterHub.ssl_cert = "/etc/letsencrypt/live/hub.example.org/fullchain.pem"
# c.JupyterHub.ssl_key = "/etc/letsencrypt/live/hub.example.org/privkey.pem"
# the proxy from npm, installed into the course folder by `make class-env`
c.ConfigurableHTTPProxy.command = [
    str(COURSE / ".class" / "node_modules" / ".bin" / "configurable-http-proxy")
]

# ---------------------------------------------------------------- who may log in
# PAM: learners log in with their Unix account and password. List them (or give each a Unix
# account with `adduser` and list them here); admins can add learners from the hub's admin page.
c.JupyterHub.authenticator_class = "pam"
c.Authenticator.allowed_users = set(os.environ.get("COURSE_LEARNERS", "").split())
c.Authenticator.admin_users = set(os.environ.get("COURSE_ADMINS", "").split())
c.LocalAuthenticator.create_system_users = True  # an admin adding a learner creates the account


# ---------------------------------------------------------------- each learner's server
def private_home(spawner) -> None:
    """A learner's home is theirs alone: Debian's useradd makes it world-readable (0755)."""
    home = pwd.getpwnam(spawner.user.name).pw_dir
    if os.path.isdir(home):
        os.chmod(home, 0o700)


def course_clone(spawner) -> str:
    """The learner's clone of the course: kernels import its course_lib, so updates reach them."""
    return os.path.join(pwd.getpwnam(spawner.user.name).pw_dir, TARGET)


c.JupyterHub.spawner_class = "localprocess"  # each server runs as its learner's Unix account
c.Spawner.pre_spawn_hook = private_home
c.Spawner.cmd = [str(VENV / "bin" / "jupyterhub-singleuser")]
c.Spawner.environment = {
    "PATH": f"{VENV / 'bin'}:/usr/local/bin:/usr/bin:/bin",
    # the course_lib of the lessons the learner has: ~/course, pulled and updated by nbgitpuller
    "PYTHONPATH": course_clone,
    # every learner server's settings: the course's shared ones (course_server/, as `make lab`)
    # and a class's own (kernel culling), the same as in the image
    "JUPYTER_CONFIG_PATH": str(COURSE / "deploy" / "singleuser"),
}
c.Spawner.notebook_dir = "~"
c.Spawner.default_url = f"/lab/tree/{TARGET}/notebooks/00_start_here.ipynb"
# a server with torch and the course's lessons: give it time to start on a busy machine
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 60
# LocalProcessSpawner cannot enforce memory or CPU limits; on one machine, size it by the
# README's rule ("Teaching a class"), or use jupyterhub-systemdspawner for per-learner limits.

# ---------------------------------------------------------------- idle servers
# Idle kernels are culled by each server (deploy/singleuser/jupyter_server_config.py); a server
# with no kernels and no open tab for an hour stops itself and frees its memory.
c.Spawner.args = ["--ServerApp.shutdown_no_activity_timeout=3600"]
