"""The suite must catch every deliberately broken adapter, with the intended conformance ID.

Each broken adapter runs in its own subprocess under the ``ci`` profile, with
only the IDs that matter selected (``--conformance-ids``), all of them in
parallel. A control run wraps the reference the same way without a bug and
must pass every selected ID, so the failures come from the bugs alone.
"""

from __future__ import annotations

import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import broken_adapters
import pytest
from conftest import run_suite

IDS = sorted({cid for _, cid in broken_adapters.EXPECTED.values()})


@pytest.fixture(scope="module")
def zoo_results():
    jobs = {
        name: ["conformance", f"--impl=broken_adapters:{name}", f"--conformance-ids={cid}"]
        for name, (_, cid) in broken_adapters.EXPECTED.items()
    }
    jobs["control"] = [
        "conformance",
        "--impl=control_adapter:control",
        f"--conformance-ids={','.join(IDS)}",
    ]
    with tempfile.TemporaryDirectory() as tmp:

        def one(item):
            name, args = item
            d = Path(tmp) / name
            d.mkdir()
            return name, run_suite(args, d)

        with ThreadPoolExecutor(max_workers=3) as pool:
            return dict(pool.map(one, jobs.items()))


@pytest.mark.parametrize("name", sorted(broken_adapters.EXPECTED))
def test_broken_adapter_is_caught(zoo_results, name):
    _, cid = broken_adapters.EXPECTED[name]
    proc, report = zoo_results[name]
    assert report is not None, f"no report:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    status = {row: cells for row, cells in report["table"].items()}
    cells = status.get(cid)
    assert cells, f"{cid} did not run for {name}: {report['table']}\n{proc.stdout[-2000:]}"
    assert list(cells.values()) == ["FAIL"], (
        f"{name}: {cid} should FAIL, got {cells}\n{proc.stdout[-3000:]}"
    )
    assert proc.returncode == 1


def test_control_wrapper_passes(zoo_results):
    proc, report = zoo_results["control"]
    assert report is not None, proc.stdout[-3000:] + proc.stderr[-3000:]
    bad = {cid: cells for cid, cells in report["table"].items() if set(cells.values()) != {"pass"}}
    assert not bad, f"the bug-free wrapper fails: {bad}\n{proc.stdout[-3000:]}"
    assert set(report["table"]) == set(IDS)
