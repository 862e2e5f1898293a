#!/usr/bin/env bash
# What the nightly multi-GPU job calls: every stress scenario, reports under OUT.
#   bash ci/run_stress.sh --impl IMPL --gpus N [--out DIR] [--device cuda|sim]
# One worker per GPU (CUDA_VISIBLE_DEVICES); exits non-zero if any scenario found a violation.
set -uo pipefail
IMPL=reference GPUS=1 OUT=reports/stress DEVICE=cuda
while [ $# -gt 0 ]; do
  case "$1" in
    --impl) IMPL="$2"; shift 2 ;;
    --gpus) GPUS="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --device) DEVICE="$2"; shift 2 ;;
    *) echo "ci/run_stress.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
source "$(dirname "$0")/bootstrap.sh"
status=0
run() {  # run NAME ARGS...: one scenario into $OUT/NAME
  local name="$1"; shift
  echo "== stress $name ($IMPL, $GPUS x $DEVICE)"
  python -m stress "$@" --impl "$IMPL" --device "$DEVICE" --workers "$GPUS" --out "$OUT/$name" --no-progress \
    || status=1
}
run store-churn store-churn --device-memory 1GiB --duration 300
run shuffle shuffle --device-memory 8GiB --data "$((GPUS * 32))GiB" --rounds 2
run faults faults --device-memory 64MiB
exit $status
