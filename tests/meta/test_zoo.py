"""The suite must catch every deliberately broken adapter, with the intended conformance ID.

Each broken adapter runs in its own subprocess under the ``ci`` profile, with
only the IDs that matter selected (``--conformance-ids``), all of them in
parallel. A control run wraps the reference the same way without a bug and
must pass every selected ID, so the failures come from the bugs alone.

Each adapter names the SPEC.md clauses its bug breaks (``violates``); its intended ID must
check one of them, and together the adapters break every store clause (the exceptions, and
why, are in ``NOT_IN_CI``).
"""

from __future__ import annotations

import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import broken_adapters
import pytest
from conftest import run_suite
from test_spec import SPEC, _exempt, parse_spec, suite_citations

IDS = sorted({cid for _, cid in broken_adapters.EXPECTED.values()})

# Store clauses no adapter can be caught on in the ci profile, and why.
NOT_IN_CI = {
    "9.9": "its one test, STORE-DISK-011, writes a > 2 GiB frame: slow (-m slow or stress)",
}


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


def _store_clauses() -> set[str]:
    clauses, problems = parse_spec(SPEC.read_text(encoding="utf-8"))
    assert not problems, problems
    return {c for c, body in clauses.items() if int(c.split(".")[0]) <= 13 and not _exempt(body)}


def test_zoo_size():
    assert len(broken_adapters.EXPECTED) >= 40, len(broken_adapters.EXPECTED)


def test_every_adapter_breaks_a_clause_its_id_checks():
    cited = suite_citations()
    clauses = _store_clauses()
    bad = []
    for name, (cls, cid) in sorted(broken_adapters.EXPECTED.items()):
        violates = set(getattr(cls, "violates", ()))
        if not violates or violates - clauses:
            bad.append(
                f"{name}: violates {sorted(violates)} (unknown: {sorted(violates - clauses)})"
            )
        elif cid not in cited:
            bad.append(f"{name}: its ID {cid} is not in the suite")
        elif not violates & set(cited[cid]):
            bad.append(f"{name}: breaks {sorted(violates)}, yet {cid} checks {list(cited[cid])}")
    assert not bad, "\n".join(bad)


def test_zoo_breaks_every_store_clause():
    cited = suite_citations()
    covered = {
        c
        for cls, cid in broken_adapters.EXPECTED.values()
        for c in set(getattr(cls, "violates", ())) & set(cited.get(cid, ()))
    }
    missing = sorted(
        _store_clauses() - covered - set(NOT_IN_CI), key=lambda c: tuple(map(int, c.split(".")))
    )
    assert not missing, f"no broken adapter is caught breaking clauses {missing}"
