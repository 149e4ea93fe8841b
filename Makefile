# Two entry points (see README): `make report` (main job) and `make test` (the test suite).
# Both create .venv and install the project into it on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: report test test-dev lint mutants calibrate bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# The CPU wheel of torch 2.13.0 lies on this machine's disk; a bare `torch` would pull a CUDA build.
	$(BIN)/python -m pip install --quiet "torch==2.13.0"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

report: $(STAMP)
	$(BIN)/kernel-verify report

test: $(STAMP)
	CI=true $(BIN)/python -m pytest -n 2 -p no:cacheprovider

test-dev: $(STAMP)
	HYPOTHESIS_PROFILE=dev $(BIN)/python -m pytest -n 2

lint: $(STAMP)
	$(BIN)/ruff check .

mutants: $(STAMP)
	$(BIN)/kernel-verify mutants

calibrate: $(STAMP)
	$(BIN)/kernel-verify calibrate

bench: $(STAMP)
	$(BIN)/asv run --python=same --quick

clean:
	rm -rf $(VENV) .hypothesis .pytest_cache
