"""Collection: parametrize over the implementations, check every test's ID and capabilities,
mark what each implementation's capabilities and manifest say, and select
``--conformance-ids``."""

from __future__ import annotations

import difflib
import fnmatch
import functools
from pathlib import Path

import pytest

from ..capabilities import ALL_CAPABILITIES
from .deviations import FLAKY_RUNS, MATCHES
from .hints import did_you_mean
from .loader import LoadedImpl
from .manifests import DocumentedDeviation
from .options import load_manifests
from .report import NA_PREFIX
from .state import SUITE_DIR, RunState, run_state

SLOW_SKIP = "slow: run with -m slow or --conformance-profile=stress"


def _cid(item: pytest.Item) -> str | None:
    mark = item.get_closest_marker("conformance_id")
    return None if mark is None else mark.args[0]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.definition.get_closest_marker("conformance_id") is None:
        return
    if "impl" not in metafunc.fixturenames:
        return
    state = run_state(metafunc.config)
    state.active = True
    impls = state.load()
    # Indirect, through the ``impl`` fixture: a flaky rerun's fresh copy of the item finds
    # a real fixture, where a direct parameter's pseudo-fixture lives only on the original.
    metafunc.parametrize("impl", impls, ids=[li.name for li in impls], indirect=True)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items) -> None:
    state = run_state(config)
    if state is None:
        return
    conf_items = [it for it in items if _cid(it) is not None]
    problems = _unmarked_suite_tests(items)
    if not conf_items and not problems:
        return
    state.active = True
    if state.load_error:
        raise pytest.UsageError(state.load_error)
    if not state.manifests and state.impls:
        load_manifests(state)
    problems += _id_and_capability_problems(conf_items)
    if problems:
        raise pytest.UsageError("\n".join(sorted(set(problems))))
    seen_ids = sorted({_cid(it) for it in conf_items})
    _check_stale_entries(state, conf_items, set(seen_ids))
    for it in conf_items:
        _label(state, it)
        _mark_for_impl(state, it)
    _select_ids(config, items, seen_ids)
    _stores_first(items)


def _stores_first(items) -> None:
    """Store tests before shuffle tests (stable otherwise). A shuffle cluster is shared for
    the rest of the session once started, and its comms open and close sockets at any
    moment: a store test after it saw them as its own leaked descriptors under load."""
    items.sort(key=lambda it: it.path.parent.name == "shuffle")


def _unmarked_suite_tests(items) -> list[str]:
    """Every test function in a suite module needs an ID."""
    return [
        f"{it.nodeid}: conformance test without @conformance_id"
        for it in items
        if _is_suite_module(getattr(it, "module", None)) and _cid(it) is None
    ]


def _id_and_capability_problems(conf_items) -> list[str]:
    """An ID owned by two test functions, or a ``requires`` naming an unknown capability."""
    problems: list[str] = []
    owners: dict[str, str] = {}
    for it in conf_items:
        cid = _cid(it)
        owner = f"{it.module.__name__}::{getattr(it, 'originalname', it.name)}"
        if owners.setdefault(cid, owner) != owner:
            problems.append(f"duplicate conformance ID {cid}: {owners[cid]} and {owner}")
        for m in it.iter_markers("requires"):
            for cap in m.args + tuple(filter(None, [m.kwargs.get("without")])):
                if cap not in ALL_CAPABILITIES:
                    problems.append(
                        f"{it.nodeid}: requires unknown capability {cap!r}"
                        + did_you_mean(cap, ALL_CAPABILITIES, n=1)
                    )
    return problems


def _check_stale_entries(state: RunState, conf_items, seen_ids: set[str]) -> None:
    """Stale manifest entries are errors; judged against the whole suite when every suite
    module was collected, else against the IDs that were."""
    if not _collected_whole_suite(conf_items):
        return
    for name, entries in state.manifests.items():
        stale = sorted(set(entries) - seen_ids)
        if stale:
            raise pytest.UsageError(
                f"manifest for {name!r}: entr{'y' if len(stale) == 1 else 'ies'} matching no "
                f"conformance test: {', '.join(stale)} ({entries[stale[0]].source})"
            )


def _impl_of(item: pytest.Item) -> LoadedImpl | None:
    return item.callspec.params.get("impl") if hasattr(item, "callspec") else None


def _label(state: RunState, it: pytest.Item) -> None:
    """The report's labels: ID, implementation, device and clauses."""
    li = _impl_of(it)
    it.user_properties.append(("conformance_id", _cid(it)))
    it.user_properties.append(("conformance_impl", li.name if li is not None else "-"))
    it.user_properties.append(("conformance_device", state.device_kind))
    clauses = it.get_closest_marker("conformance_id").kwargs.get("clause", ())
    it.user_properties.append(("conformance_clauses", list(clauses)))


def _mark_for_impl(state: RunState, it: pytest.Item) -> None:
    """N/A for missing capabilities, the slow skip, then the manifest's entry."""
    li = _impl_of(it)
    if li is None:
        return
    missing = []
    for m in it.iter_markers("requires"):
        missing += [c for c in m.args if c not in li.capabilities]
        without = m.kwargs.get("without")
        if without and without in li.capabilities:
            it.add_marker(pytest.mark.skip(reason=f"{NA_PREFIX} {li.name} declares {without!r}"))
    if missing:
        caps = ", ".join(sorted(set(missing)))
        it.add_marker(
            pytest.mark.skip(reason=f"{NA_PREFIX} capability {caps} not declared by {li.name}")
        )
        return
    if it.get_closest_marker("slow") is not None and not _slow_selected(state):
        it.add_marker(pytest.mark.skip(reason=SLOW_SKIP))
        return
    _apply_manifest(state, it, li.name)


def _apply_manifest(state: RunState, it: pytest.Item, name: str) -> None:
    entry = state.manifests.get(name, {}).get(_cid(it))
    if entry is None:
        return
    why = f"[{name} manifest] {entry.reason}" + (f" ({entry.link})" if entry.link else "")
    it.user_properties.append(
        ("conformance_manifest", {"mode": entry.mode, "reason": entry.reason, "link": entry.link})
    )
    if entry.mode == "skip":
        it.add_marker(pytest.mark.skip(reason=why))
    elif entry.mode == "flaky":
        it.stash[FLAKY_RUNS] = entry.runs
    elif entry.matches:
        # Only the failures the entry names. Not strict: a generative machine may pass when
        # its draws miss them; each named deviation keeps its own strict entry, which
        # notices a fix.
        it.stash[MATCHES] = entry.matches
        it.add_marker(pytest.mark.xfail(reason=why, strict=False, raises=DocumentedDeviation))
    else:  # strict: an xfail that passes fails the run
        it.add_marker(pytest.mark.xfail(reason=why, run=entry.mode == "xfail", strict=True))


def _select_ids(config: pytest.Config, items: list, known: list[str]) -> None:
    """``--conformance-ids``: case-insensitive fnmatch; a pattern matching no collected ID is
    a usage error that names the nearest IDs."""
    patterns = [
        p.strip().upper()
        for spec in config.getoption("conformance_ids") or []
        for p in spec.split(",")
        if p.strip()
    ]
    if not patterns:
        return
    unmatched = [p for p in patterns if not any(fnmatch.fnmatchcase(c, p) for c in known)]
    if unmatched:
        lines = []
        for p in unmatched:
            near = difflib.get_close_matches(p, known, n=3, cutoff=0.5)
            hint = f"; nearest: {', '.join(near)}" if near else ""
            lines.append(f"--conformance-ids: {p!r} matches no collected conformance ID{hint}")
        raise pytest.UsageError("\n".join(lines))
    keep, drop = [], []
    for it in items:
        cid = _cid(it)
        if cid is not None and not any(fnmatch.fnmatchcase(cid, p) for p in patterns):
            drop.append(it)
        else:
            keep.append(it)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _slow_selected(state: RunState) -> bool:
    return state.profile == "stress" or "slow" in (state.config.getoption("markexpr") or "")


@functools.cache
def _suite_modules() -> frozenset[Path]:
    """The suite's test modules, wherever they sit under the package."""
    return frozenset(SUITE_DIR.rglob("test_*.py"))


def _is_suite_module(mod) -> bool:
    f = getattr(mod, "__file__", None)
    return bool(f) and Path(f).resolve() in _suite_modules()


def _collected_whole_suite(items) -> bool:
    collected = {Path(it.module.__file__).resolve() for it in items if getattr(it, "module", None)}
    return _suite_modules() <= collected
