#!/usr/bin/env bash
# A flake hunt: run the same tests N times (optionally with every core busy) and list each
# test that ever failed, with its rate and its first failure (ci/flake_report.py reads the
# junit files). Exit 1 on a test not in ci/known_flakes.txt.
#
#   bash ci/flake_hunt.sh [--runs N] [--hog] [--out DIR] [--known FILE] [--readme] [-- PYTEST ARGS]
#
# PYTEST ARGS: what to run, as for `python -m pytest` (e.g. tests/meta/test_scheduler.py -n 0).
# --readme: the README's test command itself (bash ci/test.sh), N times; each of its pytest
# steps writes its own junit file (JUNIT_DIR). --hog: ci/cpu_hog.py on every core for the
# whole hunt, stopped when the hunt ends however it ends.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=5 hog=0 readme=0 out=reports/flake-hunt known=ci/known_flakes.txt
while [[ $# -gt 0 ]]; do
    case "$1" in
        --runs) runs="$2"; shift 2 ;;
        --hog) hog=1; shift ;;
        --out) out="$2"; shift 2 ;;
        --known) known="$2"; shift 2 ;;
        --readme) readme=1; shift ;;
        --) shift; break ;;
        -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
        *) break ;;
    esac
done
if [[ "$readme" == 0 && $# -eq 0 ]]; then
    echo "ci/flake_hunt.sh: name the tests (-- PYTEST ARGS) or --readme" >&2
    exit 2
fi
if ! [[ "$runs" =~ ^[1-9][0-9]*$ ]]; then
    echo "ci/flake_hunt.sh: --runs wants a positive number, got '$runs'" >&2
    exit 2
fi
py=python
[[ -x .venv/bin/python ]] && py=.venv/bin/python
rm -rf "$out"
mkdir -p "$out"
hog_pid=""
silent=()  # runs that failed with no failing test in their junit (ruff, a crash, a timeout)
stop_hog() {
    if [[ -n "$hog_pid" ]]; then
        kill -KILL -- "-$hog_pid" 2>/dev/null || true
        wait "$hog_pid" 2>/dev/null || true
        hog_pid=""
    fi
}
trap stop_hog EXIT
trap 'stop_hog; exit 130' INT TERM
if [[ "$hog" == 1 ]]; then
    # A session of its own (setsid), so that the whole hog goes with one kill; it also
    # stops by itself once this shell is gone.
    setsid "$py" ci/cpu_hog.py --seconds 86400 --watch $$ &
    hog_pid=$!
    echo "flake hunt: CPU hog on $(nproc) core(s), pid $hog_pid"
fi
for ((i = 1; i <= runs; i++)); do
    start=$SECONDS
    if [[ "$readme" == 1 ]]; then
        mkdir -p "$out/run-$i"
        JUNIT_DIR="$out/run-$i" bash ci/test.sh "$@" >"$out/run-$i.log" 2>&1 && rc=0 || rc=$?
    else
        "$py" -m pytest "$@" --junitxml="$out/run-$i.xml" >"$out/run-$i.log" 2>&1 && rc=0 || rc=$?
    fi
    echo "flake hunt: run $i/$runs exit $rc in $((SECONDS - start)) s (log $out/run-$i.log)"
    if [[ "$rc" != 0 ]] && ! cat "$out/run-$i.xml" "$out/run-$i"/*.xml 2>/dev/null | grep -qE '<(failure|error)[ >]'; then
        silent+=("$i")
    fi
done
stop_hog
mapfile -t files < <(find "$out" -name '*.xml' | sort)
if [[ ${#files[@]} -eq 0 ]]; then
    echo "flake hunt: no junit file was written (see $out/run-*.log)" >&2
    exit 1
fi
rc=0
"$py" ci/flake_report.py "${files[@]}" --known "$known" --json "$out/flakes.json" || rc=$?
if [[ ${#silent[@]} -gt 0 ]]; then
    echo "flake hunt: run(s) ${silent[*]} failed with no failing test in junit: see their logs"
    rc=1
fi
exit "$rc"
