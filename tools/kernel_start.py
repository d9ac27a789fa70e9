"""Starting a notebook's kernel again when it died on the way up (strict nbval, `make test`).

jupyter_client gives a new kernel free TCP ports by opening and closing sockets; another
process starting a kernel at the same moment (the other xdist worker, the generic-path lane,
the browser test's JupyterLab) can take one of them first, and the new kernel then dies
("Address already in use") before it answers kernel_info: jupyter/jupyter_client#487. It
happened once in a `make test` here, on lesson 07a, before a single cell ran. A kernel that
dies on the way up is started again with fresh ports; one that dies later, or does not
answer, is not retried: that is the lesson's failure to report.
"""

import time

DIED_STARTING = "Kernel died before replying to kernel_info"


def retrying(start, tries: int = 3, wait_s: float = 1.0):
    """`start` (nbval.kernel.start_new_kernel), tried up to `tries` times while the kernel
    dies before replying to kernel_info, waiting wait_s, then twice that, between tries."""

    def start_new_kernel(*args, **kwargs):
        for attempt in range(tries - 1):
            try:
                return start(*args, **kwargs)
            except RuntimeError as error:
                if DIED_STARTING not in str(error):
                    raise
                time.sleep(wait_s * (attempt + 1))
        return start(*args, **kwargs)  # the last try: whatever it raises is reported

    start_new_kernel.__wrapped__ = start
    return start_new_kernel
