# Every target creates .venv with python3 -m venv when missing and installs the project into it.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo plan-example tune-example test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[sim,tune,test]'
	touch $(STAMP)

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
test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadfile

lint: $(STAMP)
	$(BIN)/ruff check flows tasks fakes tests benchmarks
	$(BIN)/mypy flows tasks fakes

bench: $(STAMP)
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache
