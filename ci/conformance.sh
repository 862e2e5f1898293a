#!/usr/bin/env bash
# Quickstart 1: the conformance suite against the reference implementation on the sim device.
# Extra arguments go to pytest, e.g. `ci/conformance.sh --impl=zict` (reference stays a column;
# --impl=reference given again counts once). The report goes to reports/conformance/.
set -euo pipefail
source "$(dirname "$0")/bootstrap.sh"
exec python -m pytest conformance --impl=reference --device=sim \
  --conformance-report=reports/conformance -p no:randomly "$@"
