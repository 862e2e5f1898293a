#!/usr/bin/env bash
# dask's own shuffle tests, unmodified, through the device shuffle (issue 26): each file runs
# twice, once as dask ships it (the baseline) and once routed (ci/dask_suite/route_device.py:
# every Shuffle lowered as method="device", every local-scheduler compute sent to a
# LocalDeviceCluster). ci/dask_suite/summarize.py writes reports/dask-suite.md (counts per file,
# how many passes reached the device shuffle, every failure or test not run with its reason) and
# fails when a test that passes on the baseline fails routed without a reason in
# ci/dask_suite/known.txt, or a known failure passes.
#
#   bash ci/dask_suite.sh                  # dask's two test_shuffle.py files (nightly)
#   bash ci/dask_suite.sh --dask-expr-only # dask_expr/tests/test_shuffle.py alone (pull requests)
#   bash ci/dask_suite.sh ARGS...          # extra pytest arguments (-n 2, -k ...)
set -euo pipefail
source "$(dirname "$0")/bootstrap.sh"
mkdir -p reports
MODULES=(dask.dataframe.tests.test_shuffle dask.dataframe.dask_expr.tests.test_shuffle)
if [[ "${1:-}" == "--dask-expr-only" ]]; then shift; MODULES=(dask.dataframe.dask_expr.tests.test_shuffle); fi
INI="$(mktemp --suffix=.ini)"; printf '[pytest]\n' > "$INI"; trap 'rm -f "$INI"' EXIT
SITE="$(python -c 'import dask, pathlib; print(pathlib.Path(dask.__file__).parents[1])')"
run() {  # the tests live in site-packages: our own pytest config must not apply to them
    python -m pytest -c "$INI" --rootdir "$SITE" -q -p no:cacheprovider -p ci.dask_suite.route_device \
        --timeout=120 --pyargs "${MODULES[@]}" "$@" || true
}
run --device-route=off --device-report=reports/dask-suite-baseline.jsonl "$@" > reports/dask-suite-baseline.log 2>&1
tail -1 reports/dask-suite-baseline.log
run --device-route=on --device-report=reports/dask-suite.jsonl "$@" > reports/dask-suite.log 2>&1
tail -1 reports/dask-suite.log
exec python -m ci.dask_suite.summarize reports/dask-suite.jsonl reports/dask-suite-baseline.jsonl reports/dask-suite.md
