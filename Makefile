# Two commands on a fresh machine: `make demo` and `make test`. Both bootstrap what they need.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3
STAMP := $(VENV)/.installed

.PHONY: demo test bootstrap system-packages lint typecheck actionlint unit clean chaos results-check test-modal test-modal-live

# `evalbot doctor` first: one line per check with its fix; it stops the demo only when something
# the sandboxes need is missing (docs/cli.md).
demo: bootstrap
	$(VENV)/bin/evalbot doctor
	$(VENV)/bin/evalbot demo

test: bootstrap lint typecheck actionlint results-check unit

bootstrap: system-packages $(STAMP)

# Debian packages the sandboxes (with a C compiler for the native runner, and musl to link it
# static), the store tests and the benchmarks' tests (perf: cpu_by_command.py) need;
# installed only when run as root and missing.
system-packages:
	@missing=""; \
	command -v bwrap >/dev/null || missing="$$missing bubblewrap"; \
	command -v git >/dev/null || missing="$$missing git"; \
	command -v setpriv >/dev/null || missing="$$missing util-linux"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	command -v mkfs.xfs >/dev/null || missing="$$missing xfsprogs"; \
	{ command -v cc >/dev/null && [ -e /usr/include/stdio.h ]; } || missing="$$missing gcc libc6-dev"; \
	command -v musl-gcc >/dev/null || missing="$$missing musl-tools"; \
	command -v perf >/dev/null || missing="$$missing linux-perf"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else \
	    echo "missing Debian packages:$$missing (run as root, or install them)"; exit 1; \
	  fi; \
	fi

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

lint:
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports  # the layers of docs/architecture.md; no import cycles

typecheck:
	$(VENV)/bin/mypy

actionlint:
	$(VENV)/bin/actionlint .github/workflows/*.yml

# benchmarks/RESULTS.md: digests of the generated sections, summaries re-derived from their rows
# (no benchmark is re-run; benchmarks/results_check.py).
results-check:
	$(PY) benchmarks/results_check.py

# Most tests in TEST_PROCESSES processes at once (a test file stays in one), then the few that read
# host-wide state other tests change (`serial`), alone. TEST_PROCESSES=0: all in this process.
TEST_PROCESSES ?= 3
unit:
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_PROCESSES) --dist loadfile --durations=30 \
	  -m "not serial"
	$(PY) -m pytest -q -p no:cacheprovider -m serial

# The Modal tests alone: the real `modal` SDK against the wire-level test server
# (tests/fakes/modal_server). CI runs them on the lowest and highest SDK pyproject allows.
MODAL_TESTS := tests/fakes/test_modal_server.py $(wildcard tests/workflows/providers/test_modal_*.py) \
	tests/workflows/providers/test_modal.py tests/workflows/engine/test_modal_engine.py \
	tests/workflows/engine/test_modal_reaper.py
test-modal: bootstrap
	$(PY) -m pytest -q -p no:cacheprovider $(MODAL_TESTS)
	$(PY) -m pytest -q -p no:cacheprovider tests/workflows/providers/test_conformance.py -k modal

# Opt-in: the conformance suite and a small experiment on real Modal (docs/modal.md, "Live tests").
test-modal-live: bootstrap
	@if [ -z "$$MODAL_TOKEN_ID" ] || [ -z "$$MODAL_TOKEN_SECRET" ]; then \
	  echo "test-modal-live: skipped: set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET to run it"; \
	else \
	  $(PY) -m pytest -q -p no:cacheprovider -m live tests/workflows/providers/test_modal_live.py \
	    tests/workflows/engine/test_modal_live_experiment.py; \
	fi

# Fault and hostile-input tests (also part of `make test`), then the reliability table in
# benchmarks/RESULTS.md (section "## Reliability").
chaos: bootstrap
	$(PY) benchmarks/reliability.py --write

clean:
	rm -rf $(VENV) .evalbot .mypy_cache .ruff_cache
