#!/usr/bin/env bash
# dask's and distributed's own shuffle tests, unmodified, through the device shuffle (issue 26):
# each file runs twice, once as shipped (the baseline) and once routed
# (ci/dask_suite/route_device.py: every Shuffle lowered as method="device", and every merge
# that would lower to P2P's hash join). dask's tests run on local schedulers, so routed they
# go to one LocalDeviceCluster; distributed's start their own clusters, which routed get the
# device shuffle through ci/dask_suite/device_preload.py. ci/dask_suite/summarize.py writes
# reports/<suite>.md (counts per file, how many passes reached the device shuffle, every
# failure or test not run with its reason) and fails when a test that passes on the baseline
# fails routed without a reason in ci/dask_suite/known.txt, or a known failure passes.
#
#   bash ci/dask_suite.sh                  # dask's two test_shuffle.py files (nightly)
#   bash ci/dask_suite.sh --dask-expr-only # dask_expr/tests/test_shuffle.py alone (pull requests)
#   bash ci/dask_suite.sh --distributed    # distributed's shuffle and merge tests (nightly)
#   bash ci/dask_suite.sh ... ARGS...      # extra pytest arguments (-n 2, -k ...)
#
# distributed's tests are not in its sdist or wheel: ci/dask_suite/distributed-2026.7.1 holds
# them as tagged (2026.7.1, 3bca3f9f; BSD-3, LICENSE.txt there), unmodified. Its
# distributed/shuffle sources equal 2026.8.0's, the version pinned here.
set -euo pipefail
source "$(dirname "$0")/bootstrap.sh"
mkdir -p reports
SUITE=dask-suite
MODULES=(dask.dataframe.tests.test_shuffle dask.dataframe.dask_expr.tests.test_shuffle)
ROOT="$(python -c 'import dask, pathlib; print(pathlib.Path(dask.__file__).parents[1])')"
CLUSTERS=session
case "${1:-}" in
    --dask-expr-only) shift; MODULES=(dask.dataframe.dask_expr.tests.test_shuffle) ;;
    --distributed)
        shift; SUITE=distributed-suite; CLUSTERS=tests
        ROOT="$PWD/ci/dask_suite/distributed-2026.7.1"
        MODULES=(distributed.shuffle.tests.test_shuffle distributed.shuffle.tests.test_merge
                 distributed.shuffle.tests.test_merge_column_and_index)
        export DASK_SUITE_TESTS="$ROOT" ;;
esac
INI="$(mktemp --suffix=.ini)"; printf '[pytest]\n' > "$INI"; trap 'rm -f "$INI"' EXIT
run() {  # the tests live outside this repository's tests: our own pytest config must not apply
    python -m pytest -c "$INI" --rootdir "$ROOT" -q --tb=native -p no:cacheprovider -p ci.dask_suite.route_device \
        --device-clusters="$CLUSTERS" --timeout=120 --pyargs "${MODULES[@]}" "$@" || true
}
run --device-route=off --device-report="reports/$SUITE-baseline.jsonl" "$@" > "reports/$SUITE-baseline.log" 2>&1
tail -1 "reports/$SUITE-baseline.log"
run --device-route=on --device-report="reports/$SUITE.jsonl" "$@" > "reports/$SUITE.log" 2>&1
tail -1 "reports/$SUITE.log"
exec python -m ci.dask_suite.summarize "reports/$SUITE.jsonl" "reports/$SUITE-baseline.jsonl" "reports/$SUITE.md"
