#!/usr/bin/env bash
# Build (once) a virtual environment with the real dask-cuda 26.4.0 -- the last
# release that ships ProxifyHostFile / JIT-unspill and explicit-comms (both
# deprecated in 26.4.0, removed in 26.6.0) -- plus this project, then run
# the store conformance suite against it next to the reference implementation:
#
#     ci/dask-cuda-env.sh [extra pytest args...]
#
# Environment:
#   DASK_CUDA_VENV    where the venv lives (default: <repo>/.venv-daskcuda)
#   PYTHON            interpreter used to create it (default: python3; needs >= 3.11)
#   DASK_CUDA_FORCE=1 reinstall even if the venv looks up to date
#   DASK_CUDA_NO_RUN=1 only build the venv, do not run pytest
#
# Idempotent: the install is skipped when the venv already holds dask-cuda
# 26.4.0 and was built from the same pyproject.toml and this same script (a
# stamp file records their hashes).  No GPU is needed: dask-cuda 26.4 imports on
# a CPU-only machine, and the conformance adapter runs it on the sim device.
#
# Version notes (checked 2026-12-01 with `pip download dask-cuda==26.4.0
# rapids-dask-dependency==26.4.0 --no-deps` and their METADATA):
#   dask-cuda 26.4.0 -> rapids-dask-dependency==26.4.* -> dask==2026.1.1,
#   distributed==2026.1.1 (pinned below too, so the resolve cannot drift).
#   Our pyproject pins dask/distributed >=2025.1,<2026.9, which admits 2026.1.1.
#   26.4.0 dropped the numba-cuda requirement 26.2.0 had; it needs cuda-core,
#   nvidia-ml-py, pandas and zict, all installable without CUDA (cuda-core
#   needs cuda-bindings too, see the install below).
#   dask-cuda 26.6.0 removed ProxifyHostFile, JIT-unspill and explicit-comms,
#   so 26.4.0 is the last release this adapter can judge.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${DASK_CUDA_VENV:-$REPO/.venv-daskcuda}"
PY="${PYTHON:-python3}"
DASK_CUDA_VERSION="26.4.0"
DASK_VERSION="2026.1.1"  # what rapids-dask-dependency 26.4.* pins

stamp_value() {
    {
        echo "dask-cuda==$DASK_CUDA_VERSION dask==$DASK_VERSION"
        sha256sum "$REPO/pyproject.toml" | cut -d' ' -f1
        sha256sum "$REPO/ci/dask-cuda-env.sh" | cut -d' ' -f1
    } | sha256sum | cut -d' ' -f1
}

up_to_date() {
    [[ -x "$VENV/bin/python" ]] || return 1
    [[ -f "$VENV/.dask-cuda-stamp" ]] || return 1
    [[ "$(cat "$VENV/.dask-cuda-stamp")" == "$(stamp_value)" ]] || return 1
    "$VENV/bin/python" - "$DASK_CUDA_VERSION" <<'EOF' >/dev/null 2>&1 || return 1
import sys
from importlib.metadata import version
assert version("dask-cuda") == sys.argv[1]
import dask_cuda.proxify_host_file  # noqa: F401
import reference_impl, conformance  # noqa: F401
EOF
}

if [[ "${DASK_CUDA_FORCE:-0}" != "1" ]] && up_to_date; then
    echo "dask-cuda env: $VENV is up to date"
else
    echo "dask-cuda env: building $VENV"
    if [[ ! -x "$VENV/bin/python" ]]; then
        "$PY" -m venv "$VENV"
    fi
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    # One resolve for both, so the project's own pins and the RAPIDS pins meet.
    # dask-cuda's hard deps (cuda-core, nvidia-ml-py) are pure Python / ship
    # their own libs and install without CUDA being present.  dask-cuda 26.4
    # imports cuda.core when it is imported (dask_cuda/initialize.py:10), and
    # cuda-core 1.x needs cuda.bindings, which it lists only under its cu12 /
    # cu13 extras (they also pull the whole cuda-toolkit).  cuda-bindings on
    # its own (no [all]) is a 7.6 MB wheel that imports without a GPU.
    "$VENV/bin/python" -m pip install \
        "dask-cuda==$DASK_CUDA_VERSION" \
        "dask==$DASK_VERSION" "distributed==$DASK_VERSION" \
        "cuda-bindings==12.*" \
        -e "$REPO"
    stamp_value >"$VENV/.dask-cuda-stamp"
fi

"$VENV/bin/python" - <<'EOF'
from importlib.metadata import version
for dist in ("dask-cuda", "rapids-dask-dependency", "dask", "distributed",
             "numba", "cuda-core", "cuda-bindings", "nvidia-ml-py", "numpy", "pandas",
             "zict"):
    try:
        print(f"  {dist}=={version(dist)}")
    except Exception as exc:  # pragma: no cover - informational only
        print(f"  {dist}: not installed ({exc.__class__.__name__})")
EOF

if [[ "${DASK_CUDA_NO_RUN:-0}" == "1" ]]; then
    exit 0
fi

cd "$REPO"
exec "$VENV/bin/python" -m pytest conformance \
    --impl=reference --impl=dask-cuda --device=sim "$@"
