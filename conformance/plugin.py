"""The conformance pytest plugin (entry point ``pytest11: conformance``).

It owns every option, marker, profile and fixture of the suite, so both
``pytest conformance --impl=...`` and ``pytest --pyargs conformance --impl=...``
work. It is inert for runs that collect no conformance test: it loads nothing,
parametrizes nothing and prints nothing unless ``--impl`` is given or a test
carrying a ``conformance_id`` marker is collected.
"""

from __future__ import annotations

import datetime
import difflib
import fnmatch
import os
import platform
from pathlib import Path

import pytest

from . import SPEC_VERSION, SUITE_VERSION
from .api import PROTOCOL_VERSION
from .capabilities import ALL_CAPABILITIES
from .hints import did_you_mean
from .loader import ImplError, LoadedImpl, load_all
from .manifest import (
    DocumentedDeviation,
    ManifestError,
    default_path,
    matched_deviations,
    unmatched_failures,
)
from .manifest import load as load_manifest
from .profiles import DEFAULT_PROFILE, ENV_VAR, PROFILES, database_path, register_profiles
from .report import NA_PREFIX, Results
from .shrink import MODES as SHRINK_MODES
from .shrink import default_mode as default_shrink
from .shrink import limit as shrink_limit

PACKAGE_DIR = Path(__file__).parent
DEVICE_KINDS = ("sim", "cuda", "auto")


class _State:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.impl_specs: list[str] = list(config.getoption("conformance_impl") or [])
        self.device_kind: str = config.getoption("conformance_device")
        self.profile: str = config.getoption("conformance_profile") or os.environ.get(
            ENV_VAR, DEFAULT_PROFILE
        )
        self.shrink: str = config.getoption("conformance_shrink") or default_shrink(self.profile)
        self.impls: list[LoadedImpl] | None = None
        self.load_error: str | None = None
        self.manifests: dict[str, dict] = {}
        self.results = Results()
        self.active = bool(self.impl_specs)
        self.started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        self.commit: tuple[str | None, bool] | None = None

    def load(self) -> list[LoadedImpl]:
        if self.impls is None and self.load_error is None:
            try:
                # The invocation folder and rootdir: `pytest` (unlike `python -m pytest`) does
                # not put the current folder on sys.path, yet --impl=my_adapter:adapter there
                # must load either way.
                search = (self.config.invocation_params.dir, self.config.rootpath)
                self.impls = load_all(self.impl_specs or ["reference"], search)
            except ImplError as exc:
                self.load_error = str(exc)
        return self.impls or []


_KEY = pytest.StashKey[_State]()


def _state(config: pytest.Config) -> _State | None:
    return config.stash.get(_KEY, None)


# --------------------------------------------------------------------------- options
def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("conformance", "proxify conformance suite")
    g.addoption(
        "--impl",
        action="append",
        dest="conformance_impl",
        default=[],
        metavar="MODULE:ATTR|NAME",
        help="implementation to check (repeatable): module:attr, or one of reference, zict, "
        "distributed-spill, dask-cuda, distributed-p2p, dask-tasks, reference-in-dask. Default: reference.",
    )
    g.addoption(
        "--device",
        dest="conformance_device",
        default="sim",
        choices=DEVICE_KINDS,
        help="device the conformance tests allocate on (default: sim)",
    )
    g.addoption(
        "--conformance-report",
        dest="conformance_report",
        default=None,
        metavar="DIR",
        help="write conformance.json and conformance.md to DIR",
    )
    g.addoption(
        "--expected",
        dest="conformance_expected",
        action="append",
        default=[],
        metavar="[IMPL=]FILE",
        help="expected-failure manifest (TOML) for an implementation",
    )
    g.addoption(
        "--conformance-profile",
        dest="conformance_profile",
        default=None,
        choices=PROFILES,
        help=f"hypothesis profile (default: ${ENV_VAR} or {DEFAULT_PROFILE})",
    )
    g.addoption(
        "--conformance-shrink",
        dest="conformance_shrink",
        default=None,
        choices=SHRINK_MODES,
        help="how long a failing generative test shrinks: bounded (10 s a test, the default in "
        "the ci profile), full (hypothesis's own 5 minutes, default in nightly and stress), "
        "none (the first failing example as drawn)",
    )
    g.addoption(
        "--conformance-ids",
        dest="conformance_ids",
        action="append",
        default=[],
        metavar="ID[,ID...]",
        help="run only these conformance IDs (fnmatch patterns, case-insensitive)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "conformance_id(cid, clause=()): stable conformance ID and its SPEC.md clauses"
    )
    config.addinivalue_line("markers", "requires(*caps, without=None): capabilities a test needs")
    config.addinivalue_line("markers", "slow: heavy tests kept out of the default run")
    register_profiles()
    state = _State(config)
    if state.profile not in PROFILES:
        raise pytest.UsageError(
            f"{ENV_VAR}={state.profile!r}: expected one of {', '.join(PROFILES)}"
        )
    config.stash[_KEY] = state
    config.pluginmanager.register(_Recorder(state), "conformance-recorder")
    if state.impl_specs:
        state.load()
        if state.load_error:
            raise pytest.UsageError(state.load_error)
        if state.device_kind == "auto":
            from reference_impl.device import cuda_available

            state.device_kind = "cuda" if cuda_available() else "sim"
        elif state.device_kind == "cuda":
            _check_cuda()
        _load_manifests(state)


def _check_cuda() -> None:
    """``--device=cuda`` where CuPy or a GPU is missing: one usage error at start-up,
    not a FAIL row per test blaming the implementation."""
    from reference_impl.device import DeviceUnavailableError, require_cuda

    try:
        require_cuda()
    except DeviceUnavailableError as exc:
        raise pytest.UsageError(
            f"--device=cuda: {exc}; use --device=sim (or auto) on a machine without one"
        ) from None


def _load_manifests(state: _State) -> None:
    names = [li.name for li in state.impls or []]
    explicit: dict[str, str] = {}
    try:
        for spec in state.config.getoption("conformance_expected") or []:
            name, sep, path = spec.partition("=")
            if not sep or not name or os.path.exists(spec):
                name, path = None, spec
            declared, entries = load_manifest(path)
            target = name or declared or (names[0] if len(names) == 1 else None)
            if target is None:
                raise ManifestError(
                    f"--expected={spec}: say which implementation it is for "
                    f'(IMPL=FILE or a top-level impl = "...")'
                )
            if target not in names:
                raise ManifestError(f"--expected={spec}: no --impl named {target!r}")
            state.manifests[target] = entries
            explicit[target] = path
        for name in names:
            if name not in state.manifests and default_path(name).exists():
                state.manifests[name] = load_manifest(default_path(name))[1]
    except ManifestError as exc:
        raise pytest.UsageError(str(exc)) from None


# --------------------------------------------------------------------------- header
def pytest_report_header(config: pytest.Config) -> list[str] | None:
    state = _state(config)
    if state is None or not state.active:
        return None
    seed = (
        config.getoption("hypothesis_seed", None)
        if _has_option(config, "hypothesis_seed")
        else None
    )
    impls = ", ".join(f"{li.name} {li.adapter.version} ({li.spec})" for li in state.impls or [])
    return [
        f"conformance: suite {SUITE_VERSION}, spec {SPEC_VERSION}, protocol {PROTOCOL_VERSION}",
        f"conformance: implementations: {impls}",
        f"conformance: device: {state.device_kind}",
        f"conformance: hypothesis profile: {state.profile} "
        f"(seed: {seed if seed is not None else 'derandomized' if state.profile == 'ci' else 'random'}; "
        f"database: {database_path(state.profile, '<impl>') or 'none'}; "
        f"shrink: {state.shrink}, --conformance-shrink)",
    ]


def _has_option(config: pytest.Config, name: str) -> bool:
    try:
        config.getoption(name)
        return True
    except ValueError:
        return False


# --------------------------------------------------------------------------- collection
def _is_conformance(definition) -> bool:
    return definition.get_closest_marker("conformance_id") is not None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if not _is_conformance(metafunc.definition) or "impl" not in metafunc.fixturenames:
        return
    state = _state(metafunc.config)
    state.active = True
    impls = state.load()
    metafunc.parametrize("impl", impls, ids=[li.name for li in impls])


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items) -> None:
    state = _state(config)
    if state is None:
        return
    conf_items = [it for it in items if it.get_closest_marker("conformance_id") is not None]
    problems: list[str] = []
    # Every test function in a conformance.test_* module needs an ID.
    for it in items:
        mod = getattr(it, "module", None)
        if (
            mod is not None
            and _is_suite_module(mod)
            and it.get_closest_marker("conformance_id") is None
        ):
            problems.append(f"{it.nodeid}: conformance test without @conformance_id")
    if not conf_items and not problems:
        return
    state.active = True
    if state.load_error:
        raise pytest.UsageError(state.load_error)
    if not state.manifests and state.impls:
        _load_manifests(state)

    owners: dict[str, str] = {}
    seen_ids: set[str] = set()
    for it in conf_items:
        cid = it.get_closest_marker("conformance_id").args[0]
        owner = f"{it.module.__name__}::{getattr(it, 'originalname', it.name)}"
        if owners.setdefault(cid, owner) != owner:
            problems.append(f"duplicate conformance ID {cid}: {owners[cid]} and {owner}")
        seen_ids.add(cid)
        for m in it.iter_markers("requires"):
            for cap in m.args + tuple(filter(None, [m.kwargs.get("without")])):
                if cap not in ALL_CAPABILITIES:
                    problems.append(
                        f"{it.nodeid}: requires unknown capability {cap!r}"
                        + did_you_mean(cap, ALL_CAPABILITIES, n=1)
                    )
    if problems:
        raise pytest.UsageError("\n".join(sorted(set(problems))))

    # Stale manifest entries are errors; judged against the whole suite when
    # every suite module was collected, else against the IDs that were.
    whole_suite = _collected_whole_suite(conf_items)
    for name, entries in state.manifests.items():
        stale = sorted(set(entries) - seen_ids)
        if stale and whole_suite:
            raise pytest.UsageError(
                f"manifest for {name!r}: entr{'y' if len(stale) == 1 else 'ies'} matching no "
                f"conformance test: {', '.join(stale)} ({entries[stale[0]].source})"
            )

    for it in conf_items:
        cid = it.get_closest_marker("conformance_id").args[0]
        li: LoadedImpl | None = it.callspec.params.get("impl") if hasattr(it, "callspec") else None
        name = li.name if li is not None else "-"
        clauses = it.get_closest_marker("conformance_id").kwargs.get("clause", ())
        it.user_properties.append(("conformance_id", cid))
        it.user_properties.append(("conformance_impl", name))
        it.user_properties.append(("conformance_device", state.device_kind))
        it.user_properties.append(("conformance_clauses", list(clauses)))
        if li is None:
            continue
        missing = []
        for m in it.iter_markers("requires"):
            missing += [c for c in m.args if c not in li.capabilities]
            without = m.kwargs.get("without")
            if without and without in li.capabilities:
                it.add_marker(pytest.mark.skip(reason=f"{NA_PREFIX} {name} declares {without!r}"))
        if missing:
            it.add_marker(
                pytest.mark.skip(
                    reason=f"{NA_PREFIX} capability {', '.join(sorted(set(missing)))} not declared by {name}"
                )
            )
            continue
        if it.get_closest_marker("slow") is not None and not _slow_selected(state):
            it.add_marker(pytest.mark.skip(reason=SLOW_SKIP))
            continue
        entry = state.manifests.get(name, {}).get(cid)
        if entry is not None:
            why = f"[{name} manifest] {entry.reason}" + (f" ({entry.link})" if entry.link else "")
            it.user_properties.append(
                (
                    "conformance_manifest",
                    {"mode": entry.mode, "reason": entry.reason, "link": entry.link},
                )
            )
            if entry.mode == "skip":
                it.add_marker(pytest.mark.skip(reason=why))
            elif entry.mode == "flaky":
                it.stash[_FLAKY_RUNS] = entry.runs
            elif entry.matches:
                # Only the failures the entry names. Not strict: a generative machine may
                # pass when its draws miss them; each named deviation keeps its own strict
                # entry, which notices a fix.
                it.stash[_MATCHES] = entry.matches
                it.add_marker(
                    pytest.mark.xfail(reason=why, strict=False, raises=DocumentedDeviation)
                )
            else:  # strict: an xfail that passes fails the run
                it.add_marker(pytest.mark.xfail(reason=why, run=entry.mode == "xfail", strict=True))

    _select_ids(config, items, sorted(seen_ids))


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
        m = it.get_closest_marker("conformance_id")
        if m is not None and not any(fnmatch.fnmatchcase(m.args[0], p) for p in patterns):
            drop.append(it)
        else:
            keep.append(it)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


SLOW_SKIP = "slow: run with -m slow or --conformance-profile=stress"


def _slow_selected(state: _State) -> bool:
    return state.profile == "stress" or "slow" in (state.config.getoption("markexpr") or "")


def _is_suite_module(mod) -> bool:
    f = getattr(mod, "__file__", None)
    return bool(f) and Path(f).parent == PACKAGE_DIR and Path(f).name.startswith("test_")


def _collected_whole_suite(items) -> bool:
    collected = {Path(it.module.__file__).name for it in items if getattr(it, "module", None)}
    suite = {p.name for p in PACKAGE_DIR.glob("test_*.py")}
    return suite <= collected


# --------------------------------------------------------------------------- matches
_MATCHES = pytest.StashKey[tuple]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """An xfail entry with ``matches``: a failure every leaf of which matches a named
    deviation becomes DocumentedDeviation (the one exception its xfail accepts); any other
    failure propagates unchanged and fails the run."""
    try:
        if item.get_closest_marker("conformance_id") is None:
            return (yield)
        with shrink_limit(_state(item.config).shrink):
            return (yield)
    except BaseException as exc:  # pytest.fail() raises a BaseException too
        matches = item.stash.get(_MATCHES, None)
        if matches is None or isinstance(
            exc, (pytest.skip.Exception, KeyboardInterrupt, SystemExit)
        ):
            raise
        if unmatched_failures(exc, matches):
            names = ", ".join(dev for dev, _ in matches)
            exc.add_note(f"conformance: undocumented failure (the manifest names only {names})")
            raise
        names = ", ".join(matched_deviations(exc, matches))
        raise DocumentedDeviation(f"ended on documented deviation(s): {names}") from exc


# --------------------------------------------------------------------------- flaky
_CALL_FAILED = pytest.StashKey[bool]()
_FLAKY_RUNS = pytest.StashKey[int]()


def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    """A manifest's ``flaky`` entry: run the test ``runs`` times in this one item, each run
    with fresh fixtures, and report one call that passes and records ``failed/runs``."""
    runs = item.stash.get(_FLAKY_RUNS, None)
    if runs is None:
        return None
    from _pytest.runner import runtestprotocol

    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    failures: list[str] = []
    reports: list = []
    spent = 0.0
    for i in range(runs):
        item.stash[_CALL_FAILED] = False
        # nextitem=None between runs: tear everything down so the next run starts fresh.
        reports = runtestprotocol(item, nextitem=nextitem if i == runs - 1 else None, log=False)
        spent += sum(r.duration for r in reports)
        failed = [r for r in reports if r.failed]
        if failed:
            failures.append(f"run {i + 1}/{runs} ({failed[0].when}):\n{failed[0].longreprtext}")
    from _pytest.reports import TestReport

    final = []
    for r in reports:
        if r.failed:
            r.outcome, r.longrepr = "passed", None
        final.append(r)
    if not any(r.when == "call" for r in final):  # the last run failed in setup
        first = final[0]
        final.insert(
            1, TestReport(item.nodeid, item.location, first.keywords, "passed", None, "call")
        )
    for r in final:
        if r.when == "call" and not r.skipped:
            r.duration = spent - sum(x.duration for x in final if x is not r)  # every run's time
            r.user_properties = [
                *item.user_properties,
                ("conformance_flaky", [len(failures), runs]),
            ]
            for text in failures:
                r.sections.append(("flaky failure", text))
        item.ihook.pytest_runtest_logreport(report=r)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


# --------------------------------------------------------------------------- fixtures


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    # call.excinfo, not report.failed: a test that failed under a manifest's xfail
    # is reported as skipped, yet its traceback holds its locals all the same.
    if report.when == "call" and (
        report.failed
        or (call.excinfo is not None and not call.excinfo.errisinstance(pytest.skip.Exception))
    ):
        item.stash[_CALL_FAILED] = True
    return report


@pytest.fixture
def conformance_profile(request) -> str:
    return _state(request.config).profile


@pytest.fixture
def device_kind(request) -> str:
    return _state(request.config).device_kind


@pytest.fixture
def adapter(impl: LoadedImpl):
    """The adapter object of the implementation under test."""
    return impl.adapter


@pytest.fixture
def hyp_settings(request, impl: LoadedImpl):
    """``hyp_settings(heavy=False)`` -> hypothesis settings of the selected profile for this impl."""
    from .profiles import settings_for

    state = _state(request.config)
    return lambda heavy=False, shuffle=False: settings_for(
        state.profile, impl.name, heavy=heavy, shuffle=shuffle, shrink=state.shrink
    )


@pytest.fixture
def make_store(request, impl: LoadedImpl, tmp_path):
    """``make_store(**kw) -> StoreHarness``; every store is closed and checked at teardown.

    Teardown checks: the device ledger back at its baseline, spill_dir empty,
    no threads or file descriptors left behind.
    """
    from .harness import LeakGuard, StoreHarness

    kind = _state(request.config).device_kind
    guard = LeakGuard()
    made: list[StoreHarness] = []

    def factory(**kw) -> StoreHarness:
        h = StoreHarness(impl.adapter, kind, tmp_path, **kw)
        made.append(h)
        return h

    yield factory
    # After a failed test its traceback still holds the test's locals (values,
    # proxies), so cleanup checks would only repeat the failure as an error.
    check = not request.node.stash.get(_CALL_FAILED, False)
    errors = []
    for h in made:
        try:
            h.close(check=check)
        except AssertionError as exc:
            errors.append(str(exc))
    made.clear()
    if errors:
        pytest.fail("store cleanup: " + "; ".join(errors), pytrace=False)
    if check:
        guard.check()


@pytest.fixture
def harness(make_store):
    """A store with the default limits (``LIMIT`` device bytes, no host limit)."""
    return make_store()


@pytest.fixture
def record_detail(request):
    """``record_detail(text)``: a short measured figure shown in the report's cell."""

    def record(text: str) -> None:
        request.node.user_properties.append(("conformance_detail", str(text)))

    return record


_CLUSTERS = pytest.StashKey[dict]()


def _shared_cluster(request, impl: LoadedImpl, device_kind, tmp_path_factory, **kw):
    """One cluster per implementation, settings and process, started on first use. A test
    that failed or left anything behind gets the next test a fresh cluster: each test
    judges its own shuffles, not its predecessors' leftovers (clause 14.11 has its own IDs)."""
    from .shuffle_harness import ShuffleCluster

    clusters = request.config.stash.setdefault(_CLUSTERS, {})
    key = (impl.name, tuple(sorted(kw.items())))
    cluster = clusters.get(key)
    if cluster is None:
        spill = tmp_path_factory.mktemp(f"shuffle-{impl.name}")
        cluster = clusters[key] = ShuffleCluster(impl.adapter, device_kind, spill, **kw)
    yield cluster
    if request.node.stash.get(_CALL_FAILED, False) or cluster.settled(timeout=5.0) is not None:
        clusters.pop(key).close()


@pytest.fixture
def shuffle_cluster(request, impl: LoadedImpl, device_kind, tmp_path_factory):
    """The implementation's shared cluster: 2 workers, the default budget (8 MiB)."""
    yield from _shared_cluster(request, impl, device_kind, tmp_path_factory)


@pytest.fixture
def tight_cluster(request, impl: LoadedImpl, device_kind, tmp_path_factory):
    """A shared cluster of 2 workers with a 1 MiB budget and 2 MiB of host each."""
    yield from _shared_cluster(
        request, impl, device_kind, tmp_path_factory, device_limit=2**20, host_limit=2 * 2**20
    )


@pytest.fixture
def make_shuffle_cluster(impl: LoadedImpl, device_kind, tmp_path):
    """``make_shuffle_cluster(**kw) -> ShuffleCluster``: a fresh cluster for this test."""
    from .shuffle_harness import ShuffleCluster

    made = []

    def factory(**kw):
        made.append(ShuffleCluster(impl.adapter, device_kind, tmp_path / f"c{len(made)}", **kw))
        return made[-1]

    yield factory
    for c in made:
        c.close()


# --------------------------------------------------------------------------- report
class _Recorder:
    """Collects results; on an xdist controller it sees every worker's reports."""

    def __init__(self, state: _State) -> None:
        self.state = state

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props = dict(report.user_properties)
        if "conformance_id" in props:
            self.state.results.add(report, props)


def _commit() -> tuple[str | None, bool]:
    """The project's commit and whether tracked files differ from it; (None, False) when the
    suite does not run from its own git checkout."""
    from .gitinfo import checkout

    return checkout(PACKAGE_DIR.parent)


def _finish_meta(state: _State) -> None:
    if state.commit is None:
        state.commit = _commit()
    commit, dirty = state.commit
    state.results.meta = {
        "date": state.started,
        "commit": commit,
        "dirty": dirty,
        "spec": "conformance/SPEC.md",
        "suite_version": SUITE_VERSION,
        "spec_version": SPEC_VERSION,
        "protocol_version": PROTOCOL_VERSION,
        "profile": state.profile,
        "device": state.device_kind,
        "python": platform.python_version(),
        "implementations": [
            {
                "name": li.name,
                "version": str(li.adapter.version),
                "spec": li.spec,
                "capabilities": sorted(li.capabilities),
            }
            for li in state.impls or []
        ],
    }


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    state = _state(config)
    if state is None or hasattr(config, "workerinput") or not state.results.items:
        return
    _finish_meta(state)
    order = [f"{li.name}@{state.device_kind}" for li in state.impls or []]
    cols = state.results.columns
    cols.sort(key=lambda c: order.index(c) if c in order else len(order))
    terminalreporter.section("conformance report")
    # Links as the user's folder sees them: relative under it, else the installed file's path.
    terminalreporter.write_line(
        state.results.markdown(base=config.invocation_params.dir, within=True)
    )
    out = config.getoption("conformance_report")
    if out:
        for path in state.results.write(out):
            terminalreporter.write_line(f"conformance report written to {path}")


def pytest_sessionfinish(session: pytest.Session, exitstatus) -> None:
    for cluster in session.config.stash.get(_CLUSTERS, {}).values():
        cluster.close()
    session.config.stash[_CLUSTERS] = {}
    state = _state(session.config)
    if state is None or hasattr(session.config, "workerinput"):
        return
    out = session.config.getoption("conformance_report")
    if (
        out and state.results.items
    ):  # also written when the terminal summary is off (-q -p no:terminal)
        _finish_meta(state)
        state.results.write(out)
