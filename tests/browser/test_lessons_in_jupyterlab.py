"""Every lesson, as a learner first meets it: JupyterLab in headless Chromium, Run All on the
unsolved workspace copy, then every control moved.

The learner's copy (tests/browser/conftest.py) has every exercise still a stub, except lesson
02b's attention, which holds a classic slip: Run All must reach the end of every lesson without
a traceback, each checker saying "not implemented yet" (lesson 02b's attention: TRY AGAIN), so
skipping an exercise never blocks a lesson; lesson 02b's explorer, running the slipped function,
must say DIFFERS and name the query it shows, before and after the query moves. The course's
own lessons, opened without running, show every explorer's stored still: its setting, its
readout line and its picture (checked on one).

Explorers and their controls are found in the page, not listed here, so each lesson that
lands is covered as it is: an explorer is an output holding an ipywidgets Image
(`img.widget-image`); its controls are the inputs in the same output. Each control is moved
once (slider handle by keyboard, dropdown to another option, toggle buttons to another
button, checkbox clicked, button clicked) and the picture must change within a few seconds.
Screenshots of each explorer before and after go to artefacts/browser/<lesson>/ (git-ignored),
with a report.json of how long each change took to show. The lessons share one JupyterLab
page, opened once; see LessonTabs.
"""

import contextlib
import json
import re
import shutil
import threading
import time
import warnings
from pathlib import Path

import pytest
from learners_folder import SLIPPED_EXERCISE, SLIPPED_LESSON
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tools.lab_page import KERNEL_DIALOG, accept_kernel_dialog, click_menu, start_run_all

LESSONS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("[0-9][0-9]*_*.ipynb"))
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
IDLE = ".jp-Notebook-ExecutionIndicator[data-status='idle']"
RUN_ALL_TIMEOUT_MS = 240_000
PICTURE_TIMEOUT_MS = 10_000  # a change must show within this (a redraw here takes < 0.1 s)
# an explorer's still (Explorer.still_html), shown while its widget does not exist
STORED_STILL = ".jp-OutputArea-output[data-mime-type='text/html']:has(img[src^='data:image/png'])"
STILLS_SHOWN = """selector => [...document.querySelectorAll(selector)].map(out => {
    const img = out.querySelector('img');
    return {text: out.innerText, alt: img.alt, width: img.naturalWidth};
})"""
EXPLORER = ".jp-OutputArea-output:has(img.widget-image)"
CONCEPT_CHECK = (
    ".jp-OutputArea-output:has(textarea):has(button.widget-button):not(:has(img.widget-image))"
)
# Label everything a learner can operate in one output with its kind; a toggle-buttons group
# or radio group is one control (its first element stands for it, the rest are "part").
LABEL_CONTROLS = """out => [
    ...out.querySelectorAll('[role=slider], select, button, input, textarea')
].map((el, i) => {
    let kind = 'unknown', target = el;
    const group = el.closest('.widget-toggle-buttons, .widget-radio-box');
    if (group) {
        const first = group.querySelector('button, input') === el;
        kind = first ? (group.matches('.widget-radio-box') ? 'radio' : 'toggle buttons') : 'part';
        target = group;
    } else if (el.matches('.widget-slider .noUi-handle')) kind = 'slider';
    else if (el.matches('.widget-dropdown select')) kind = 'dropdown';
    else if (el.matches('.widget-checkbox input[type=checkbox]')) kind = 'checkbox';
    else if (el.matches('button')) kind = 'button';
    else if (el.matches('.widget-text input, .widget-textarea textarea')) kind = 'text';
    if (kind !== 'part') target.dataset.courseControl = String(i);
    return kind;
})"""

# One entry per cell, in order: is it code, its prompt, does it show an error or traceback?
CELL_STATES = """() => [...document.querySelectorAll('.jp-Notebook .jp-Cell')].map(cell => ({
    code: cell.classList.contains('jp-CodeCell'),
    prompt: (cell.querySelector('.jp-InputArea-prompt')?.textContent || '').trim(),
    error: cell.querySelector('[data-mime-type="application/vnd.jupyter.error"]') !== null
        || /Traceback|Error displaying widget|Error rendering/.test(
            [...cell.querySelectorAll('.jp-OutputArea-output')].map(o => o.innerText).join('\\n')),
    text: [...cell.querySelectorAll('.jp-OutputArea-output')].map(o => o.innerText).join('\\n'),
}))"""
ALL_RAN = """(expected) => {
    if (!document.querySelector("IDLE")) return false;
    const cells = [...document.querySelectorAll('.jp-Notebook .jp-Cell')];
    const prompts = cells.map(c => (c.querySelector('.jp-InputArea-prompt')?.textContent || ''));
    if (prompts.some(p => p.includes('*'))) return false;
    const ran = cells.filter(
        (c, i) => c.classList.contains('jp-CodeCell') && /\\[\\d+\\]/.test(prompts[i]));
    const failed = document.querySelector('[data-mime-type="application/vnd.jupyter.error"]');
    return ran.length >= expected || failed !== null;
}""".replace("IDLE", IDLE)
CLOSED_ALL = "() => document.querySelectorAll('.jp-Notebook').length === 0"
PICTURE_CHANGED = """([images, before]) => images.some((img, i) => img.src !== before[i])"""


# JupyterLab can ask which kernel to start after the notebook opened: the dialog then
# swallows Run All
RAN_OR_ASKED = f"""(expected) => ({ALL_RAN})(expected)
    || document.querySelector("{KERNEL_DIALOG}") !== null"""


# What the page shows when Run All has not finished: the kernel's status, how many code cells
# ran, which still wait ("[*]"), and any dialog over the notebook (a dead kernel's, say)
RUN_STATE = """() => {
    const prompts = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell')]
        .map(c => (c.querySelector('.jp-InputArea-prompt')?.textContent || '').trim());
    return {
        status: document.querySelector('.jp-Notebook-ExecutionIndicator')
            ?.getAttribute('data-status') ?? 'no indicator',
        code_cells: prompts.length,
        ran: prompts.filter(p => /\\[\\d+\\]/.test(p)).length,
        waiting: prompts.map((p, i) => p.includes('*') ? i : -1).filter(i => i >= 0),
        dialogs: [...document.querySelectorAll('.jp-Dialog')].map(d => d.innerText.slice(0, 300)),
    };
}"""


class RunAllStalled(AssertionError):
    """Run All did not reach the end in time; the message says what the page showed."""


def run_to_the_end(page, runnable: int, server_log: Path | None = None) -> None:
    """Run All Cells and wait until `runnable` code cells have run (or one failed), accepting
    the kernel JupyterLab proposes and running all again if it asks for one meanwhile.

    Raises RunAllStalled, naming what the page showed and the server log's last lines, if
    the cells have not all run within RUN_ALL_TIMEOUT_MS, or if no cell started at all (a
    kernel that never came up: JupyterLab asks which kernel to start, again and again)."""

    def start() -> None:
        try:
            start_run_all(page)
        except AssertionError as error:  # tools.lab_page: Run All did not start the notebook
            raise RunAllStalled(f"{error}\n{stall_report(page, runnable, server_log)}") from None

    deadline = time.monotonic() + RUN_ALL_TIMEOUT_MS / 1000
    start()
    while True:
        if time.monotonic() > deadline:  # a dialog that keeps coming back (a dying kernel)
            raise RunAllStalled(stall_report(page, runnable, server_log))
        left_ms = max(1_000, int((deadline - time.monotonic()) * 1000))
        try:
            page.wait_for_function(RAN_OR_ASKED, arg=runnable, timeout=left_ms, polling=250)
        except PlaywrightTimeout:
            raise RunAllStalled(stall_report(page, runnable, server_log)) from None
        if not accept_kernel_dialog(page):
            return
        start()


def stall_report(page, runnable: int, server_log: Path | None) -> str:
    """Why Run All looks stuck, in a few lines: the page's state and the server's last words."""
    try:  # page.evaluate has no timeout: a page whose script is stuck would hang it
        state = page.wait_for_function(f"() => ({RUN_STATE})()", timeout=5_000).json_value()
    except Exception as error:  # a stuck or crashed page still gets its server log reported
        state = f"(the page did not answer: {error})"
    lines = [f"Run All: {runnable} code cells to run in {RUN_ALL_TIMEOUT_MS / 1000:.0f} s; "
             f"the page showed {state}"]  # fmt: skip
    if server_log is not None and server_log.exists():
        tail = server_log.read_text(encoding="utf-8", errors="replace").splitlines()[-15:]
        lines += ["the server log's last lines:", *tail]
    return "\n".join(lines)


def lesson_facts(path: Path, opened: Path | None = None) -> dict:
    """What the course's stored notebook says (its explorers' reprs, concept checks), with
    the cells of the notebook opened (the learner's copy, where given): which may raise, which
    are checkers (nbgrader's graded cells), how many run."""
    nb = json.loads(path.read_text())
    explorers, checks = [], 0
    for cell in nb["cells"]:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if WIDGET_VIEW in data and "image/png" in data:
                explorers.append("".join(data.get("text/plain", "explorer")))
            elif WIDGET_VIEW in data and "text/html" in data:
                checks += 1
    if opened is not None:
        nb = json.loads(opened.read_text())
    return {
        "cells": nb["cells"],
        "checkers": [
            c.get("metadata", {}).get("nbgrader", {}).get("grade", False) for c in nb["cells"]
        ],
        "may_raise": [
            "raises-exception" in c.get("metadata", {}).get("tags", []) for c in nb["cells"]
        ],
        "runnable": sum(
            1 for c in nb["cells"] if c["cell_type"] == "code" and "".join(c["source"]).strip()
        ),
        "explorers": explorers,
        "concept_checks": checks,
    }


def errors_shown(page, facts) -> list[str]:
    states = page.evaluate(CELL_STATES)
    assert len(states) == len(facts["cells"]), "JupyterLab shows a different number of cells"
    return [
        f"cell {index} ({''.join(facts['cells'][index]['source'])[:60]!r}) shows "
        f"{state['text'][-400:]!r}"
        for index, state in enumerate(states)
        if state["error"] and not facts["may_raise"][index]
    ]


def control_moves(output) -> list:
    """(kind, move) for every control in one explorer's output; unknown kinds fail the test."""
    kinds = output.evaluate(LABEL_CONTROLS)
    moves = []
    for i, kind in enumerate(kinds):
        control = output.locator(f"[data-course-control='{i}']")
        if kind == "slider":

            def nudge(handle=control):
                at_max = handle.get_attribute("aria-valuenow") == handle.get_attribute(
                    "aria-valuemax"
                )
                handle.focus()
                handle.press("ArrowLeft" if at_max else "ArrowRight")

            moves.append((kind, nudge))
        elif kind == "dropdown":

            def choose(select=control):
                count = select.locator("option").count()
                current = select.evaluate("s => s.selectedIndex")
                select.select_option(index=(current + 1) % count)

            moves.append((kind, choose))
        elif kind == "toggle buttons":
            other = control.locator("button:not(.mod-active)").first
            moves.append((kind, other.click))
        elif kind == "radio":
            moves.append((kind, control.locator("input:not(:checked)").first.check))
        elif kind in ("checkbox", "button"):
            moves.append((kind, control.click))
        elif kind == "text":
            continue  # free text has no safe generic edit; unit tests cover text controls
        elif kind != "part":
            raise AssertionError(f"a control the browser test cannot move: {kind}")
    return moves


def exercise_explorer(page, output, name: str, shots: Path, index: int) -> dict:
    """Move each control of one explorer; the picture must change after each move."""
    stem = f"{index:02d}_{re.sub(r'[^A-Za-z0-9]+', '', name.split('(')[0])}"
    output.scroll_into_view_if_needed()
    output.screenshot(path=shots / f"{stem}_before.png")
    images = output.locator("img.widget-image").element_handles()
    moves = control_moves(output)
    assert moves, f"{name}: an explorer with no controls"
    changes = []
    for kind, move in moves:
        before = [image.get_attribute("src") for image in images]
        start = time.perf_counter()
        move()
        try:
            page.wait_for_function(
                PICTURE_CHANGED, arg=[images, before], timeout=PICTURE_TIMEOUT_MS, polling=20
            )
        except PlaywrightTimeout as error:
            raise AssertionError(
                f"{name}: moving a {kind} did not change the picture within "
                f"{PICTURE_TIMEOUT_MS / 1000:.0f} s"
            ) from error
        changes.append({"control": kind, "seconds": round(time.perf_counter() - start, 3)})
    output.screenshot(path=shots / f"{stem}_after.png")
    return {"explorer": name, "changes": changes}


FOCUS_IN = "(out, i) => out.querySelector(`[data-course-control='${i}']`)"
FOCUS_IN += ".contains(document.activeElement)"


def key_for(output, kind: str, i: int) -> list[str]:
    """The keys that move control i by one step, as a learner without a mouse would press."""
    control = output.locator(f"[data-course-control='{i}']")
    if kind == "slider":
        at_max = control.get_attribute("aria-valuenow") == control.get_attribute("aria-valuemax")
        return ["ArrowLeft" if at_max else "ArrowRight"]
    if kind == "dropdown":
        last = control.evaluate("s => s.selectedIndex === s.options.length - 1")
        return ["ArrowUp" if last else "ArrowDown"]
    if kind == "toggle buttons":  # Tab from an active button to the next one, then press it
        on_active = control.evaluate(
            "g => g.contains(document.activeElement) && "
            "document.activeElement.classList.contains('mod-active')"
        )
        on_last = control.evaluate(
            "g => [...g.querySelectorAll('button')].pop() === document.activeElement"
        )
        return (["Shift+Tab" if on_last else "Tab"] if on_active else []) + ["Space"]
    if kind in ("checkbox", "button"):
        return ["Space"]
    if kind == "radio":
        return ["ArrowDown"]
    raise AssertionError(f"no key for a {kind}")


def exercise_by_keyboard(page, output, name: str) -> dict:
    """Operate every control of one explorer with the keyboard alone.

    Focus starts on the first control; Tab must reach each next control in order (a slider's
    editable readout may come between), the keys move it, and the picture must change. The
    picture's title, which screen readers read for it, must state what it shows in numbers.
    """
    output.scroll_into_view_if_needed()
    kinds = output.evaluate(LABEL_CONTROLS)
    controls = [(i, k) for i, k in enumerate(kinds) if k not in ("part", "text")]
    images = output.locator("img.widget-image").element_handles()
    start_at = output.locator(f"[data-course-control='{controls[0][0]}']")
    if controls[0][1] == "toggle buttons":  # the group: its first button takes the focus
        start_at = start_at.locator("button").first
    start_at.focus()
    changes = []
    for n, (i, kind) in enumerate(controls):
        for _ in range(4):  # Tab on to this control
            if output.evaluate(FOCUS_IN, i):
                break
            page.keyboard.press("Tab")
        assert output.evaluate(FOCUS_IN, i), f"{name}: Tab did not reach control {n} ({kind})"
        before = [image.get_attribute("src") for image in images]
        start = time.perf_counter()
        for key in key_for(output, kind, i):
            page.keyboard.press(key)
        try:
            page.wait_for_function(
                PICTURE_CHANGED, arg=[images, before], timeout=PICTURE_TIMEOUT_MS, polling=20
            )
        except PlaywrightTimeout as error:
            raise AssertionError(f"{name}: keys on a {kind} did not change the picture") from error
        changes.append({"control": kind, "seconds": round(time.perf_counter() - start, 3)})
    for image in images:
        title = image.get_attribute("title") or ""
        assert re.search(r"\d", title), f"{name}: the picture's text alternative is {title!r}"
    return {"explorer": name, "keyboard": changes}


def exercise_concept_check(page, output, shot: Path) -> None:
    shown = output.locator(".widget-html-content")
    filled = "els => els.filter(e => e.innerText.trim()).length"
    before = shown.evaluate_all(filled)
    output.locator("textarea").fill("My own answer first.")
    output.locator("button.widget-button").click()
    page.wait_for_function(
        f"([out, n]) => ({filled})([...out.querySelectorAll('.widget-html-content')]) > n",
        arg=[output.element_handle(), before],
        timeout=PICTURE_TIMEOUT_MS,
    )
    output.screenshot(path=shot)


class LessonTabs:
    """One JupyterLab page for all lessons, holding one lesson at a time.

    Loading JupyterLab takes about 5 s on two cores; opening the next lesson in the page
    already loaded (File > Open from Path...) about 2 s. After a lesson its tab is closed
    (changes discarded) and its kernel shut down; after a failure the whole page is dropped,
    so the next lesson starts from a fresh load.
    """

    def __init__(self, lab, context):
        self.lab, self.context, self.page = lab, context, None
        self.stopping = []  # threads shutting down kernels of closed lessons

    def open(self, name: str):
        """Open the notebook at `name` (relative to the server's root) in the shared page."""
        if self.page is None:
            self.page = self.context.new_page()
            self.page.goto(self.lab.url(f"/lab/tree/{name}?reset"))
        else:
            click_menu(self.page, "File", "Open from Path…")
            self.page.locator(".jp-Dialog input").fill(name)
            self.page.locator(".jp-Dialog input").press("Enter")
        tab = Path(name).name
        self.page.locator(".lm-TabBar-tab.lm-mod-current", has_text=tab).wait_for()
        self.page.wait_for_selector(IDLE, timeout=90_000)
        return self.page

    def close(self, name: str, *, failed: bool) -> None:
        page, self.page = self.page, None
        if page is not None:
            if not failed and self._close_tab(page, Path(name).name):
                self.page = page  # clean: the next lesson opens here
            else:
                page.close()
        # free the kernel's memory; the server takes a second or two to stop a kernel, which
        # the next lesson need not wait for
        sessions = [s["id"] for s in self.lab.api("/api/sessions")]
        stop = threading.Thread(target=self._stop, args=(sessions,))
        stop.start()
        self.stopping.append(stop)

    @staticmethod
    def _close_tab(page, tab: str) -> bool:
        """Close the lesson's tab, discarding its changes; False if the page did not comply."""
        try:
            click_menu(page, "File", "Close Tab")
            page.locator(".jp-Dialog button", has_text="Discard").click(timeout=5_000)
            page.locator(".lm-TabBar-tab", has_text=tab).wait_for(state="detached")
            page.wait_for_function(CLOSED_ALL, timeout=5_000)
        except Exception:
            return False
        return True

    def wait_for_stopped(self, timeout: float = 30) -> None:
        """Wait until the kernels of closed lessons have been stopped."""
        for stop in self.stopping:
            stop.join(timeout=timeout)
            assert not stop.is_alive(), f"the server took over {timeout} s to stop a kernel"

    def _stop(self, sessions: list[str]) -> None:
        for session in sessions:
            with contextlib.suppress(OSError):  # 404: already stopped by an earlier close
                self.lab.api(f"/api/sessions/{session}", method="DELETE")


@pytest.fixture(scope="module")
def tabs(lab, browser_context):
    tabs = LessonTabs(lab, browser_context)
    yield tabs
    if tabs.page is not None:
        tabs.page.close()
    tabs.wait_for_stopped()


VERDICT = re.compile(r"^(PASS|TRY AGAIN)\s+(\w+): (.*)$", re.MULTILINE)


def checker_verdicts(page, facts) -> list[tuple[str, str, str]]:
    """(PASS or TRY AGAIN, exercise, message) for every verdict the checker cells print."""
    states = page.evaluate(CELL_STATES)
    return [
        verdict
        for index, state in enumerate(states)
        if facts["checkers"][index]
        for verdict in VERDICT.findall(state["text"])
    ]


def assert_slip_is_flagged(page, explorer, shots: Path) -> None:
    """Lesson 02b's explorer runs the learner's slipped attention: its readout says DIFFERS and
    names the query shown, and names the new one after the query slider moves."""
    readout = explorer.locator(".widget-html-content").first
    first = readout.inner_text()
    assert "DIFFERS" in first, first
    query = re.search(r"query (\d+)", first.split("DIFFERS", 1)[1])
    assert query, f"the warning does not name the query setting: {first!r}"
    handle = explorer.locator(".widget-slider .noUi-handle").first
    handle.focus()
    handle.press("ArrowLeft")
    moved = f"query {int(query.group(1)) - 1}"
    try:
        page.wait_for_function(
            "([out, text]) => out.innerText.includes(text)",
            arg=[explorer.element_handle(), moved],
            timeout=PICTURE_TIMEOUT_MS,
        )
    except PlaywrightTimeout as error:
        raise AssertionError(
            f"after moving the query, the readout says {readout.inner_text()!r}"
        ) from error
    after = readout.inner_text()
    assert "DIFFERS" in after and moved in after.split("DIFFERS", 1)[1], after
    explorer.screenshot(path=shots / "learner_attention_differs.png")


def test_a_kernel_that_never_starts_is_a_stall_with_its_report(monkeypatch, tmp_path):
    # no browser: a page that answers nothing, and a Run All that gives up as tools.lab_page
    # does when JupyterLab keeps asking which kernel to start
    def gives_up(page):
        raise AssertionError("Run All Cells did not start the notebook (3 clicks, 4 dialogs)")

    class SilentPage:
        def wait_for_function(self, *args, **kwargs):
            raise PlaywrightTimeout("no answer")

    log = tmp_path / "server.log"
    log.write_text("[I] Kernel started\n[E] Kernel died before replying to kernel_info\n")
    monkeypatch.setitem(globals(), "start_run_all", gives_up)
    with pytest.raises(RunAllStalled) as stalled:
        run_to_the_end(SilentPage(), 12, log)
    said = str(stalled.value)
    assert "did not start the notebook (3 clicks, 4 dialogs)" in said
    assert "the page did not answer" in said and "Kernel died before replying" in said


def test_a_stored_lesson_shows_its_explorers_stills_before_running(tabs):
    """The course's lesson as stored: while the widget does not exist yet, JupyterLab falls
    back to each explorer's HTML part (ranked before its PNG), the still, which must show its
    setting, its readout and its picture, and no cell shows an error. Checked on one lesson:
    the other lessons' stored pictures are counted below, where every live explorer must have
    a stored one (lesson_facts counts the explorers that store a picture)."""
    path = LESSONS[0]
    facts = lesson_facts(path)
    failed = True
    try:
        page = tabs.open(f"course/{path.name}")
        try:
            page.wait_for_function(
                f"n => [...document.querySelectorAll({STORED_STILL!r})]"
                ".filter(out => out.querySelector('img').naturalWidth > 0).length >= n",
                arg=len(facts["explorers"]),
                timeout=PICTURE_TIMEOUT_MS,
            )
        except PlaywrightTimeout as error:
            raise AssertionError("before Run All, an explorer shows no stored still") from error
        stills = page.evaluate(STILLS_SHOWN, STORED_STILL)
        for still, name in zip(stills, facts["explorers"], strict=True):
            kind = name.split("(", 1)[0]
            assert f"{kind}, a still picture at " in still["text"], still["text"]
            assert still["alt"] and still["alt"].split(". ", 1)[1] in still["text"], still
        assert not errors_shown(page, facts)
        failed = False
    finally:
        tabs.close(f"course/{path.name}", failed=failed)


def has_exercises(path: Path) -> bool:
    """Whether lesson `path` has exercises of its own (its checkers print verdicts)."""
    import importlib

    from course_lib.exercises import LESSONS, lesson_key

    module = importlib.import_module(f"course_lib.exercises.{LESSONS[lesson_key(path.stem)]}")
    return bool(module.EXERCISES)


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_learners_copy_runs_and_every_explorer_responds(path, tabs, lab, artefacts):
    facts = lesson_facts(path, opened=lab.root / path.name)
    shots = artefacts / path.stem
    shutil.rmtree(shots, ignore_errors=True)
    shots.mkdir(parents=True)
    timings = {}
    start = time.perf_counter()
    failed = True
    try:
        page = tabs.open(path.name)
        timings["open"] = time.perf_counter() - start
        server_log = lab.root.parent / "server.log"
        stalled = None
        try:
            run_to_the_end(page, facts["runnable"], server_log)
        except RunAllStalled as first:
            # Once in CI a lesson that runs in 7 s here stalled for the whole 240 s, with
            # nothing left to say why; once here a kernel never started (4 kernel dialogs). Say
            # what the page showed, then try once more on a fresh page and kernel: a lesson
            # that hangs for itself stalls again and fails
            stalled = str(first)
            warnings.warn(f"{path.name}: Run All stalled, tried once more. {stalled}", stacklevel=1)
            with contextlib.suppress(Exception):
                page.screenshot(path=shots / "stalled.png")
            tabs.close(path.name, failed=True)
            tabs.wait_for_stopped()  # else the old session's stop could take the new kernel
            page = tabs.open(path.name)
            run_to_the_end(page, facts["runnable"], server_log)
        timings["run_all"] = time.perf_counter() - start - timings["open"]
        errors = errors_shown(page, facts)
        assert not errors, f"after Run All, errors show in {errors}"
        verdicts = checker_verdicts(page, facts)
        if has_exercises(path):
            assert verdicts, f"{path.name}: no checker printed a verdict"
        else:  # a part of a split lesson with no exercise of its own (04b, 07b, 15b)
            assert not verdicts, f"{path.name} has no exercise, yet printed {verdicts}"
        for outcome, exercise, message in verdicts:
            if path.name == SLIPPED_LESSON and exercise == SLIPPED_EXERCISE:
                assert outcome == "TRY AGAIN" and "not implemented" not in message, message
            else:
                assert outcome == "TRY AGAIN" and "not implemented yet" in message, message

        explorers = page.locator(EXPLORER)
        assert explorers.count() == len(facts["explorers"]), (
            f"JupyterLab shows {explorers.count()} explorers, the notebook stores "
            f"{len(facts['explorers'])}"
        )
        if path.name == SLIPPED_LESSON:
            assert_slip_is_flagged(page, explorers.nth(0), shots)
        # one explorer per lesson by keyboard alone, then every explorer by mouse (a lesson
        # whose figures teach without one, lesson 14, has none)
        report = []
        if facts["explorers"]:
            report.append(exercise_by_keyboard(page, explorers.nth(0), facts["explorers"][0]))
        report += [
            exercise_explorer(page, explorers.nth(i), name, shots, i + 1)
            for i, name in enumerate(facts["explorers"])
        ]
        checks = page.locator(CONCEPT_CHECK)
        assert checks.count() == facts["concept_checks"]
        for i in range(checks.count()):
            exercise_concept_check(page, checks.nth(i), shots / f"concept_check_{i + 1:02d}.png")
        errors = errors_shown(page, facts)
        assert not errors, f"after moving the controls, errors show in {errors}"
        timings["total"] = time.perf_counter() - start
        (shots / "report.json").write_text(
            json.dumps(
                {
                    "seconds": {k: round(v, 1) for k, v in timings.items()},
                    "explorers": report,
                    "concept_checks": facts["concept_checks"],
                    **({"first_run_all_stalled": stalled} if stalled else {}),
                },
                indent=1,
            )
        )
        failed = False
    except BaseException:
        with contextlib.suppress(Exception):
            tabs.page.screenshot(path=shots / "failure.png")
        raise
    finally:
        tabs.close(path.name, failed=failed)


def test_jupyterlab_asks_for_no_news_and_no_updates(lab):
    """The course's overrides.json, which course.py installs into .venv, keeps the lab quiet.

    This test's own settings leave notifications alone, so the defaults it reads are the
    course's: no news feed, no update check (nothing reaches the internet, and no prompt
    about news covers the first lesson).
    """
    found = lab.api("/lab/api/settings/@jupyterlab/apputils-extension:notification")
    defaults = {name: spec.get("default") for name, spec in found["schema"]["properties"].items()}
    assert (defaults["fetchNews"], defaults["checkForUpdates"]) == ("false", False), (
        "run the test through `python course.py browser` or `... test`: they install "
        "tools/jupyterlab/overrides.json into .venv/share/jupyter/lab/settings/"
    )
