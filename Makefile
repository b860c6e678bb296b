# Every target creates .venv with python3 -m venv when missing and installs the project into it,
# with exactly the versions of the lock (requirements/, refreshed by `make lock`).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# checkov and its pinned dependencies, in a venv of their own so they never change what the
# tests run (tests/contract/test_manifests.py scans the manifests and the Dockerfile with it).
CHECKOV_VENV := .venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed
# uv never downloads a Python of its own: the venvs use $(PYTHON).
export UV_PYTHON_DOWNLOADS := never

.PHONY: demo plan-example tune-example test lint bench docs lock clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# uv installs the locks (pip takes minutes over the same files); uv itself is locked too.
$(BIN)/uv: requirements/uv.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps \
		-r requirements/uv.txt
	touch $(BIN)/uv

# `sync`: the venv holds the lock's packages at the lock's versions (hashes checked) and nothing
# else; then the project itself, editable, resolving nothing. Bytecode is compiled here, as pip
# does: where PYTHONDONTWRITEBYTECODE is set, every Prefect server the tests start would
# otherwise compile its modules afresh, past its startup timeout on a busy machine.
$(STAMP): pyproject.toml requirements/test.txt $(BIN)/uv
	$(BIN)/uv pip sync --quiet --compile-bytecode --python $(BIN)/python --require-hashes \
		requirements/test.txt requirements/uv.txt
	$(BIN)/uv pip install --quiet --python $(BIN)/python --no-deps -e .
	touch $(STAMP)

$(CHECKOV_STAMP): requirements/checkov.txt $(BIN)/uv
	$(BIN)/uv venv --quiet --allow-existing --python $(PYTHON) $(CHECKOV_VENV)
	$(BIN)/uv pip sync --quiet --compile-bytecode --python $(CHECKOV_VENV)/bin/python --require-hashes \
		requirements/checkov.txt
	touch $(CHECKOV_STAMP)

# The bundled scenario on the embedded fake cluster, every tick a real Prefect flow run.
demo: $(STAMP)
	$(BIN)/elevator simulate deployments/examples/scenario.yaml --prefect --plot demo.png

# What one tick would decide on a shipped snapshot, without touching anything.
plan-example: $(STAMP)
	$(BIN)/elevator plan --nodegroups deployments/examples/nodegroups.yaml \
		--cluster deployments/examples/cluster.json --asg deployments/examples/asgs.json \
		--now 2026-11-21T12:00:00Z

# The node-group settings that fit the bundled scenario's workload, judged on held-out seeds.
tune-example: $(STAMP)
	$(BIN)/elevator tune deployments/examples/scenario.yaml --trials 150 \
		--output tuned-nodegroups.yaml --plot tune-example.png

# Two workers, a test module each at a time (module fixtures stay together): most end-to-end
# tests wait on servers and subprocesses, so the suite takes about half the time.
test: $(STAMP) $(CHECKOV_STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadfile

lint: $(STAMP)
	$(BIN)/ruff check flows tasks fakes tests benchmarks
	$(BIN)/mypy -p kube_elevator

bench: $(STAMP)
	$(BIN)/python -m benchmarks

# The API reference of the public names (kube_elevator/__init__.py), from their docstrings,
# by pdoc into build/api/ (built, not checked in; tests/e2e/test_public_api.py builds it too).
docs: $(STAMP)
	$(BIN)/python docs/api_reference.py build/api

# Refresh the locks after a change to pyproject.toml's dependencies, keeping every other pin;
# `make lock UPGRADE=1` moves every pin to the newest release the ranges allow. test.txt is the
# development venv (all extras); the others are constrained by it, so a package has one version
# in every lock. pyproject.toml keeps ranges: `pip install kube-elevator` resolves as usual.
COMPILE = $(BIN)/uv pip compile --quiet --universal --python-version 3.11 --generate-hashes \
	--custom-compile-command "make lock" $(if $(UPGRADE),--upgrade)
lock: $(BIN)/uv
	$(COMPILE) pyproject.toml --all-extras -o requirements/test.txt
	$(COMPILE) pyproject.toml -c requirements/test.txt -o requirements/runtime.txt
	$(COMPILE) pyproject.toml --extra sim -c requirements/test.txt -o requirements/sim.txt
	$(COMPILE) pyproject.toml --extra tune -c requirements/test.txt -o requirements/tune.txt
	$(COMPILE) pyproject.toml --extra harness -c requirements/test.txt -o requirements/harness.txt
	$(COMPILE) requirements/checkov.in -o requirements/checkov.txt
	$(COMPILE) requirements/uv.in -o requirements/uv.txt
	$(COMPILE) requirements/build.in -o requirements/build.txt

clean:
	rm -rf $(VENV) $(CHECKOV_VENV) .mypy_cache .ruff_cache build
