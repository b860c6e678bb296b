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

.PHONY: demo plan-example tune-example test test-prefect lint bench docs lock clean

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
# otherwise compile its modules afresh, past its startup timeout on a busy machine. uv's
# compile workers now and then fail on a busy machine ("received ''", astral-sh/uv#2245; its
# 60 s timeout, #6105): the sync is idempotent, so a failed one runs once more.
UV_SYNC = $(BIN)/uv pip sync --quiet --compile-bytecode
once_more = $(1) || { echo "uv pip sync failed: once more"; $(1); }
$(STAMP): pyproject.toml requirements/test.txt $(BIN)/uv
	$(call once_more,$(UV_SYNC) --require-hashes --python $(BIN)/python \
		requirements/test.txt requirements/uv.txt)
	$(BIN)/uv pip install --quiet --python $(BIN)/python --no-deps -e .
	touch $(STAMP)

$(CHECKOV_STAMP): requirements/checkov.txt $(BIN)/uv
	$(BIN)/uv venv --quiet --allow-existing --python $(PYTHON) $(CHECKOV_VENV)
	$(call once_more,$(UV_SYNC) --require-hashes --python $(CHECKOV_VENV)/bin/python \
		requirements/checkov.txt)
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

# Three workers, a test module each at a time (module fixtures stay together): most end-to-end
# tests wait on servers and subprocesses, so even on two CPUs a third worker fills their waits
# (measured on this 2-CPU machine, s55: -n 2 used the CPUs ~60% of a 34:14 run; -n 3 88% of
# 30:17, load 3-6, every test passing; the tests that touch Prefect on the floor release stay at
# PREFECT_TEST_WORKERS=2, where Prefect 3.8.x's SQLite server stalls under load). The longest
# modules first (tests/module_order.py), so no long one starts last: --no-loadscope-reorder
# keeps that order rather than xdist's, most tests first.
# Our own modules' bytecode too, before the tests: where PYTHONDONTWRITEBYTECODE is set (as on
# some CI runners and this machine), every command and server a test starts in a subprocess
# would otherwise compile the project's modules from source again (0.3 s of CPU for the
# harness's import alone; benchmarks/RESULTS.md). compileall skips what is up to date.
OWN_BYTECODE = $(BIN)/python -m compileall -q -j 0 flows tasks fakes kube_elevator tests benchmarks

test: $(STAMP) $(CHECKOV_STAMP)
	@$(OWN_BYTECODE)
	$(BIN)/python -m pytest -q -n 3 --dist loadfile --no-loadscope-reorder --durations=25

# The tests that touch Prefect (marker `prefect`) on another Prefect release than the lock's, in a
# venv of its own: `make test-prefect PREFECT_VERSION=3.8.6`. uv resolves pyproject.toml with
# Prefect held at that release, starting from the test lock's pins (only what the release
# requires otherwise moves), with the extras that admit it (.ci/prefect_extras.py: an older
# release goes without `blocks`, which states its own floor). The lock holds the newest release
# (make test runs it); CI runs this on the floor of pyproject.toml's range, and on PREFECT_NEWEST
# when that is newer than the lock's (.ci/run). PREFECT_TEST_WORKERS is -n; PREFECT_PYTEST_ARGS,
# pytest's own (.ci/run's tests to run again).
PREFECT_VERSION ?= 3.8.6
PREFECT_TEST_WORKERS ?= 2
PREFECT_PYTEST_ARGS ?=
PREFECT_VENV := .venv-prefect-$(PREFECT_VERSION)
$(PREFECT_VENV)/.installed: pyproject.toml requirements/test.txt .ci/prefect_extras.py $(STAMP)
	$(BIN)/uv venv --quiet --allow-existing --python $(PYTHON) $(PREFECT_VENV)
	cp requirements/test.txt $(PREFECT_VENV)/requirements.txt
	echo "prefect==$(PREFECT_VERSION)" > $(PREFECT_VENV)/prefect.txt
	$(BIN)/uv pip compile --quiet --universal --python-version 3.11 pyproject.toml \
		$$($(BIN)/python .ci/prefect_extras.py $(PREFECT_VERSION)) \
		-c $(PREFECT_VENV)/prefect.txt -o $(PREFECT_VENV)/requirements.txt
	$(call once_more,$(UV_SYNC) --python $(PREFECT_VENV)/bin/python \
		$(PREFECT_VENV)/requirements.txt requirements/uv.txt)
	$(BIN)/uv pip install --quiet --python $(PREFECT_VENV)/bin/python --no-deps -e .
	touch $@

test-prefect: $(PREFECT_VENV)/.installed $(CHECKOV_STAMP)
	@$(PREFECT_VENV)/bin/python -c "import prefect; print('make test-prefect: Prefect', \
		prefect.__version__, 'in $(PREFECT_VENV)', flush=True)"
	@$(OWN_BYTECODE)
	$(PREFECT_VENV)/bin/python -m pytest -q -n $(PREFECT_TEST_WORKERS) --dist loadfile \
		--no-loadscope-reorder $(PREFECT_PYTEST_ARGS) \
		-m 'prefect and not benchmark'

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
# `make lock UPGRADE=1` moves every pin to the newest release the ranges allow, `make lock
# UPGRADE_PACKAGES=prefect` those packages only (and what their new releases require). test.txt is
# the development venv (all extras); the others are constrained by it, so a package has one
# version in every lock, but for the AWS SDK (boto3, botocore, s3transfer): prefect-aws needs
# aiobotocore, whose every release caps botocore below the newest (aiobotocore 3.10.0: botocore
# <1.43.118), so test.txt, blocks.txt and image.txt (the image has `blocks`) hold what it allows,
# and every lock without prefect-aws takes the newest (AWS_SDK_CONSTRAINTS: test.txt's pins
# without those three, which each of those locks upgrades). Each extra has a lock of its own:
# requirements/EXTRA.txt; runtime.txt has none. pyproject.toml keeps ranges: `pip install
# kube-elevator` resolves as usual.
COMPILE = $(BIN)/uv pip compile --quiet --universal --python-version 3.11 --generate-hashes \
	--custom-compile-command "make lock" $(if $(UPGRADE),--upgrade) \
	$(foreach package,$(UPGRADE_PACKAGES),--upgrade-package $(package))
AWS_SDK := boto3 botocore s3transfer
AWS_SDK_CONSTRAINTS := build/lock/test-but-the-aws-sdk.txt
NEWEST_AWS_SDK = -c $(AWS_SDK_CONSTRAINTS) $(foreach package,$(AWS_SDK),--upgrade-package $(package))
lock: $(BIN)/uv
	$(COMPILE) pyproject.toml --all-extras -o requirements/test.txt
	mkdir -p $(dir $(AWS_SDK_CONSTRAINTS))
	grep -E '^[A-Za-z0-9]' requirements/test.txt | sed 's/ *\\$$//' \
		| grep -vE '^($(subst $(eval) ,|,$(AWS_SDK)))==' > $(AWS_SDK_CONSTRAINTS)
	$(COMPILE) pyproject.toml $(NEWEST_AWS_SDK) -o requirements/runtime.txt
	$(COMPILE) pyproject.toml --extra sim $(NEWEST_AWS_SDK) -o requirements/sim.txt
	$(COMPILE) pyproject.toml --extra tune $(NEWEST_AWS_SDK) -o requirements/tune.txt
	$(COMPILE) pyproject.toml --extra harness $(NEWEST_AWS_SDK) -o requirements/harness.txt
	$(COMPILE) pyproject.toml --extra docs $(NEWEST_AWS_SDK) -o requirements/docs.txt
	$(COMPILE) pyproject.toml --extra cel $(NEWEST_AWS_SDK) -o requirements/cel.txt
	$(COMPILE) pyproject.toml --extra blocks -c requirements/test.txt -o requirements/blocks.txt
	$(COMPILE) pyproject.toml --extra tune --extra blocks -c requirements/test.txt \
		-o requirements/image.txt
	$(COMPILE) requirements/checkov.in -o requirements/checkov.txt
	$(COMPILE) requirements/uv.in -o requirements/uv.txt
	$(COMPILE) requirements/build.in -o requirements/build.txt

clean:
	rm -rf $(VENV) $(CHECKOV_VENV) .venv-prefect-* .mypy_cache .ruff_cache build
