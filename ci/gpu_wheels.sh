#!/usr/bin/env bash
# Download, on a machine with network, the wheels an air-gapped GPU box needs for
# ci/gpu_check.sh: cp312 manylinux x86_64 wheels of everything in ci/gpu-wheels.txt.
#
#   bash ci/gpu_wheels.sh [--dir DIR]          # download what is missing, print the total size
#   bash ci/gpu_wheels.sh --check [--dir DIR]  # list what is missing (exit 1 if anything is)
#
# DIR defaults to .whl/ in the repository root (git-ignored). The folder travels with the
# working tree to the GPU box, so its total must stay under MAX_MIB (default 60).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LIST="$ROOT/ci/gpu-wheels.txt"
DIR="$ROOT/.whl"
CHECK=0
MAX_MIB="${MAX_MIB:-60}"
while [ $# -gt 0 ]; do
  case "$1" in
    --check) CHECK=1 ;;
    --dir) DIR="${2:?--dir needs a folder}"; shift ;;
    --dir=*) DIR="${1#--dir=}" ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "gpu_wheels.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  if [ -x "$ROOT/.venv/bin/python" ]; then PY="$ROOT/.venv/bin/python"; else PY=python3; fi
fi

# A wheel file name spells its project with '_' for '-' and '.' (PEP 427); compare normalised.
wheel_for() {  # NAME VERSION -> the matching file in DIR, or nothing
  local want; want="$(echo "$1" | tr 'A-Z.-' 'a-z__')-$2-"
  for f in "$DIR"/*.whl; do
    [ -e "$f" ] || continue
    local base; base="$(basename "$f" | tr 'A-Z.-' 'a-z__')"
    case "$base" in "$(echo "$want" | tr '.-' '__')"*) echo "$f"; return ;; esac
  done
}

mapfile -t SPECS < <(grep -v '^\s*#' "$LIST" | sed 's/\s*#.*//' | grep -v '^\s*$')
missing=()
for spec in "${SPECS[@]}"; do
  name="${spec%%==*}"; version="${spec##*==}"
  [ -n "$(wheel_for "$name" "$version")" ] || missing+=("$spec")
done

size_mib() { du -sk "$DIR" 2>/dev/null | awk '{printf "%.1f", $1/1024}'; }

if [ "$CHECK" = 1 ]; then
  if [ ${#missing[@]} -eq 0 ]; then
    echo "gpu_wheels: all ${#SPECS[@]} wheels present in $DIR ($(size_mib) MiB)"
    exit 0
  fi
  echo "gpu_wheels: ${#missing[@]} of ${#SPECS[@]} wheels missing from $DIR:"
  printf '  %s\n' "${missing[@]}"
  exit 1
fi

mkdir -p "$DIR"
PLATFORMS=()
for p in manylinux_2_34 manylinux_2_28 manylinux_2_27 manylinux_2_24 manylinux_2_17 manylinux2014 manylinux1; do
  PLATFORMS+=(--platform "${p}_x86_64")
done
if [ ${#missing[@]} -gt 0 ]; then
  "$PY" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp --abi cp312 --abi abi3 --abi none \
    "${PLATFORMS[@]}" -d "$DIR" "${missing[@]}"
fi
# Each spec once, in one version: two versions of one project stop the install on the box.
for spec in "${SPECS[@]}"; do
  name="$(echo "${spec%%==*}" | tr 'A-Z.-' 'a-z__')"
  n=$(ls "$DIR" | tr 'A-Z.-' 'a-z__' | grep -c "^${name}-[0-9]" || true)
  [ "$n" -le 1 ] || { echo "gpu_wheels: $n versions of ${spec%%==*} in $DIR; keep one" >&2; exit 1; }
done
mib="$(size_mib)"
echo "gpu_wheels: ${#SPECS[@]} wheels in $DIR, total $mib MiB (limit $MAX_MIB MiB)"
ls -1 "$DIR"
awk -v m="$mib" -v max="$MAX_MIB" 'BEGIN { exit !(m > max) }' \
  && { echo "gpu_wheels: $DIR is over $MAX_MIB MiB; it will not travel with the working tree" >&2; exit 1; }
exit 0
