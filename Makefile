# Every target creates (or reuses) .venv by itself.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint bench docs clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/svcdoctor lab demo

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet  # a broken link or anchor fails

test: lint
	$(BIN)/python -m pytest -q -n 3 --dist loadgroup

bench: $(STAMP)
	$(BIN)/python benchmarks/lint_corpus.py
	$(BIN)/python benchmarks/lint_precision.py
	$(BIN)/python benchmarks/diagnose_scale.py
	$(BIN)/python benchmarks/diagnose_accuracy.py
	$(BIN)/python benchmarks/lab_rollout.py
	$(BIN)/python benchmarks/simulate_scale.py
	$(BIN)/python benchmarks/scan_scale.py
	$(BIN)/python benchmarks/agent_rate.py
	$(BIN)/python benchmarks/prometheus_scale.py

docs: $(STAMP)
	$(BIN)/svcdoctor rules export docs/rules
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
