# Two entry points (see README): `make report` (main job) and `make test` (the test suite).
# Both create .venv and install the project into it on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: report report-quick test test-dev lint mutants calibrate bench bench-full bench-publish \
	bench-compare bench-check bench-ratios clean adapters conformance gpu gpu-prepare reports

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# The CPU wheel of torch 2.13.0 lies on this machine's disk; a bare `torch` would pull a CUDA build.
	$(BIN)/python -m pip install --quiet "torch==2.13.0"
	echo "torch==2.13.0" > $(VENV)/torch-pin.txt
	# The library extras come along so that the adapters' own tests run, fla included: its
	# smoke test runs fla's Triton kernels under the interpreter (the triton wheel is ~290 MB;
	# measured 19 s to install from this machine's pip cache). `adapters` is the extra that
	# bundles them (pyproject.toml; a record's in_adapters_extra, tests/test_library_records.py).
	$(BIN)/python -m pip install --quiet -c $(VENV)/torch-pin.txt -e ".[dev,adapters]"
	touch $(STAMP)

report: $(STAMP)
	$(BIN)/kernel-verify report   # -> build/report/full/index.html (untracked)

report-quick: $(STAMP)
	$(BIN)/kernel-verify report --quick   # -> build/report/quick/index.html

# Two pytest workers on two cores: one BLAS/OpenMP thread each, no oversubscription.
# --dist worksteal: each worker first takes half of the tests, in order; an idle worker takes the
# back half of the other's queue. The tests that share a process (the wheel's, the optional
# libraries', the known failures') are sorted to the front, so the first worker runs them all
# (tests/conftest.py).
ONE_THREAD := OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
# Bytecode is cached (in the untracked __pycache__ folders) even where the environment sets
# PYTHONDONTWRITEBYTECODE: the suite starts many Python processes (two workers, and a pytest
# subprocess per `check`), and without the cache each compiles and assertion-rewrites every
# module it imports that changed since the cache was last written.
BYTECODE := PYTHONDONTWRITEBYTECODE=

test: $(STAMP)
	CI=true $(ONE_THREAD) $(BYTECODE) $(BIN)/python -m pytest -n 2 --dist worksteal -p no:cacheprovider

test-dev: $(STAMP)
	HYPOTHESIS_PROFILE=dev $(ONE_THREAD) $(BIN)/python -m pytest -n 2 --dist worksteal

lint: $(STAMP)
	$(BIN)/ruff check .

mutants: $(STAMP)
	$(BIN)/kernel-verify mutants --blackbox

calibrate: $(STAMP)
	$(BIN)/kernel-verify calibrate

# asv (docs/benchmarks.md): stable machine name, results independent of the checkout's path.
ASV_TOOL := $(BIN)/python tools/asv_dashboard.py
BENCH ?=
BENCH_ARGS := $(if $(BENCH),-b "$(BENCH)")

bench: $(STAMP)
	$(ASV_TOOL) run --quick $(BENCH_ARGS)

bench-full: $(STAMP)
	$(ASV_TOOL) run $(BENCH_ARGS)
	$(ASV_TOOL) publish

# reports/asv/html/index.html, scripts and styles vendored from npm: works offline.
bench-publish: $(STAMP)
	$(ASV_TOOL) publish

# Exit 1 if HEAD is slower than BASE by more than FACTOR in any recorded benchmark.
BASE ?= HEAD~1
HEAD ?= HEAD
FACTOR ?= 1.5
bench-compare: $(STAMP)
	$(ASV_TOOL) compare $(BASE) $(HEAD) --factor $(FACTOR)

# For CI: asv check + one dry quick run of every benchmark (first parameters only), < 1 min.
bench-check: $(STAMP)
	$(ASV_TOOL) check

# The speed targets of issue 14 as ratios in one run (benchmarks/ratios.py).
bench-ratios: $(STAMP)
	$(BIN)/python -m benchmarks.ratios --threads 1 --memory

# The prepared GPU run (docs/benchmarks.md, "The prepared GPU run"): gate, then the previous
# commit (BASE) alternated with the working tree cell by cell, in one process, within 6 minutes.
# `make gpu DEVICE=cpu` is the rehearsal on this CPU (reduced sizes). On a machine without .git
# (the lent device), run `make gpu-prepare` here first and carry build/gpu along: the run then
# takes the exported tree (BASE_TREE, default build/gpu/base where there is no .git).
DEVICE ?= cuda
BASE_TREE ?= $(if $(wildcard .git),,build/gpu/base)
GPU_PYTHON ?= $(if $(wildcard $(BIN)/python),$(BIN)/python,python3)
gpu:
	$(ONE_THREAD) $(GPU_PYTHON) -m tools.gpu.run --device $(DEVICE) \
		$(if $(BASE_TREE),--base-tree $(BASE_TREE),--base $(BASE))

gpu-prepare:
	$(GPU_PYTHON) -m tools.gpu.prepare --base $(BASE)

# Optional library adapters (kernel_verify.adapters): the extras, with torch held at the pinned
# CPU build so that no dependency pulls a CUDA torch.
adapters: $(STAMP)
	echo "torch==2.13.0" > $(VENV)/torch-pin.txt
	$(BIN)/python -m pip install --quiet -c $(VENV)/torch-pin.txt -e ".[dev,adapters]"

conformance: adapters
	$(ONE_THREAD) $(BIN)/kernel-verify conformance

# Regenerate the committed reports whose sources changed since they were written (their
# fingerprints, kernel_verify/fingerprints.py); `kernel-verify reports --stale` lists them first.
# Rewrites committed files under reports/; a full calibration or mutants run takes hours.
reports: adapters
	$(ONE_THREAD) $(BIN)/kernel-verify reports --refresh

clean:
	rm -rf $(VENV) .hypothesis .pytest_cache
