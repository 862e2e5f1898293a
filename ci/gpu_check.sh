#!/usr/bin/env bash
# One prepared run on a GPU box, air-gapped or not: proves and measures the CUDA path.
#
#   bash ci/gpu_check.sh [--out DIR] [--wheels DIR] [--budget S] [--dry-run]
#
# Uses the box's own python3 ($PYTHON to choose another): no venv, no package index. The
# wheels that ci/gpu_wheels.sh downloaded (--wheels, default .whl/) are installed with
# `pip install --no-index --no-deps --target` into a temporary folder put on PYTHONPATH,
# with the checkout itself. Steps (python -m ci.gpu_check; ci/gpu_check/steps/, a module each)
# run in order, each in its own process with a timeout from what is left of --budget (420 s), and
# write DIR/gpu-check.json and DIR/gpu-results.md after every step; the table is printed
# last. DIR defaults to $OUT, else reports/gpu.
#
# --dry-run (CI, no GPU): checks the arguments and the wheel folder, imports everything
# with the carried wheels on PYTHONPATH (or, without the folder or on another Python
# than 3.12, this Python's own packages, and says so), runs the CUDA kernels under
# numba's simulator, and prints which GPU steps it skipped and why.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUTDIR="${OUT:-$ROOT/reports/gpu}"
WHEELS="$ROOT/.whl"
DRY=0
BUDGET=420
usage() { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "gpu_check.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --out) [ $# -ge 2 ] || die "--out needs a folder"; OUTDIR="$2"; shift ;;
    --out=*) OUTDIR="${1#--out=}" ;;
    --wheels) [ $# -ge 2 ] || die "--wheels needs a folder"; WHEELS="$2"; shift ;;
    --wheels=*) WHEELS="${1#--wheels=}" ;;
    --budget) [ $# -ge 2 ] || die "--budget needs seconds"; BUDGET="$2"; shift ;;
    --budget=*) BUDGET="${1#--budget=}" ;;
    --dry-run) DRY=1 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done
[[ "$BUDGET" =~ ^[0-9]+$ ]] && [ "$BUDGET" -ge 30 ] || die "--budget must be whole seconds >= 30, got '$BUDGET'"
[ -n "$OUTDIR" ] || die "--out is empty"
mkdir -p "$OUTDIR" || die "cannot create --out folder $OUTDIR"
OUTDIR="$(cd "$OUTDIR" && pwd)"

PY="${PYTHON:-python3}"
if [ "$DRY" = 1 ] && [ -z "${PYTHON:-}" ] && [ -x "$ROOT/.venv/bin/python" ]; then
  PY="$ROOT/.venv/bin/python"   # CI: the project's environment
fi
command -v "$PY" >/dev/null 2>&1 || die "no python: $PY"
PYVER="$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
echo "gpu_check: python $PYVER ($("$PY" -c 'import sys; print(sys.executable)'))"

# --- the carried wheels
SITE=""
if compgen -G "$WHEELS/*.whl" >/dev/null; then
  if ! bash "$ROOT/ci/gpu_wheels.sh" --check --dir "$WHEELS"; then
    [ "$DRY" = 1 ] && die "the wheel folder $WHEELS is incomplete (bash ci/gpu_wheels.sh)"
    echo "gpu_check: going on with what is there; imports will say what is missing"
  fi
  SITE="$(mktemp -d "${TMPDIR:-/tmp}/gpu-check-site.XXXXXX")"
  trap 'rm -rf "$SITE"' EXIT
  PIPARGS=(install -q --no-index --no-deps --no-compile --no-cache-dir --disable-pip-version-check
           --target "$SITE")
  if [ "$PYVER" != "3.12" ]; then
    # The wheels are for the box's cp312: check that they install there, import our own.
    PIPARGS+=(--only-binary=:all: --python-version 3.12 --implementation cp --abi cp312
              --abi abi3 --abi none)
    for p in manylinux_2_34 manylinux_2_28 manylinux_2_27 manylinux_2_24 manylinux_2_17 \
             manylinux2014 manylinux1 manylinux_2_5; do PIPARGS+=(--platform "${p}_x86_64"); done
  fi
  "$PY" -m pip "${PIPARGS[@]}" "$WHEELS"/*.whl || die "pip could not install the wheels from $WHEELS"
  echo "gpu_check: installed $(ls "$WHEELS"/*.whl | wc -l) wheels from $WHEELS into $SITE"
  if [ "$PYVER" = "3.12" ]; then
    export GPU_CHECK_SITE="$SITE"
    export PYTHONPATH="$ROOT:$SITE${PYTHONPATH:+:$PYTHONPATH}"
  else
    echo "gpu_check: python $PYVER is not the box's 3.12: the wheels installed for cp312, but" \
         "imports use this Python's own packages"
    export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
  fi
else
  echo "gpu_check: no wheel folder at $WHEELS (bash ci/gpu_wheels.sh makes it): using this" \
       "Python's own packages for dask, distributed, zict, blake3 and RMM"
  export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
fi

ARGS=(--out "$OUTDIR" --budget "$BUDGET")
[ "$DRY" = 1 ] && ARGS+=(--dry-run)
cd "$ROOT"
exec "$PY" -m ci.gpu_check "${ARGS[@]}"
