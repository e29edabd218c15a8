#!/usr/bin/env bash
# Install the Python package (python/) into a venv in build-py/ and run its
# CPU tests (pytest) against the libmoetune.so of a build folder.
#
#   scripts/test-python.sh [BUILD_DIR]      (default: build; MOETUNE_LIBRARY overrides)
#
# Needs python3 with venv and PyPI for pytest/setuptools (first run only).
# GPU checks (python/tests/test_gpu.py) skip themselves without torch.cuda.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
lib=${MOETUNE_LIBRARY:-$build/libmoetune.so}
if [ ! -f "$lib" ]; then
    echo "test-python.sh: $lib not found; build it first (cmake --build $build --target moetune)" >&2
    exit 1
fi
export MOETUNE_LIBRARY=$(realpath "$lib")
venv=build-py
if [ -x "$venv/bin/python" ] || python3 -m venv "$venv" 2>/dev/null; then
    py=$venv/bin/python
    user=()
else   # no venv module (Debian without python3-venv): a --user install instead
    echo "test-python.sh: python3 -m venv failed; installing with pip --user" >&2
    rm -rf "$venv"
    py=python3
    user=(--user)
fi
"$py" -c "import pytest" 2>/dev/null || "$py" -m pip install -q "${user[@]}" pytest
# A fresh install of the package (not the source tree): what an engine gets.
"$py" -m pip install -q "${user[@]}" --force-reinstall --no-deps ./python
# From the repository root, so that `import moetune` is the installed copy.
"$py" -m pytest -q -p no:cacheprovider python/tests
