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


def click_menu(page, menu: str, item: str) -> None:
    """Open menu `menu` of the menu bar and click its item `item` (exact labels)."""
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{re.escape(menu)}$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(item)}$")).click()


def start_run_all(page, *, tries: int = 2, timeout_ms: int = 15_000, accept_kernel=False) -> None:
    """Run > Run All Cells until a cell has started, `tries` clicks at most.

    accept_kernel: first accept the kernel a dialog proposes, if one shows (a notebook new to
    the server can ask which kernel to start, a little after it opens).
    """
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for _ in range(tries):
        if accept_kernel:
            try:
                page.locator(".jp-Dialog .jp-mod-accept").click(timeout=5_000)
            except PlaywrightTimeout:
                pass
        click_menu(page, "Run", "Run All Cells")
        try:
            page.wait_for_function(STARTED, timeout=timeout_ms)
            return
        except PlaywrightTimeout:
            continue
    raise AssertionError(f"Run All Cells did not start the notebook ({tries} clicks)")
