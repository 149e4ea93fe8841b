# Two entry points (see README): `make report` (main job) and `make test` (the test suite).
# Both create .venv and install the project into it on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: report report-quick test test-dev lint mutants calibrate bench bench-full clean adapters conformance

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# The CPU wheel of torch 2.13.0 lies on this machine's disk; a bare `torch` would pull a CUDA build.
	$(BIN)/python -m pip install --quiet "torch==2.13.0"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

report: $(STAMP)
	$(BIN)/kernel-verify report   # -> build/report/full/index.html (untracked)

report-quick: $(STAMP)
	$(BIN)/kernel-verify report --quick   # -> build/report/quick/index.html

# Two pytest workers on two cores: one BLAS/OpenMP thread each, no oversubscription.
ONE_THREAD := OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1

test: $(STAMP)
	CI=true $(ONE_THREAD) $(BIN)/python -m pytest -n 2 -p no:cacheprovider

test-dev: $(STAMP)
	HYPOTHESIS_PROFILE=dev $(ONE_THREAD) $(BIN)/python -m pytest -n 2

lint: $(STAMP)
	$(BIN)/ruff check .

mutants: $(STAMP)
	$(BIN)/kernel-verify mutants

calibrate: $(STAMP)
	$(BIN)/kernel-verify calibrate

bench: $(STAMP)
	$(BIN)/asv machine --yes
	$(BIN)/asv run --python=same --quick --show-stderr --set-commit-hash=HEAD

bench-full: $(STAMP)
	$(BIN)/asv machine --yes
	$(BIN)/asv run --python=same --show-stderr --set-commit-hash=HEAD
	$(BIN)/asv publish

# Optional library adapters (kernel_verify.adapters): the extras, with torch held at the pinned
# CPU build so that no dependency pulls a CUDA torch.
adapters: $(STAMP)
	echo "torch==2.13.0" > $(VENV)/torch-pin.txt
	$(BIN)/python -m pip install --quiet -c $(VENV)/torch-pin.txt -e ".[dev,adapters]"

conformance: adapters
	$(ONE_THREAD) $(BIN)/kernel-verify conformance

clean:
	rm -rf $(VENV) .hypothesis .pytest_cache
