"""A real JupyterHub on this machine with temporary learners: what the class test and the
capacity benchmark drive (tests/class/, benchmarks/class_capacity.py). Needs root.

It runs deploy/jupyterhub_config.py as an instructor would, with what a test changes: a
shared-password login (test-only), 127.0.0.1 and free ports, the hub's state in a temporary
folder, and an API token for the test. Learners are Unix accounts it creates and removes, each
with a home of their own. The course reaches them from a git daemon on 127.0.0.1 serving a
snapshot of this working tree (`CourseRepo`), as a class's repository would. `hub` holds the
hub, the accounts and the course; `learner` a learner's session and the kernel protocol that
JupyterLab speaks over the websocket.

The class test imports it as `localhub` (pytest puts tests/class/ on sys.path); anything run
from the repository root as `tests.class.localhub` (`class` is a keyword: through importlib).
"""

from .hub import (
    Accounts,
    CourseRepo,
    LocalHub,
    home,
    memory_of,
    port_open,
    processes_of,
)
from .learner import Kernel, KernelError, Learner, Slider

__all__ = [
    "Accounts",
    "CourseRepo",
    "Kernel",
    "KernelError",
    "Learner",
    "LocalHub",
    "Slider",
    "home",
    "memory_of",
    "port_open",
    "processes_of",
]
