#!/usr/bin/env bash
# Quickstart 2: the full test suite (library tests, meta tests, conformance on sim) plus ruff.
set -euo pipefail
source "$(dirname "$0")/bootstrap.sh"
export HYPOTHESIS_PROFILE="${HYPOTHESIS_PROFILE:-ci}"
python -m ruff check .
python -m pytest tests -n 2 "$@"
python -m pytest conformance --impl=reference --device=sim "$@"
