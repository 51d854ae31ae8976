# Two commands: `make demo` and `make test` (both set up the virtual environment first).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_VERSION ?= 2.13.0

.PHONY: venv demo test lint test-slow bench tables mutants mutants-changed clean

$(BIN)/structseq: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# The pinned CPU torch first: an unpinned torch would pull a multi-GB CUDA build.
	$(BIN)/pip install -q torch==$(TORCH_VERSION)
	# hf: transformers, so that the local pretrained-encoder path of the supertagger is tested (no download);
	# scale: DuckDB, Arrow and Ray, so that the sharded compose path and its Ray engine are tested.
	$(BIN)/pip install -q -e '.[test,hf,scale]'
	touch $(BIN)/structseq

venv: $(BIN)/structseq

demo: venv
	$(BIN)/structseq demo

# lint (ruff and the layers contract), then the default suite on two processes
test: venv lint
	$(BIN)/python -m pytest -n 2

lint: venv
	$(BIN)/ruff check src tests scripts benchmarks
	$(BIN)/ruff format --check src tests scripts benchmarks
	$(BIN)/lint-imports

test-slow: venv
	$(BIN)/python -m pytest -m slow

bench: venv
	$(BIN)/python benchmarks/bench_train.py
	$(BIN)/python benchmarks/bench_compose.py
	$(BIN)/python benchmarks/bench_lexicon.py
	$(BIN)/python benchmarks/bench_dangle.py

# Rewrite every generated table (RESULTS.md, docs/performance.md, docs/reproduction.md) from the records in results/
# (the suite checks them).
tables: venv
	$(BIN)/structseq report tables

# Mutation testing: each hand-written bug of scripts/mutants.yaml, tested in a temporary copy of the repository;
# the score (killed / run) goes to results/mutants.json (several minutes on one core).
mutants: venv
	OMP_NUM_THREADS=1 $(BIN)/python scripts/mutants.py

# Mutation testing of a change with a library (mutmut 3): the functions changed since BASE, each mutant against the
# tests that reach it, in a copy under .mutants-work/ (resumable; BUDGET minutes a call, default 55); the score per
# module goes to results/mutants/changed-BASE.json (`structseq report mutants`). Exit 1 under 90% in a module.
BASE ?= main
BUDGET ?= 55
mutants-changed: venv
	$(BIN)/pip install -q -e '.[mutation]'
	$(BIN)/python scripts/mutants_changed.py --base $(BASE) --budget-minutes $(BUDGET)

clean:
	rm -rf $(VENV) runs benchmarks/work
