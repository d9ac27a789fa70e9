# Two commands do all the set-up: `make lab` runs the course, `make test` checks it.
# Both create .venv on first use and reinstall only when requirements.txt or
# pyproject.toml change.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PORT ?= 8888
# a fresh random token per `make lab` unless one is given: never an empty token
TOKEN ?= $(shell $(PYTHON) -c "import secrets; print(secrets.token_hex(24))")
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)
NBVAL := --nbval --nbval-current-env --nbval-cell-timeout=300 \
	--nbval-sanitize-with tests/sanitize.cfg

.PHONY: lab test unit nbval notebooks workspace venv clean bench

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

test: $(STAMP)
	$(PY) -m pytest tests $(NBVAL) notebooks

unit: $(STAMP)
	$(PY) -m pytest tests

nbval: $(STAMP)
	$(PY) -m pytest $(NBVAL) notebooks

notebooks: $(STAMP)
	$(PY) tools/run_notebooks.py notebooks/*.ipynb

bench: $(STAMP)
	$(PY) -m benchmarks

clean:
	rm -rf $(VENV) site artefacts
