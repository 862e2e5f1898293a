#!/usr/bin/env bash
# Mutation testing of the reference, judged by the conformance suite: see ci/mutation/run.py.
# Example: bash ci/mutation.sh --group store --budget 3600 --report docs/mutation.md
set -euo pipefail
EXTRAS="${EXTRAS:-peers,dev}"
source "$(dirname "$0")/bootstrap.sh"
mkdir -p reports/mutation
exec python ci/mutation/run.py "$@"
