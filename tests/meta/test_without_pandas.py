"""Issue 43: a plain install (no ``shuffle`` extra) collects the whole suite, and an ID that
builds pandas frames reads ``not exercised`` naming the extra, never an error."""

from __future__ import annotations


def test_an_id_needing_pandas_names_the_extra(suite):
    ids = "SHUF-INDEX-001,SHUF-META-001,STORE-KEY-001"
    proc, report = suite(["conformance", "-p", "no_pandas", "--impl=reference", f"--conformance-ids={ids}"])
    assert report is not None, proc.stdout[-3000:] + proc.stderr[-3000:]
    cells = {t["id"]: t for t in report["tests"]}
    index = cells["SHUF-INDEX-001"]
    assert index["status"] == "not exercised", index
    # the blocker fired (its text), and the reason names what to install
    assert "blocked by no_pandas" in index["reason"], index["reason"]
    assert "pip install 'proxify-conformance[shuffle]'" in index["reason"], index["reason"]
    assert cells["SHUF-META-001"]["status"] == "N/A", cells["SHUF-META-001"]
    assert cells["STORE-KEY-001"]["status"] == "pass", cells["STORE-KEY-001"]


def test_the_whole_suite_collects_without_pandas(suite):
    proc, _ = suite(["conformance", "-p", "no_pandas", "--impl=reference", "--collect-only"])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "error" not in proc.stdout.lower().split("\n")[-2], proc.stdout[-2000:]
