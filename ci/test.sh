#!/usr/bin/env bash
# Quickstart 2: the full test suite (library tests, meta tests, conformance on sim) plus ruff.
set -euo pipefail
source "$(dirname "$0")/bootstrap.sh"
# One hypothesis profile for both runs (defined in conformance/runner/profiles.py), named by
# HYPOTHESIS_PROFILE or CONFORMANCE_PROFILE (the conformance plugin's variable); default ci.
if [[ -n "${HYPOTHESIS_PROFILE:-}" && -n "${CONFORMANCE_PROFILE:-}" \
      && "$HYPOTHESIS_PROFILE" != "$CONFORMANCE_PROFILE" ]]; then
    echo "ci/test.sh: HYPOTHESIS_PROFILE=$HYPOTHESIS_PROFILE and CONFORMANCE_PROFILE=$CONFORMANCE_PROFILE differ" >&2
    exit 2
fi
export HYPOTHESIS_PROFILE="${HYPOTHESIS_PROFILE:-${CONFORMANCE_PROFILE:-ci}}"
export CONFORMANCE_PROFILE="$HYPOTHESIS_PROFILE"
# Each step's wall time on stderr (a slow CI run says where its time went).
step() { local t0=$SECONDS; "$@"; echo "ci/test.sh: $(( SECONDS - t0 )) s: $*" >&2; }
step python -m ruff check --no-cache .
# The workflows (.github/workflows/, config .github/actionlint.yaml), well under a second.
# No shellcheck/pyflakes on run: scripts, so the result does not depend on what the
# machine has on PATH.
step actionlint -shellcheck= -pyflakes=
# The GPU check's dry run: arguments, wheel folder, imports, CUDA kernels under the simulator.
step bash ci/gpu_check.sh --dry-run --out reports/gpu-dry-run
# JUNIT_DIR (ci/flake_hunt.sh --readme): each pytest step also writes DIR/<step>.xml.
junit() { [[ -n "${JUNIT_DIR:-}" ]] && echo "--junitxml=$JUNIT_DIR/$1.xml" || true; }
# The library and meta tests' workers are forked from one server that has imported
# distributed, numpy and pandas (distributed's forkserver method, which its own test suite
# uses), not started as fresh interpreters: this step, back to back, 668 against 839 CPU-s with
# numba's kernel cache warm, 894 against 986 on a fresh clone's cold cache.
# The suite's clusters restart a server that lacks their workers' environment and check it in
# each worker (conformance/shuffle/workers.py). Not for stress and conformance below: they run
# as a user does, under distributed's default (spawn).
step env DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD=forkserver \
    python -m pytest tests -n 2 $(junit tests) "$@"
# Every stress scenario at small sizes (python -m stress ...), faults included; about
# 2 minutes on 2 cores.
step python -m pytest stress -n 2 $(junit stress) "$@"
step python -m pytest conformance --impl=reference --device=sim -n 2 $(junit conformance) "$@"
# The CPU peers' manifests, on a few IDs (< 60 s): a stale entry, a broken findings link or an
# undocumented failure of zict or distributed-spill fails CI. The full table runs nightly
# (.github/workflows/nightly-peers.yml).
step bash ci/peers.sh --fast "$@"
