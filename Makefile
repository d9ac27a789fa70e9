# Two commands do all the set-up: `make lab` runs the course, `make test` checks it.
# Both create .venv on first use and reinstall only when requirements.txt or
# pyproject.toml change.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PORT ?= 8888
# a fresh random token per `make lab` unless one is given: never an empty token
# (`:=` so the printed URL and the server share one token; `?=` would draw a new one per use)
ifndef TOKEN
TOKEN := $(shell $(PYTHON) -c "import secrets; print(secrets.token_hex(24))")
endif
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)
NBVAL := --nbval --nbval-current-env --nbval-cell-timeout=300 \
	--nbval-sanitize-with tests/sanitize.cfg
# Kernel paths. torch picks its vectorised math kernels by CPU (AVX-512, AVX2, ARM's, or the
# generic ones) and MKL picks its own; each rounds differently, so every stored output and
# every claim must hold on all of them, not only on the CPU that recorded it. `make test`
# runs everything on this CPU's own path, then unit tests and notebooks again on torch's
# generic path; `make portable` adds AVX2 and other thread counts (.ci/run runs it).
GENERIC := ATEN_CPU_CAPABILITY=default MKL_ENABLE_INSTRUCTIONS=SSE4_2
AVX2 := ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2
UNIT_AND_NBVAL := -m pytest -rs -n 2 --dist loadfile --ignore=tests/browser tests $(NBVAL) notebooks
# the browser test needs none of the notebook, property-test or parallel plugins, nor the
# unit tests' conftest (which imports torch): without them pytest starts in 1 s, not 12 s
# (nbformat's import alone builds a URI grammar for 2.6 s)
BROWSER_PYTEST := -m pytest -rs --confcutdir=tests/browser -p no:nbval -p no:hypothesispytest \
	-p no:xdist -p no:xdist.looponfail -p no:anyio
BROWSER_TEST := $(BROWSER_PYTEST) tests/browser

.PHONY: lab test quick portable unit nbval notebooks workspace learner venv clean bench lint html \
	browser margins generic-then-site browser-lessons

venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --disable-pip-version-check -q -r requirements.txt
	@touch $(STAMP)

# the course's JupyterLab defaults (no news or update checks: nothing reaches the internet
# and no prompt covers a lesson), where JupyterLab reads application-wide overrides
LAB_OVERRIDES := $(VENV)/share/jupyter/lab/settings/overrides.json

$(LAB_OVERRIDES): tools/jupyterlab/overrides.json $(STAMP)
	@mkdir -p $(dir $@)
	cp $< $@

workspace: $(STAMP)
	$(PY) -m course_lib.workspace notebooks workspace

# learner/ (committed: what the Colab links open) afresh, and the Colab links of the README and
# of each lesson's first cell from course_lib/colab.py's REPOSITORY (tests/test_colab.py)
learner: $(STAMP)
	$(PY) -m tools.learner_copies

# the course's server settings, shared with start_lab and the class's servers: 127.0.0.1, no
# news or update checks, course_server's TCP_NODELAY on kernel websockets
SERVER_CONFIG := --config=$(CURDIR)/course_server/jupyter_server_config.py

lab: workspace $(LAB_OVERRIDES)
	@echo "JupyterLab on http://127.0.0.1:$(PORT)/lab/tree/00_start_here.ipynb?token=$(TOKEN)"
	$(VENV)/bin/jupyter lab --no-browser $(ROOT_FLAG) $(SERVER_CONFIG) \
		--ServerApp.port=$(PORT) --IdentityProvider.token=$(TOKEN) \
		--ServerApp.root_dir=workspace --LabApp.default_url=/lab/tree/00_start_here.ipynb

# -rs prints why anything was skipped (e.g. the browser test without Chromium: one line).
# 1. Unit tests and notebooks on two workers, whole files each (--dist loadfile keeps one
#    notebook's cells in one kernel), every lesson within its run-time budget
#    (tools/lesson_budget.py). One thread per kernel: beside the other worker, a kernel's
#    second torch thread only waits for a core (lesson 03's cells took 14-20 s so, 5-6 s with
#    one thread); the unit tests run on one thread anyway (tests/conftest.py). `make portable`
#    runs the notebooks with the default thread count and with 4.
# 2. At the same time, each on one core: on torch's generic kernel path (default threads)
#    the notebooks and the tests that measure rounding-sensitive values (marked `rounding` by
#    conftest.py), then the static site built and opened from disk; and the browser test of
#    the lessons, which runs every lesson as a learner first meets it (the unsolved workspace
#    copy) in JupyterLab, its kernels on one thread (it compares no numbers).
#    --output-sync prints each lane's output whole when it ends.
# Retraining checks (`retrains`), the installed wheel (`wheel`) and the other unit tests on
# other paths: `make portable`.
test: $(STAMP) $(LAB_OVERRIDES) lint
	OMP_NUM_THREADS=1 $(PY) $(UNIT_AND_NBVAL) -m "not retrains and not wheel" --lesson-budget
	$(MAKE) --no-print-directory -j2 --output-sync=target generic-then-site browser-lessons

generic-then-site: $(STAMP)
	$(GENERIC) $(PY) -m pytest -rs -p no:xdist --ignore=tests/browser tests $(NBVAL) notebooks \
		-m "rounding and not retrains"
	$(PY) $(BROWSER_PYTEST) tests/browser/test_static_site.py

browser-lessons: $(STAMP) $(LAB_OVERRIDES)
	OMP_NUM_THREADS=1 $(PY) $(BROWSER_PYTEST) tests/browser/test_lessons_in_jupyterlab.py

# the edit-test loop: unit and claim tests, no notebooks, no training, no browser, no hub,
# no explorers (`make test` runs all of them)
quick: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist worksteal -p no:nbval --ignore=tests/browser \
		--ignore=tests/class -m "not slow and not retrains and not explorers" tests

# what `make test` leaves out, run by .ci/run: the retraining checks (native path), the
# unit tests `make test` ran on one path only (generic path), everything again on AVX2, the
# course as a wheel installed into a fresh venv, whose lessons run from a folder outside the
# repository with the default thread count (tests/test_wheel.py), and the notebooks with 4
# threads (`make test` ran them with 1)
portable: $(STAMP)
	$(PY) -m pytest -rs -n 2 --dist loadfile --ignore=tests/browser -m retrains tests
	$(GENERIC) $(PY) -m pytest -rs -n 2 --dist loadfile --ignore=tests/browser \
		-m "not rounding and not path_independent and not retrains and not wheel" tests
	$(AVX2) $(PY) $(UNIT_AND_NBVAL) -m "not path_independent and not wheel"
	$(PY) -m pytest -rs -p no:xdist --durations=4 -m wheel tests/test_wheel.py
	OMP_NUM_THREADS=4 $(PY) -m pytest -rs -n 2 --dist loadfile $(NBVAL) notebooks

# every claim test's measured values under each kernel path (for the comments beside them)
margins: $(STAMP)
	$(PY) -m tools.claim_margins

unit: $(STAMP)
	$(PY) -m pytest tests --ignore=tests/browser -m "not wheel"

nbval: $(STAMP)
	$(PY) -m pytest $(NBVAL) notebooks

notebooks: $(STAMP)
	$(PY) -m tools.run_notebooks notebooks/*.ipynb

# ---------------------------------------------------------------- lint, html, browser (issue 8)
LINT_PATHS := course_lib course_server tests tools notebooks deploy setup.py $(wildcard benchmarks)

lint: $(STAMP)
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)

# every lesson as static HTML in site/ (git-ignored): explorers show their starting picture
html: $(STAMP)
	$(PY) -m tools.build_site site notebooks/[0-9][0-9]_*.ipynb

# only the browser test (needs /usr/bin/chromium); screenshots in artefacts/browser/
browser: $(STAMP) $(LAB_OVERRIDES)
	$(PY) $(BROWSER_TEST)

bench: $(STAMP)
	$(PY) -m benchmarks

clean:
	rm -rf $(VENV) site artefacts

# ---------------------------------------------------------------- a whole class (issue 16)
# JupyterHub for a class: deploy/ holds the set-ups, README "Teaching a class" the walk-through.
# The learners' environment is a venv of its own, .class/venv, from deploy/requirements.txt (the
# course's pins plus jupyterhub and nbgitpuller, as in the image): each learner's server runs
# as that learner's Unix account, so its Python must be one every account can run (not one
# under /root, as pyenv's is). nbgrader gets a small venv too (.class/grader), so learners'
# JupyterLab carries no grading menus; it runs the lessons in the course's kernel.
CLASS := .class
CLASS_PYTHON ?= $(firstword $(wildcard /usr/bin/python3.11) $(PYTHON))
CLASS_VENV := $(CLASS)/venv
CLASS_PY := $(CLASS_VENV)/bin/python
CLASS_STAMP := $(CLASS_VENV)/.installed
PROXY_VERSION := 5.3.0
PROXY_STAMP := $(CLASS)/.proxy-$(PROXY_VERSION)
GRADER := $(CLASS)/grader
GRADER_STAMP := $(GRADER)/.installed
HUB ?= https://hub.example.org
BRANCH ?= main
CLASS_TEST := -m pytest -rs --confcutdir=tests/class -p no:nbval -p no:hypothesispytest \
	-p no:xdist -p no:xdist.looponfail -p no:anyio tests/class

.PHONY: class-env grader class-test class-bench class-link nbgrader-metadata

$(CLASS_STAMP): deploy/requirements.txt requirements.txt pyproject.toml
	@test -x $(CLASS_PY) || $(CLASS_PYTHON) -m venv $(CLASS_VENV)
	$(CLASS_PY) -m pip install --disable-pip-version-check -q -r deploy/requirements.txt
	@mkdir -p $(CLASS_VENV)/share/jupyter/lab/settings
	cp tools/jupyterlab/overrides.json $(CLASS_VENV)/share/jupyter/lab/settings/overrides.json
	@touch $@

# the hub's proxy, from npm, into the course folder (never installed globally)
$(PROXY_STAMP):
	npm install --prefix $(CLASS) --no-audit --no-fund --save-exact \
		configurable-http-proxy@$(PROXY_VERSION)
	@touch $@

# nbgrader's own venv; packages it shares with the course keep the course's pins
$(GRADER_STAMP): deploy/grading-requirements.txt requirements.txt
	@test -x $(GRADER)/bin/python || $(PYTHON) -m venv $(GRADER)
	grep -v '^-e' requirements.txt > $(CLASS)/constraints.txt
	$(GRADER)/bin/python -m pip install --disable-pip-version-check -q \
		-c $(CLASS)/constraints.txt -r deploy/grading-requirements.txt
	@touch $@

# the learners' environment and the proxy: what `deploy/jupyterhub_config.py` runs on
class-env: $(CLASS_STAMP) $(PROXY_STAMP)

grader: $(GRADER_STAMP)

# the live class test (needs root: it creates learners' Unix accounts, and removes them)
class-test: class-env grader
	$(CLASS_PY) $(CLASS_TEST)

# memory per learner and explorer latency with 1-20 learners (a few minutes; needs root);
# writes the "Class capacity" section of benchmarks/RESULTS.md
class-bench: class-env
	$(CLASS_PY) -m benchmarks.class_capacity

# the nbgitpuller link to hand out: make class-link HUB=https://hub.example.org [BRANCH=main]
class-link:
	@$(PYTHON) deploy/nbgitpuller_link.py $(HUB) --branch $(BRANCH) $(if $(REPO),--repo $(REPO),)

# nbgrader metadata on exercise and checker cells (again after regenerating a lesson)
nbgrader-metadata: $(STAMP)
	$(PY) -m tools.nbgrader_metadata notebooks/[0-9][0-9]_*.ipynb
