# The two commands of the README: `make demo` (the main job) and `make test` (the test suite).
# Both create the virtual environment and install everything on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test install lint check-wheel

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# Exactly this torch first: the CPU build. An unpinned torch would pull a multi-GB CUDA build.
	$(BIN)/pip install --quiet torch==2.13.0
	# gpu: MuJoCo Warp, so the warp backend's equivalence test runs on warp's CPU device (≈ 150 MB, CPU-only deps).
	$(BIN)/pip install --quiet -e '.[dev,gpu]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/robot-rl demo

lint: $(STAMP)
	$(BIN)/ruff check .

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/pytest

# The installable package: build a wheel, install it (not editable) into a fresh venv, run the CLI from outside
# the repository. Needs no .venv of its own.
check-wheel:
	PY=$(PY) bash .ci/check_wheel.sh
