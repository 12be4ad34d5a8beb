# Two commands do all the setup on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.xlrag-installed

.PHONY: install demo test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,vendors]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/xlrag demo

test: $(STAMP)
	$(VENV)/bin/ruff check xlrag tests benchmarks scripts
	ANONYMIZED_TELEMETRY=False $(PY) -m pytest -q --durations=10

lint: $(STAMP)
	$(VENV)/bin/ruff check xlrag tests benchmarks scripts

bench: $(STAMP)
	$(PY) benchmarks/indexing.py
	$(PY) benchmarks/retrieval.py

clean:
	rm -rf .demo-index .pytest_cache .ruff_cache
