"""Driving a JupyterLab page in Chromium: its menus and Run All.

One place for what the browser test (tests/browser/), the browser benchmark
(benchmarks/browser_latency.py) and the class test (tests/class/) all do to a lesson: pick a
menu item, and start Run All Cells, clicking again when the first click was lost (a click that
lands while the page or its kernel still settles does nothing).
"""

import re

# a prompt shows "[*]" or "[n]": some code cell has started
STARTED = """() => [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputArea-prompt')]
    .some(p => /[*\\d]/.test(p.textContent))"""


def click_menu(page, menu: str, item: str, *, timeout_ms: float | None = None) -> None:
    """Open menu `menu` of the menu bar and click its item `item` (exact labels)."""
    label = page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{re.escape(menu)}$"))
    label.click(timeout=timeout_ms)
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(item)}$")).click(
        timeout=timeout_ms
    )


# the dialog in which JupyterLab asks which kernel to start for a notebook it opened (on a
# loaded machine it can come up a few seconds after the notebook, over the menus)
KERNEL_DIALOG = ".jp-Dialog .jp-mod-accept"
STARTED_OR_ASKED = f"""() => ({STARTED})()
    || document.querySelector("{KERNEL_DIALOG}") !== null"""


def accept_kernel_dialog(page, *, wait_ms: int = 0) -> bool:
    """Accept the kernel a showing dialog proposes (waiting up to wait_ms for one); True if
    there was one."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.locator(KERNEL_DIALOG).first.click(timeout=wait_ms or 1_000)
    except PlaywrightTimeout:
        return False
    return True


def start_run_all(page, *, tries: int = 3, timeout_ms: int = 15_000, accept_kernel=False) -> None:
    """Run > Run All Cells until a cell has started, `tries` clicks at most.

    A kernel dialog in the way is accepted, also one that comes up after the click (it
    swallows the click: the cells run only once a kernel is chosen, so the click is made
    again, and does not count as a try); accept_kernel: first wait 5 s for one to show (a
    notebook new to the server can ask which kernel to start, a little after it opens).
    """
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    clicks = dialogs = 0
    while clicks < tries and dialogs <= tries:
        if accept_kernel:
            accept_kernel_dialog(page, wait_ms=5_000)
        elif page.locator(KERNEL_DIALOG).count():
            accept_kernel_dialog(page)
        try:
            click_menu(page, "Run", "Run All Cells", timeout_ms=timeout_ms)
        except PlaywrightTimeout:  # a dialog over the menus: accept it and click again
            dialogs += accept_kernel_dialog(page, wait_ms=2_000)
            clicks += 1
            continue
        try:
            page.wait_for_function(STARTED_OR_ASKED, timeout=timeout_ms)
        except PlaywrightTimeout:
            clicks += 1
            continue
        if page.evaluate(STARTED):
            return
        if accept_kernel_dialog(page):  # asked after the click: choose, click again
            dialogs += 1
        else:  # the dialog went by itself: count the click
            clicks += 1
    raise AssertionError(
        f"Run All Cells did not start the notebook ({clicks} clicks, {dialogs} kernel dialogs)"
    )
