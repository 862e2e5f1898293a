"""The suite must catch every deliberately broken adapter, with the intended conformance ID.

The broken adapters share a few subprocesses under the ``ci`` profile, each adapter running
only its intended ID (``zoo_select``), the processes in parallel. A control run wraps the
reference the same way without a bug and must pass every selected ID, so the failures come
from the bugs alone.

Each adapter names the SPEC.md clauses its bug breaks (``violates``); its intended ID must
check one of them, and together the adapters break every store clause (the exceptions, and
why, are in ``NOT_IN_CI``).
"""

from __future__ import annotations

import json
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


# Processes that hold the adapters. Each process pays its start (about 3 s of CPU: imports
# and collection) once instead of once per ID: the zoo ran 95 processes, then 61 (an adapter
# that patched the reference process-wide had one of its own), now 3 (``Patching``: such an
# adapter is patched only around its own tests).
N_SHARED = 2
# Relative cost of one adapter's ID, only used to balance the shared processes.
SLOW = ("STORE-THREAD", "STORE-OOM-006", "STORE-STATE")


def _cost(cid: str) -> int:
    return 10 if cid.startswith(SLOW) else 1


def _shared_jobs(names: list[str]) -> list[tuple[list[str], list[tuple[str, str]]]]:
    """``[(adapter names, [(ID, implementation name)])]``, ``N_SHARED`` of them, balanced by
    cost (costliest first, onto the lightest process)."""
    jobs: list[tuple[int, list[str], list[tuple[str, str]]]] = [
        (0, [], []) for _ in range(N_SHARED)
    ]
    for name in sorted(names, key=lambda n: (-_cost(broken_adapters.EXPECTED[n][1]), n)):
        cls, cid = broken_adapters.EXPECTED[name]
        i = min(range(N_SHARED), key=lambda j: jobs[j][0])
        total, chosen, pairs = jobs[i]
        jobs[i] = (total + _cost(cid), [*chosen, name], [*pairs, (cid, cls.name)])
    return [(chosen, pairs) for _, chosen, pairs in jobs if chosen]


def _jobs() -> dict[str, tuple[list[str], list[str], dict[str, str]]]:
    """``{job: (adapter names, pytest args, environment)}``: the control and the shared
    processes."""
    jobs = {
        "control": (
            [],
            ["conformance", "--impl=control_adapter:control", f"--conformance-ids={','.join(IDS)}"],
            {},
        )
    }
    for i, (names, pairs) in enumerate(_shared_jobs(list(broken_adapters.EXPECTED))):
        impls = [f"--impl=broken_adapters:{n}" for n in names]
        ids = ",".join(sorted({cid for cid, _ in pairs}))
        args = ["conformance", "-p", "zoo_select", *impls, f"--conformance-ids={ids}"]
        jobs[f"shared-{i}"] = (names, args, {"ZOO_PAIRS": json.dumps(pairs)})
    return jobs


def _run_zoo() -> dict:
    """``{adapter or "control": {returncode, stdout, stderr, report}}`` (JSON, so that one
    xdist worker can run the zoo and leave the result for the other)."""
    jobs = _jobs()
    with tempfile.TemporaryDirectory() as tmp:

        def one(item):
            job, (names, args, env) = item
            d = Path(tmp) / job
            d.mkdir()
            # The hang guard grows with the adapters a process holds (a minute each).
            proc, report = run_suite(args, d, env_extra=env, timeout=900 + 60 * len(names))
            return job, {
                "returncode": proc.returncode,
                "stdout": proc.stdout[-6000:],
                "stderr": proc.stderr[-3000:],
                "report": report,
            }

        with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
            done = dict(pool.map(one, jobs.items()))
    results = {"control": done["control"]}
    for job, (names, _args, _env) in jobs.items():
        for name in names:
            results[name] = done[job]
    return results


@pytest.fixture(scope="module")
def zoo_results(request, tmp_path_factory):
    """Once per session, also under xdist (a module fixture runs once per xdist worker)."""
    raw = once_per_session(request, tmp_path_factory, "store-zoo", _run_zoo)
    return {
        name: (SimpleNamespace(**{k: v for k, v in r.items() if k != "report"}), r["report"])
        for name, r in raw.items()
    }


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


def test_jobs_run_every_adapter_once():
    jobs = _jobs()
    names = [n for ns, _args, _env in jobs.values() for n in ns]
    assert sorted(names) == sorted(broken_adapters.EXPECTED)
    assert len(jobs) == 1 + N_SHARED


def test_each_shared_process_runs_only_its_pairs(zoo_results):
    for job, (names, _args, env) in _jobs().items():
        if not env:
            continue
        _proc, report = zoo_results[names[0]]
        ran = {
            (cid, column.rsplit("@", 1)[0])
            for cid, cells in report["table"].items()
            for column in cells
        }
        assert ran == {tuple(p) for p in json.loads(env["ZOO_PAIRS"])}, job
