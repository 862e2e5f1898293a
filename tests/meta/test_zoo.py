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
from types import SimpleNamespace

import broken_adapters
import pytest
from test_spec import SPEC, _exempt, parse_spec, suite_citations

from conftest import once_per_session, run_suite

REPO = Path(__file__).resolve().parents[2]
IDS = sorted({cid for _, cid in broken_adapters.EXPECTED.values()})

# Store clauses no adapter can be caught on in the ci profile, and why.
NOT_IN_CI = {
    "9.9": "its one test, STORE-DISK-011, writes a > 2 GiB frame: slow (-m slow or stress)",
}


def _alone(cls) -> bool:
    """An adapter that patches the reference process-wide (in its __init__) needs a process of
    its own; the others share one process per conformance ID (one column each)."""
    return any("__init__" in vars(c) for c in cls.__mro__ if c.__module__.startswith("broken_"))


def _jobs() -> dict[str, tuple[list[str], list[str]]]:
    """``{job: (adapter names, pytest args)}``: the control first, then the slowest."""
    groups: dict[str, list[str]] = {}
    for name, (cls, cid) in broken_adapters.EXPECTED.items():
        groups.setdefault(name if _alone(cls) else cid, []).append(name)
    jobs = {
        "control": (
            [],
            ["conformance", "--impl=control_adapter:control", f"--conformance-ids={','.join(IDS)}"],
        )
    }
    slow = ("STORE-THREAD", "STORE-OOM-006", "STORE-STATE")
    order = sorted(
        groups, key=lambda job: not broken_adapters.EXPECTED[groups[job][0]][1].startswith(slow)
    )
    for job in order:
        names = groups[job]
        cid = broken_adapters.EXPECTED[names[0]][1]
        impls = [f"--impl=broken_adapters:{n}" for n in names]
        jobs[job] = (names, ["conformance", *impls, f"--conformance-ids={cid}"])
    return jobs


def _run_zoo() -> dict:
    """``{adapter or "control": {returncode, stdout, stderr, report}}`` (JSON, so that one
    xdist worker can run the zoo and leave the result for the other)."""
    jobs = _jobs()
    with tempfile.TemporaryDirectory() as tmp:

        def one(item):
            job, (_names, args) = item
            d = Path(tmp) / job
            d.mkdir()
            proc, report = run_suite(args, d)
            return job, {
                "returncode": proc.returncode,
                "stdout": proc.stdout[-6000:],
                "stderr": proc.stderr[-3000:],
                "report": report,
            }

        with ThreadPoolExecutor(max_workers=3) as pool:
            done = dict(pool.map(one, jobs.items()))
    results = {"control": done["control"]}
    for job, (names, _args) in jobs.items():
        for name in names:
            results[name] = done[job]
    return results


@pytest.fixture(scope="module")
def zoo_results(request, tmp_path_factory):
    """Once per session, also under xdist (a module fixture runs once per xdist worker)."""
    raw = once_per_session(request, tmp_path_factory, "store-zoo", _run_zoo)
    return {name: (SimpleNamespace(**{k: v for k, v in r.items() if k != "report"}), r["report"])
            for name, r in raw.items()}


@pytest.mark.parametrize("name", sorted(broken_adapters.EXPECTED))
def test_broken_adapter_is_caught(zoo_results, name):
    cls, cid = broken_adapters.EXPECTED[name]
    proc, report = zoo_results[name]
    assert report is not None, f"no report:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    cells = report["table"].get(cid)
    assert cells, f"{cid} did not run for {name}: {report['table']}\n{proc.stdout[-2000:]}"
    column = next((c for c in cells if c.rsplit("@", 1)[0] == cls.name), None)
    assert column is not None, f"{name} ({cls.name}) has no column for {cid}: {cells}"
    assert cells[column] == "FAIL", (
        f"{name}: {cid} should FAIL, got {cells[column]}\n{proc.stdout[-3000:]}"
    )
    assert proc.returncode == 1


def _for_missing_features() -> set[str]:
    """IDs of tests of how a missing feature behaves (``requires(..., without=cap)``)."""
    import importlib

    out = set()
    for path in sorted((REPO / "conformance").rglob("test_*.py")):
        name = ".".join(path.relative_to(REPO).with_suffix("").parts)
        mod = importlib.import_module(name)
        for obj in vars(mod).values():
            marks = getattr(obj, "pytestmark", [])
            ids = [m.args[0] for m in marks if m.name == "conformance_id"]
            if ids and any(m.name == "requires" and m.kwargs.get("without") for m in marks):
                out.update(ids)
    return out


def test_control_wrapper_passes(zoo_results):
    proc, report = zoo_results["control"]
    assert report is not None, proc.stdout[-3000:] + proc.stderr[-3000:]
    na_ok = _for_missing_features()  # the control has every feature: these are N/A for it
    bad = {
        cid: cells
        for cid, cells in report["table"].items()
        if set(cells.values()) != ({"N/A"} if cid in na_ok else {"pass"})
    }
    assert not bad, f"the bug-free wrapper fails: {bad}\n{proc.stdout[-3000:]}"
    assert set(report["table"]) == set(IDS)


def _store_clauses() -> set[str]:
    clauses, problems = parse_spec(SPEC.read_text(encoding="utf-8"))
    assert not problems, problems
    return {c for c, body in clauses.items() if int(c.split(".")[0]) <= 13 and not _exempt(body)}


def test_zoo_size_and_names():
    assert len(broken_adapters.EXPECTED) >= 40, len(broken_adapters.EXPECTED)
    names = [cls.name for cls, _cid in broken_adapters.EXPECTED.values()]
    assert len(names) == len(set(names)), "two adapters share a name (one report column)"


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
