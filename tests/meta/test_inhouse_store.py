"""The in-house store (not the reference): a disk tier implies its full disk (issue 43).

The store as written keeps a value on host when a write fails and passes STORE-DISK-006; its
``disk_only`` variant, declaring only a disk tier, loses data on a full disk and FAILs it:
never N/A, as it was while the full disk was a capability of its own (``store.faults.disk``).
"""

from __future__ import annotations

from conftest import run_suite


def test_full_disk_data_loss_fails_with_only_a_disk_tier(tmp_path):
    proc, report = run_suite(
        ["conformance", "--impl=inhouse_store:adapter", "--impl=inhouse_store:disk_only",
         "--conformance-ids=STORE-DISK-006", "-n", "0"],
        tmp_path,
    )
    assert report is not None, proc.stdout[-3000:] + proc.stderr[-3000:]
    row = report["table"]["STORE-DISK-006"]
    assert row["inhouse@sim"] == "pass", row
    assert row["inhouse-disk-only@sim"] == "FAIL", row
    assert "data lost on a full disk" in proc.stdout, proc.stdout[-3000:]
