# Shorthands, on Linux and macOS, for course.py, the course's one entry point (written in
# Python, so it runs on Windows too, without make): `make lab` is `python course.py lab` (set
# everything up, open the course in JupyterLab), `make test` is `python course.py test` (check
# it), and so on for every target down to the class section. course.py creates .venv on first
# use and reinstalls only when requirements.txt or pyproject.toml change; its file says what
# each command runs (the test lanes, the kernel paths, the notebooks under strict nbval).

PYTHON ?= $(shell command -v python3.11 || command -v python3)
COURSE := $(PYTHON) course.py
PY := .venv/bin/python
PORT ?= 8888
# a fresh random token per `make lab` (course.py draws it) unless TOKEN is given

# test: lint; unit tests and notebooks on two workers on this CPU's kernel path, every lesson
# within its run-time budget; then, at the same time, each on one core, the notebooks and the
# rounding-sensitive tests on torch's generic path followed by the static site, and every lesson
# in JupyterLab under Chromium, each lane's output printed whole when it ends.
# learner: learner/ (committed: what the Colab links open) afresh, and the Colab links of the
# README and of each lesson's first cell from course_lib/colab.py's REPOSITORY.
# quick: the edit-test loop (no notebooks, training, browser, hub or explorers).
# portable: what `test` leaves out (.ci/run runs it): retraining checks, the other unit tests on
# the generic path, everything again on AVX2, the installed wheel, notebooks with 4 threads.
# native, generic-then-site, browser-lessons: test's lanes, each on its own.
COURSE_TARGETS := venv workspace learner test quick portable unit nbval notebooks lint html \
	browser bench margins native generic-then-site browser-lessons

.PHONY: lab clean $(COURSE_TARGETS)

$(COURSE_TARGETS):
	@$(COURSE) $@

# `make lab PORT=8890 TOKEN=...` chooses them
lab:
	@$(COURSE) lab --port=$(PORT) $(if $(TOKEN),--token=$(TOKEN),)

clean:
	rm -rf .venv site artefacts

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
nbgrader-metadata: venv
	$(PY) -m tools.nbgrader_metadata notebooks/[0-9][0-9]*_*.ipynb
