"""A class on a real JupyterHub: five learners, each a Unix account with a home of their own.

Learner 1 goes through the browser (login page, nbgitpuller link, Run All, a slider moved);
learners 2-5 through the hub's REST API and the Jupyter server API, as JupyterLab's own
requests would. The course reaches them from a git daemon on 127.0.0.1 (localhub/ here),
then changes under them: a new commit to lesson 00 and course_lib, pulled by opening the link
again. What nbgitpuller does when the course and a learner changed the same lines is asserted
here as the README documents it ("Teaching a class").
"""

import hashlib
import json
import os
import re
import stat
import time
import uuid
from urllib.parse import quote, urlsplit

import nbformat
import pytest

from localhub import Kernel, Slider, home, processes_of
from tools.lab_page import start_run_all

LESSON = "course/notebooks/00_start_here.ipynb"
DELETED = "course/notebooks/02b_attention_in_batches.ipynb"
IN_COURSE = "notebooks/00_start_here.ipynb"
IDLE = ".jp-Notebook-ExecutionIndicator[data-status='idle']"
ALL_RAN = """(expected) => {
    if (!document.querySelector("IDLE")) return false;
    const prompts = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputArea-prompt')]
        .map(p => p.textContent);
    if (prompts.some(p => p.includes('*'))) return false;
    return prompts.filter(p => /\\[\\d+\\]/.test(p)).length >= expected
        || document.querySelector('[data-mime-type="application/vnd.jupyter.error"]') !== null;
}""".replace("IDLE", IDLE)
SRC_CHANGED = "([selector, before]) => document.querySelector(selector).src !== before"
# the learner's own JupyterLab setting, as the course's browser test sets it: every cell stays
# in the page (JupyterLab otherwise renders the outputs of cells out of view only when reached)
LAB_SETTINGS = (
    ".jupyter/lab/user-settings/@jupyterlab/notebook-extension/tracker.jupyterlab-settings"
)

# the lines of lesson 00 the update and the learners change
SHIFT = "    shifted = x - x.max(dim=-1, keepdim=True).values"
RETURN = "    return exps / exps.sum(dim=-1, keepdim=True)"
COURSE_SHIFT = SHIFT + "  # the largest score becomes 0, so exp never overflows"
LEARNER_SHIFT = "    shifted = x - x.amax(dim=-1, keepdim=True)  # mine: amax keeps the shape"
LEARNER_RETURN = RETURN + "  # mine: each row divided by its own sum"
LEARNER_CELL = (
    "# my notes: weights sum to 1\nprint(round(float(softmax(torch.tensor([1.0, 2.0])).sum()), 4))"
)
LEARNER_LAST_CELL = "My own summary of lesson 00, written at the end."
COURSE_SENTENCE = " (Added mid-course: move the slider to 0 and every weight is the same.)"
COURSE_LAST_CELL = "## New in this update\n\nA section the course added after the class began."
COURSE_LIB_ADDITION = '''

def course_update() -> str:
    """Added by a mid-course update (the class test publishes it)."""
    return "the update arrived"
'''


def names(accounts) -> list[str]:
    return accounts.names


@pytest.fixture(scope="session")
def delivered(hub, course, learners, accounts):
    """Learners 2-5 log in, open the course's nbgitpuller link and pull, as its page does."""
    log = {}
    for name in names(accounts)[1:]:
        learner = learners[name]
        learner.login()
        learner.open_link(learner.link(course.url))  # spawns the server on the first visit
        log[name] = learner.pull(course.url)
        learner.token = hub.new_token(name)
    return log


def test_each_learner_logs_in_and_the_link_delivers_the_course(delivered, hub, accounts):
    for name, log in delivered.items():
        assert any("git clone" in line for line in log), log
        lesson = home(name) / LESSON
        assert lesson.is_file(), f"{name}: the link did not deliver lesson 00"
        # the learner's server, kernel and files are the learner's own account's
        owner = lesson.stat().st_uid
        assert owner == home(name).stat().st_uid != 0
        assert stat.S_IMODE(home(name).stat().st_mode) == 0o700, "a home others can read"
        servers = [
            p for p in processes_of(name) if "jupyterhub-singleuser" in " ".join(p.cmdline())
        ]
        assert servers, f"{name}: no single-user server runs as {name}"
        assert hub.user(name)["servers"][""]["ready"]


@pytest.fixture(scope="session")
def kernels(delivered, learners) -> dict[str, Kernel]:
    opened = {name: learners[name].kernel(LESSON) for name in delivered}
    yield opened
    for kernel in opened.values():
        kernel.close()


def test_lesson_00_runs_in_each_learners_kernel_and_an_explorer_moves(kernels, learners, accounts):
    for name, kernel in kernels.items():
        outputs = kernel.run_notebook(learners[name].notebook(LESSON))
        assert any(line.startswith("PASS  softmax") for out in outputs for line in out.split("\n"))
        # the kernel runs the learner's own clone of course_lib, as its own account
        where = kernel.execute("import course_lib, os; print(course_lib.__file__, os.getuid())")
        path, uid = where.split()
        assert path.startswith(str(home(name) / "course")) and int(uid) == home(name).stat().st_uid
        slider = Slider(kernel)
        pictures = [slider.move()[1] for _ in range(3)]
        assert len({hashlib.sha1(p).digest() for p in pictures}) == 3, "the picture did not change"


def test_a_learner_in_the_browser_from_login_to_a_moved_slider(
    hub, course, learners, accounts, chromium, artefacts
):
    name = names(accounts)[0]
    settings = home(name) / LAB_SETTINGS
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"windowingMode": "none"}))
    for path in [settings, *settings.parents]:
        if path == home(name):
            break
        os.chown(path, home(name).stat().st_uid, home(name).stat().st_gid)
    link = urlsplit(learners[name].link(course.url))
    page = chromium.new_page()
    try:
        learner_in_the_browser(page, hub, name, link, artefacts)
    except Exception:
        page.screenshot(path=str(artefacts / "failed.png"))
        raise
    finally:
        page.close()


def learner_in_the_browser(page, hub, name, link, artefacts) -> None:
    page.goto(f"{hub.url}/hub/login?next={quote(link.path + '?' + link.query)}")
    page.fill("#username_input", name)
    page.fill("#password_input", hub.password)
    page.click("#login_submit")
    # the hub starts the server, nbgitpuller's page pulls the course, then JupyterLab opens it
    page.wait_for_url(
        re.compile(r".*/lab/tree/course/notebooks/00_start_here\.ipynb.*"), timeout=240_000
    )
    page.wait_for_selector(IDLE, timeout=120_000)
    assert (home(name) / LESSON).is_file()
    cells = nbformat.read(home(name) / LESSON, 4).cells
    code_cells = [c for c in cells if c.cell_type == "code" and c.source.strip()]
    explorer = next(i for i, c in enumerate(cells) if "Explorer()" in c.source)
    start_run_all(page, tries=3, timeout_ms=20_000)
    page.wait_for_function(ALL_RAN, arg=len(code_cells), timeout=240_000)
    page.screenshot(path=str(artefacts / "lesson00-ran.png"), full_page=True)
    assert page.locator('[data-mime-type="application/vnd.jupyter.error"]').count() == 0
    assert "PASS  softmax" in page.locator(".jp-Notebook").inner_text()

    page.locator(".jp-Notebook .jp-Cell").nth(explorer).scroll_into_view_if_needed()
    handle = page.locator(".widget-slider .noUi-handle").first
    handle.scroll_into_view_if_needed()
    image = page.locator("img.widget-image").first
    before, readout = image.get_attribute("src"), page.locator(".widget-readout").first.inner_text()
    handle.focus()
    start = time.perf_counter()
    handle.press("ArrowRight")
    page.wait_for_function(SRC_CHANGED, arg=["img.widget-image", before], timeout=10_000)
    seconds = time.perf_counter() - start
    page.screenshot(path=str(artefacts / "lesson00-slider-moved.png"), full_page=True)
    assert page.locator(".widget-readout").first.inner_text() != readout
    (artefacts / "browser.json").write_text(json.dumps({"slider_to_picture_s": seconds}))


def test_every_kernel_websocket_has_tcp_nodelay(kernels, learners):
    """course_server (issue 15), enabled by deploy/singleuser/jupyter_server_config.py."""
    for name in kernels:
        response = learners[name].api("GET", "/course/nodelay")
        assert response.status_code == 200, f"{name}: course_server is not loaded"
        counts = response.json()
        assert counts["kernel_websockets"] >= 1 and counts["nodelay"] == counts["kernel_websockets"]


def test_learners_cannot_reach_each_other(kernels, learners, accounts):
    me, other = names(accounts)[1], names(accounts)[2]
    mine = learners[me]
    # through the hub: my token is refused on the other learner's server and user record
    for path in (f"/contents/{quote(LESSON)}", "/kernels", "/sessions"):
        assert learners[other].api("GET", path, token=mine.token).status_code == 403, path
    response = mine.session.get(
        f"{mine.hub.url}/hub/api/users/{other}",
        headers={"Authorization": f"token {mine.token}"},
        timeout=30,
    )
    assert response.status_code in (403, 404)
    # from my own kernel: the other home can be neither read nor written
    theirs = home(other)
    probe = f"""
import os
for attempt in (lambda: os.listdir({str(theirs)!r}),
                lambda: open({str(theirs / LESSON)!r}).read(),
                lambda: open({str(theirs / "planted.txt")!r}, 'w').write('x')):
    try:
        attempt()
        print('REACHED')
    except PermissionError:
        print('DENIED')
"""
    assert kernels[me].execute(probe).split() == ["DENIED"] * 3
    assert not (theirs / "planted.txt").exists()


def edit(learner, change) -> dict:
    """Load lesson 00 from the learner's server, change it, save it back (as JupyterLab saves)."""
    notebook = learner.notebook(LESSON)
    change(notebook)
    learner.save_notebook(LESSON, notebook)
    return notebook


def cell(text: str, kind: str = "code") -> dict:
    made = {"cell_type": kind, "id": uuid.uuid4().hex[:8], "metadata": {}, "source": text}
    if kind == "code":
        made.update(outputs=[], execution_count=None)
    return made


def source(notebook: dict, index: int) -> str:
    text = notebook["cells"][index]["source"]
    return text if isinstance(text, str) else "".join(text)


def exercise(notebook: dict) -> int:
    return next(i for i in range(len(notebook["cells"])) if "BEGIN SOLUTION" in source(notebook, i))


def replace_line(notebook: dict, old: str, new: str) -> None:
    index = exercise(notebook)
    text = source(notebook, index)
    assert old in text.split("\n"), f"lesson 00's exercise no longer has {old!r}"
    notebook["cells"][index]["source"] = text.replace(old, new)


@pytest.fixture(scope="session")
def update(kernels, course, learners, accounts):
    """Learners edit lesson 00; the course publishes a new commit; everyone opens the link again."""
    second, third, fourth, fifth = (learners[n] for n in names(accounts)[1:])

    def mine(notebook):  # the learner's answer changed on its last line, and a cell of notes
        replace_line(notebook, RETURN, LEARNER_RETURN)
        notebook["cells"].insert(exercise(notebook) + 2, cell(LEARNER_CELL))

    def same_line(notebook):  # the very line the course's update changes
        replace_line(notebook, SHIFT, LEARNER_SHIFT)

    def at_the_end(notebook):  # a note after the last cell, where the update adds a section
        notebook["cells"].append(cell(LEARNER_LAST_CELL, "markdown"))

    edited = {
        second.name: edit(second, mine),
        third.name: edit(third, same_line),
        fifth.name: edit(fifth, at_the_end),
    }
    fifth.api("DELETE", f"/contents/{quote(DELETED)}").raise_for_status()
    assert not (home(fifth.name) / DELETED).exists()
    before = {name: (home(name) / LESSON).read_bytes() for name in edited}

    lesson = nbformat.reads(course.read(IN_COURSE), as_version=4)
    index = next(i for i, c in enumerate(lesson.cells) if "SoftmaxExplorer()" in c.source) + 1
    lesson.cells[index].source += COURSE_SENTENCE
    replace_line(lesson, SHIFT, COURSE_SHIFT)
    lesson.cells.append(nbformat.v4.new_markdown_cell(COURSE_LAST_CELL, id="c0ffee00"))
    commit = course.publish(
        {
            IN_COURSE: nbformat.writes(lesson).rstrip("\n") + "\n",  # as nbformat.write
            "course_lib/show.py": course.read("course_lib/show.py") + COURSE_LIB_ADDITION,
        },
        "Mid-course update: lesson 00 and course_lib",
    )
    logs = {}
    for learner in (second, third, fourth, fifth):
        learner.open_link(learner.link(course.url))
        logs[learner.name] = learner.pull(course.url)
    return {"edited": edited, "before": before, "commit": commit, "logs": logs}


def after(name: str) -> dict:
    return json.loads((home(name) / LESSON).read_text(encoding="utf-8"))


def test_an_update_arrives_and_keeps_the_learners_edits(update, course, learners, accounts):
    second, fourth = names(accounts)[1], names(accounts)[3]
    # a learner who changed nothing has the course's new version, byte for byte
    assert (home(fourth) / LESSON).read_text(encoding="utf-8") == course.read(IN_COURSE)
    assert (home(fourth) / "course" / "course_lib" / "show.py").read_text() == course.read(
        "course_lib/show.py"
    )
    # a learner who changed their answer and added a cell keeps both, byte for byte, and gets
    # every change of the update: here the course's change to another line of the same cell too
    notebook = after(second)
    mine = update["edited"][second]
    ex = exercise(notebook)
    assert source(notebook, ex + 2) == LEARNER_CELL == source(mine, exercise(mine) + 2)
    lines = source(notebook, ex).split("\n")
    assert LEARNER_RETURN in lines and COURSE_SHIFT in lines
    assert COURSE_SENTENCE in "".join(source(notebook, i) for i in range(ex))
    assert source(notebook, len(notebook["cells"]) - 1) == COURSE_LAST_CELL
    nbformat.validate(nbformat.from_dict(notebook))
    # and the updated course_lib reaches a new kernel (the lesson's own, opened before the
    # update, has the old course_lib.show imported: a learner restarts it), in the lesson's
    # folder; the learner's own answer still passes
    kernel = learners[second].kernel(LESSON.replace("00_start_here", "00_after_the_update"))
    try:
        assert (
            kernel.execute(
                "from course_lib.show import course_update; print(course_update())"
            ).strip()
            == "the update arrived"
        )
        outputs = kernel.run_notebook(notebook)
        assert any("PASS  softmax" in out for out in outputs)
        ran = [
            i for i, c in enumerate(notebook["cells"])
            if c["cell_type"] == "code" and source(notebook, i).strip()
        ]  # fmt: skip
        mine_at = next(n for n, i in enumerate(ran) if source(notebook, i) == LEARNER_CELL)
        assert outputs[mine_at].strip() == "1.0"  # the learner's own cell
    finally:
        kernel.close()


def test_when_the_course_and_a_learner_change_the_same_lines_the_learner_wins(update, accounts):
    """nbgitpuller merges with `-Xours`: on lines both changed, the learner's side is kept and
    the course's change to those lines is dropped, silently; the rest of the update arrives."""
    third, fifth = names(accounts)[2], names(accounts)[4]
    notebook = after(third)
    lines = source(notebook, exercise(notebook)).split("\n")
    assert LEARNER_SHIFT in lines and COURSE_SHIFT not in lines
    assert COURSE_SENTENCE in json.dumps(notebook)  # other cells still updated
    nbformat.validate(nbformat.from_dict(notebook))
    # both added a cell after the last one: the learner's stays, the course's new section is lost
    notebook = after(fifth)
    assert source(notebook, len(notebook["cells"]) - 1) == LEARNER_LAST_CELL
    assert COURSE_LAST_CELL not in json.dumps(notebook)
    assert COURSE_SENTENCE in json.dumps(notebook)
    nbformat.validate(nbformat.from_dict(notebook))


def test_a_lesson_the_learner_deleted_comes_back(update, course, accounts):
    fifth = names(accounts)[4]
    assert (home(fifth) / DELETED).read_text(encoding="utf-8") == course.read(
        DELETED.removeprefix("course/")
    )
