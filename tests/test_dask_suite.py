"""ci/dask_suite: dask's own shuffle tests routed through the device shuffle.

The routing plugin is run for real on two of dask's tests (one that shuffles, one that does
not), and the judge on made-up records: a routed failure the baseline passes must fail the
run unless ``known.txt`` explains it, and a known failure that passes must fail it too."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ci.dask_suite import summarize

ROOT = Path(__file__).resolve().parents[1]


def test_the_plugin_routes_dask_tests_and_counts_what_reached_the_shuffle(tmp_path):
    ini = tmp_path / "pytest.ini"
    ini.write_text("[pytest]\n")
    report = tmp_path / "routed.jsonl"
    tests = [
        "dask/dataframe/tests/test_shuffle.py::test_shuffle_npartitions[tasks]",
        "dask/dataframe/dask_expr/tests/test_shuffle.py::test_set_index_single_partition",
    ]
    import dask

    site = Path(dask.__file__).resolve().parents[1]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(ini), "--rootdir", str(tmp_path), "-q", "-p", "no:cacheprovider",
         "-p", "ci.dask_suite.route_device", f"--device-report={report}", *[str(site / t) for t in tests]],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    records = {Path(r["test"]).name: r for r in map(json.loads, report.read_text().splitlines())}
    assert records["test_shuffle.py::test_shuffle_npartitions[tasks]"]["reached"] >= 1, records
    # one input partition: dask sorts it where it is, no shuffle under any method
    assert records["test_shuffle.py::test_set_index_single_partition"]["reached"] == 0, records
    assert {r["outcome"] for r in records.values()} == {"passed"}


def _record(test: str, outcome: str, reached: int = 0, error: str = "") -> dict:
    return {"test": test, "outcome": outcome, "reached": reached, "error": error}


@pytest.fixture
def known(tmp_path, monkeypatch):
    path = tmp_path / "known.txt"
    path.write_text("# reasons\nsite-packages/dask/t.py::test_known* | a design choice\n")
    monkeypatch.setattr(summarize, "KNOWN", path)
    return path


def test_an_unexplained_routed_failure_fails_the_run_and_a_known_one_does_not(known):
    base = "site-packages/dask/t.py::"
    baseline = {base + n: _record(base + n, "passed") for n in ("test_a", "test_known_b", "test_c")}
    routed = {
        base + "test_a": _record(base + "test_a", "failed", error="AssertionError: rows lost"),
        base + "test_known_b": _record(base + "test_known_b", "failed", error="x"),
        base + "test_c": _record(base + "test_c", "passed", reached=2),
    }
    table, problems = summarize.summarize(routed, baseline)
    assert problems == [f"{base}test_a: failed routed, passed on the baseline: AssertionError: rows lost"]
    assert "| dask/t.py | 3 | 1 | 1 | 2 | 0 | 3 |" in table
    assert "| `t.py::test_known_b` | failed | passed | a design choice |" in table


def test_a_known_failure_that_passes_fails_the_run(known):
    base = "site-packages/dask/t.py::"
    record = _record(base + "test_known_b", "passed", reached=1)
    _, problems = summarize.summarize({record["test"]: record}, {record["test"]: _record(record["test"], "passed")})
    assert len(problems) == 1 and "passes now, but known.txt says it fails" in problems[0]
