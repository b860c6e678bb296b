#!/bin/sh
# Install kube-elevator into a new virtual environment from a source tree, with the locked
# dependencies, as the image's build stage does (Dockerfile) and as tests/e2e/test_image.py
# does on every test run:
#
#   deployments/image/install.sh VENV LOCK [EXTRAS]     (from the root of the source tree)
#
# 1. builds the wheel with the locked build backend (requirements/build.txt);
# 2. installs LOCK's packages with their hashes checked and nothing resolved (--no-deps);
# 3. installs the wheel, then asks for kube-elevator[EXTRAS] with no index at all: a requirement
#    of the package that the lock leaves out, or pins outside pyproject.toml's range, fails here.
# uv comes from requirements/uv.txt (on the PATH, or $UV); the venv's Python is $PYTHON.
# With $WHEEL_DIR, the wheel is built there once and reused by later installs (the tests').
set -eu
venv=$1
lock=$2
extras=${3:-}
uv=${UV:-uv}
export UV_PYTHON_DOWNLOADS=never
dist=${WHEEL_DIR:-$(mktemp -d)}
set -- "$dist"/kube_elevator-*.whl
if [ ! -e "$1" ]; then
    "$uv" build --quiet --wheel --out-dir "$dist" --build-constraint requirements/build.txt \
        --require-hashes .
    set -- "$dist"/kube_elevator-*.whl
fi
wheel=$1
"$uv" venv --quiet --python "${PYTHON:-python3}" "$venv"
"$uv" pip install --quiet --python "$venv/bin/python" --require-hashes --no-deps -r "$lock"
"$uv" pip install --quiet --python "$venv/bin/python" --no-index \
    "kube-elevator${extras:+[$extras]} @ file://$wheel"
"$uv" pip check --quiet --python "$venv/bin/python"
[ -n "${WHEEL_DIR:-}" ] || rm -r "$dist"
