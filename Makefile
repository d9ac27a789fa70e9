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
# the browser test needs none of the notebook, property-test or parallel plugins, nor the
# unit tests' conftest (which imports torch): without them pytest starts in 1 s, not 12 s
# (nbformat's import alone builds a URI grammar for 2.6 s)
BROWSER_TEST := -m pytest -rs --confcutdir=tests/browser -p no:nbval -p no:hypothesispytest \
	-p no:xdist -p no:xdist.looponfail -p no:anyio tests/browser

.PHONY: lab test unit nbval notebooks workspace venv clean bench lint html browser

venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --disable-pip-version-check -q -r requirements.txt
	@touch $(STAMP)

workspace: $(STAMP)
	$(PY) -m course_lib.workspace notebooks workspace

lab: workspace
	@echo "JupyterLab on http://127.0.0.1:$(PORT)/lab/tree/00_start_here.ipynb?token=$(TOKEN)"
	$(VENV)/bin/jupyter lab --no-browser $(ROOT_FLAG) \
		--ServerApp.ip=127.0.0.1 --ServerApp.port=$(PORT) \
		--IdentityProvider.token=$(TOKEN) --ServerApp.root_dir=workspace \
		--LabApp.default_url=/lab/tree/00_start_here.ipynb

# -rs prints why anything was skipped (e.g. the browser test without Chromium: one line)
# unit tests and notebooks on two workers, whole files each (--dist loadfile keeps one
# notebook's cells in one kernel); then the browser test alone, so its timing-sensitive
# waits never compete with a notebook for the CPU
test: $(STAMP) lint
	$(PY) -m pytest -rs -n 2 --dist loadfile --ignore=tests/browser tests $(NBVAL) notebooks
	$(PY) $(BROWSER_TEST)

unit: $(STAMP)
	$(PY) -m pytest tests --ignore=tests/browser

nbval: $(STAMP)
	$(PY) -m pytest $(NBVAL) notebooks

notebooks: $(STAMP)
	$(PY) tools/run_notebooks.py notebooks/*.ipynb

# ---------------------------------------------------------------- lint, html, browser (issue 8)
LINT_PATHS := course_lib tests tools notebooks $(wildcard benchmarks)

lint: $(STAMP)
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)

# every lesson as static HTML in site/ (git-ignored): explorers show their starting picture
html: $(STAMP)
	$(PY) tools/build_site.py site notebooks/[0-9][0-9]_*.ipynb

# only the browser test (needs /usr/bin/chromium); screenshots in artefacts/browser/
browser: $(STAMP)
	$(PY) $(BROWSER_TEST)

bench: $(STAMP)
	$(PY) -m benchmarks

clean:
	rm -rf $(VENV) site artefacts
