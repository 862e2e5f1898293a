#!/usr/bin/env bash
# One prepared run on a lent GPU machine: set up, run the GPU-only checks, write results to $OUT.
# Usage (device tool): bash ci/gpu_check.sh   -> $OUT/gpu-results.md
set -uo pipefail
OUT="${OUT:-$(pwd)/reports/gpu}"
mkdir -p "$OUT"
EXTRAS="peers,dev,gpu" VENV="${VENV:-$(pwd)/.venv-gpu}" source "$(dirname "$0")/bootstrap.sh" \
  > "$OUT/setup.log" 2>&1 || { echo "setup failed"; tail -40 "$OUT/setup.log"; exit 1; }
{
  echo "# GPU check $(date -u +%Y-%m-%dT%H:%MZ)"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python -c "import cupy, numba; print('cupy', cupy.__version__, 'numba', numba.__version__)"
  echo '## device tests on cuda'
  python -m pytest tests/device -q -p no:cacheprovider 2>&1 | tail -3
  echo '## kernels (CUDA vs CPU)'
  python -m pytest tests/kernels -q -p no:cacheprovider 2>&1 | tail -3
  echo '## conformance on cuda'
  timeout 240 python -m pytest conformance --impl=reference --device=cuda -q 2>&1 | tail -40
  echo '## partition benchmark on cuda'
  timeout 120 python benchmarks/partition.py --device cuda --rows 1e8 2>&1 | tail -20
} 2>&1 | tee "$OUT/gpu-results.md"
