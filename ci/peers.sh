#!/usr/bin/env bash
# The CPU peers' side-by-side conformance table, each judged with its manifest
# (conformance/expected/<impl>.toml): a failure its manifest does not document, an xfail that
# now passes, a stale entry or a broken findings link fails the run.
#
#   bash ci/peers.sh           # nightly: every ID for the reference, zict, distributed-spill,
#                              # distributed-p2p, dask-tasks and reference-in-dask (~18 min with -n 2)
#   bash ci/peers.sh --fast    # CI: a few IDs against zict and distributed-spill, < 60 s
#
# Extra arguments go to pytest. The report goes to reports/peers/ (reports/peers-fast/).
# Every manifest is loaded and checked (entries, links, matches) in both modes: the suite is
# collected whole before --conformance-ids selects.
set -euo pipefail
source "$(dirname "$0")/bootstrap.sh"
if [[ "${1:-}" == "--fast" ]]; then
    shift
    # Each ID is an xfail or a pass on one peer or both, so a manifest that drifts shows.
    exec python -m pytest conformance --impl=reference --impl=zict --impl=distributed-spill \
        --device=sim -p no:randomly --conformance-report=reports/peers-fast \
        --conformance-ids=STORE-MAP-001,STORE-MAP-003,STORE-MAP-004,STORE-KEY-002,STORE-LIMIT-006,STORE-DISK-005 \
        "$@"
fi
exec python -m pytest conformance --impl=reference --impl=zict --impl=distributed-spill \
    --impl=distributed-p2p --impl=dask-tasks --impl=reference-in-dask --device=sim -p no:randomly \
    --conformance-report=reports/peers "$@"
