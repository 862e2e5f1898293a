#!/usr/bin/env bash
# Create (or reuse) the project's virtual environment and install the project into it.
# Sourced by the other ci/ scripts; needs only python3 >= 3.11 on PATH.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
EXTRAS="${EXTRAS:-peers,dev}"
PYTHON="${PYTHON:-python3}"

if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is required"'
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
fi
# Reinstall only when the dependency list changed.
STAMP="$VENV/.proxify-conformance-installed"
WANT="$(sha256sum "$ROOT/pyproject.toml" | cut -d' ' -f1) $EXTRAS"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$ROOT[$EXTRAS]"
  echo "$WANT" > "$STAMP"
fi
export PATH="$VENV/bin:$PATH"
# Worker processes forked from one server that has imported distributed, numpy and pandas
# (distributed's forkserver method, which its own test suite uses) instead of a fresh
# interpreter each: a fifth of the test suite's CPU (368 s against 451 s on 2 cores). The
# suite's clusters restart a server that lacks their workers' environment and check it in
# each worker (conformance/shuffle/workers.py). DASK_..._METHOD=spawn gives distributed's
# default.
export DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD="${DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD:-forkserver}"
cd "$ROOT"
