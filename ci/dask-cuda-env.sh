#!/usr/bin/env bash
# Build (once) a virtual environment with the real dask-cuda 26.2.0 -- the last
# release that ships ProxifyHostFile / JIT-unspill -- plus this project, then run
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
# 26.2.0 and was built from the same pyproject.toml and this same script (a
# stamp file records their hashes).  No GPU is needed: dask-cuda 26.2 imports on
# a CPU-only machine, and the conformance adapter runs it on the sim device.
#
# Version notes (checked when this script was written):
#   dask-cuda 26.2.0 -> rapids-dask-dependency==26.2.* -> dask==2026.1.1,
#   distributed==2026.1.1.  Our pyproject pins dask/distributed >=2025.1,<2027,
#   which admits 2026.1.1, so one resolve satisfies both.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${DASK_CUDA_VENV:-$REPO/.venv-daskcuda}"
PY="${PYTHON:-python3}"
DASK_CUDA_VERSION="26.2.0"

stamp_value() {
    {
        echo "dask-cuda==$DASK_CUDA_VERSION"
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
    # dask-cuda's hard deps (numba-cuda, cuda-core, nvidia-ml-py) are pure
    # Python / ship their own libs and install without CUDA being present.
    "$VENV/bin/python" -m pip install \
        "dask-cuda==$DASK_CUDA_VERSION" \
        -e "$REPO"
    stamp_value >"$VENV/.dask-cuda-stamp"
fi

"$VENV/bin/python" - <<'EOF'
from importlib.metadata import version
for dist in ("dask-cuda", "rapids-dask-dependency", "dask", "distributed",
             "numba", "numba-cuda", "cuda-core", "nvidia-ml-py", "numpy"):
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
