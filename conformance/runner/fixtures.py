"""The suite's fixtures: the implementation under test, stores and clusters that are checked
and closed at teardown, and hypothesis settings of the selected profile."""

from __future__ import annotations

import pytest

from .loader import LoadedImpl
from .state import CALL_FAILED, run_state


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    # call.excinfo, not report.failed: a test that failed under a manifest's xfail
    # is reported as skipped, yet its traceback holds its locals all the same.
    if report.when == "call" and (
        report.failed
        or (call.excinfo is not None and not call.excinfo.errisinstance(pytest.skip.Exception))
    ):
        item.stash[CALL_FAILED] = True
    return report


@pytest.fixture
def impl(request) -> LoadedImpl:
    """The implementation under test (every conformance test is parametrized over them)."""
    return request.param


@pytest.fixture
def conformance_profile(request) -> str:
    return run_state(request.config).profile


@pytest.fixture
def device_kind(request) -> str:
    return run_state(request.config).device_kind


@pytest.fixture
def adapter(impl: LoadedImpl):
    """The adapter object of the implementation under test."""
    return impl.adapter


@pytest.fixture
def hyp_settings(request, impl: LoadedImpl):
    """``hyp_settings(heavy=False)`` -> hypothesis settings of the selected profile for this impl."""
    from .profiles import settings_for

    state = run_state(request.config)
    return lambda heavy=False, shuffle=False: settings_for(
        state.profile, impl.name, heavy=heavy, shuffle=shuffle, shrink=state.shrink
    )


@pytest.fixture
def make_store(request, impl: LoadedImpl, tmp_path):
    """``make_store(**kw) -> StoreHarness``; every store is closed and checked at teardown.

    Teardown checks: the device ledger back at its baseline, spill_dir empty,
    no threads or file descriptors left behind.
    """
    from ..store.harness import LeakGuard, StoreHarness

    kind = run_state(request.config).device_kind
    guard = LeakGuard()
    made: list[StoreHarness] = []

    def factory(**kw) -> StoreHarness:
        h = StoreHarness(impl.adapter, kind, tmp_path, **kw)
        made.append(h)
        return h

    yield factory
    # After a failed test its traceback still holds the test's locals (values,
    # proxies), so cleanup checks would only repeat the failure as an error.
    check = not request.node.stash.get(CALL_FAILED, False)
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


CLUSTERS = pytest.StashKey[dict]()


def _shared_cluster(request, impl: LoadedImpl, device_kind, tmp_path_factory, **kw):
    """One cluster per implementation, settings and process, started on first use. A test
    that failed or left anything behind gets the next test a fresh cluster: each test
    judges its own shuffles, not its predecessors' leftovers (clause 14.11 has its own IDs)."""
    from ..shuffle.harness import ShuffleCluster

    clusters = request.config.stash.setdefault(CLUSTERS, {})
    key = (impl.name, tuple(sorted(kw.items())))
    cluster = clusters.get(key)
    if cluster is None:
        spill = tmp_path_factory.mktemp(f"shuffle-{impl.name}")
        cluster = clusters[key] = ShuffleCluster(impl.adapter, device_kind, spill, **kw)
    yield cluster
    if request.node.stash.get(CALL_FAILED, False) or cluster.settled(timeout=5.0) is not None:
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
    from ..shuffle.harness import ShuffleCluster

    made = []

    def factory(**kw):
        made.append(ShuffleCluster(impl.adapter, device_kind, tmp_path / f"c{len(made)}", **kw))
        return made[-1]

    yield factory
    for c in made:
        c.close()


def pytest_sessionfinish(session: pytest.Session, exitstatus) -> None:
    for cluster in session.config.stash.get(CLUSTERS, {}).values():
        cluster.close()
    session.config.stash[CLUSTERS] = {}
