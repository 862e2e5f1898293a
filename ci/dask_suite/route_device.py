"""pytest plugin: run dask's and distributed's own shuffle tests, unmodified, through the
device shuffle.

Loaded with ``-p ci.dask_suite.route_device`` (see ``ci/dask_suite.sh``). Routed, every
dask-expr ``Shuffle`` is lowered as ``method="device"`` whatever method the test names
(``tasks``, ``disk``, ``p2p`` or the config's), and so is every ``Merge`` that would lower
to P2P's own hash join (``HashJoinP2P``). The clusters, by ``--device-clusters``:

- ``session`` (dask's tests, which run on local schedulers): one two-worker
  :class:`LocalDeviceCluster` on loopback with a default Client for the whole session,
  and every computation the test sends to a local scheduler (``scheduler="sync"``,
  dask's ``assert_eq`` default, ``"threads"``...) goes to it;
- ``tests`` (distributed's tests, which start their own): ``device_preload`` is put in
  the schedulers' and workers' preloads, so every cluster a test starts has the device
  shuffle, and each worker its own device.

A scheduler plugin counts, per test, the device shuffles whose graphs reached the
scheduler, so a pass is told apart from a pass that never used the shuffle (a cluster
started in subprocesses is not counted). Each test's outcome, reach count and first
error line go to ``--device-report`` (JSON lines).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

LOCAL_SCHEDULERS = {"sync", "synchronous", "single-threaded", "threads", "threading", "processes", "multiprocessing"}


def _pickling_allowed(get: Any) -> Any:
    """``get`` with expressions allowed to be pickled while it submits: a Client always
    sends the expression it computes pickled (under any shuffle method). dask's own check
    that the graph holds no expression (``pickle.dumps(obj.dask)``) runs outside this call."""

    def get_pickled(dsk: Any, keys: Any, **kwargs: Any) -> Any:
        import dask

        with dask.config.set({"dask-expr-no-serialize": False}):
            return get(dsk, keys, **kwargs)

    return get_pickled


class _Routing:
    def __init__(self, report: Path, route: bool, clusters: str) -> None:
        self.report = report
        self.route = route
        self.clusters = clusters
        self._undo: list[Any] = []
        self.seen: Any = None  # in_dask.DeviceShufflesSeen, on the cluster's scheduler
        self.started = False

    def start(self) -> None:
        self.started = True
        if not self.route:
            return
        self._route_lowering()
        if self.clusters == "tests":
            from ci.dask_suite.device_preload import SEEN

            self.seen = SEEN
            return
        import dask.base
        import distributed

        from reference_impl.shuffle import LocalDeviceCluster, in_dask

        self._dir = tempfile.TemporaryDirectory(prefix="dask-suite-")
        self.cluster = LocalDeviceCluster(
            2, device_capacity="1 GiB", device_memory_limit="256 MiB", memory_limit="1 GiB",
            local_directory=self._dir.name,
        )  # fmt: skip
        self.client = distributed.Client(self.cluster, set_as_default=True)
        in_dask.install(self.client)
        self.seen = in_dask.DeviceShufflesSeen()
        self.cluster.scheduler.add_plugin(self.seen, name=self.seen.name)

        get_scheduler = dask.base.get_scheduler
        client = self.client

        def to_the_cluster(get: Any = None, scheduler: Any = None, collections: Any = None, cls: Any = None) -> Any:
            if dask.config.get("dask-expr-no-serialize", False):
                # dask's assert_eq forbids pickling expressions while it builds the graph, and
                # what it computes then (a set_index's divisions, of a frame that may hold a
                # shuffle) goes to the Client as an expression, pickled.
                return _pickling_allowed(client.get)
            named = scheduler if scheduler is not None else dask.config.get("scheduler", None)
            if get is None and isinstance(named, str) and named.lower() in LOCAL_SCHEDULERS:
                return client.get
            return get_scheduler(get=get, scheduler=scheduler, collections=collections, cls=cls)

        dask.base.get_scheduler = to_the_cluster
        self._undo.append(lambda: setattr(dask.base, "get_scheduler", get_scheduler))

    def _route_lowering(self) -> None:
        from dask.dataframe.dask_expr._merge import Merge
        from dask.dataframe.dask_expr._shuffle import Shuffle
        from dask.utils import get_default_shuffle_method

        from reference_impl.registration import register
        from reference_impl.shuffle import in_dask

        register()
        in_dask.install_lowering()
        lower, merge_lower = Shuffle._lower, Merge._lower  # the first is in_dask's wrapper

        def routed(expr: Any) -> Any:
            if expr.method != in_dask.METHOD:
                expr = expr.substitute_parameters({"method": in_dask.METHOD})
            return lower(expr)

        def merge_routed(expr: Any) -> Any:
            if (expr.shuffle_method or get_default_shuffle_method()) == "p2p":
                expr = expr.substitute_parameters({"shuffle_method": in_dask.METHOD})
            return merge_lower(expr)

        Shuffle._lower, Merge._lower = routed, merge_routed
        self._undo.append(lambda: (setattr(Shuffle, "_lower", lower), setattr(Merge, "_lower", merge_lower)))

    def stop(self) -> None:
        for undo in reversed(self._undo):
            undo()
        if self.route and self.clusters == "session":
            self.client.close()
            self.cluster.close()
            self._dir.cleanup()

    def record(self, record: dict) -> None:
        """One test's record, appended at once: a run cut short keeps what it found."""
        with self.report.open("a") as f:
            f.write(json.dumps(record) + "\n")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--device-report", default=os.environ.get("DASK_SUITE_REPORT", "reports/dask-suite.jsonl"))
    parser.addoption(
        "--device-route", choices=("on", "off"), default="on",
        help="off: record outcomes only, with dask's own shuffles (the baseline)",
    )  # fmt: skip
    parser.addoption(
        "--device-clusters", choices=("session", "tests"), default="session",
        help="session: one LocalDeviceCluster runs every test; tests: the tests start their own, preloaded",
    )  # fmt: skip


def pytest_configure(config: pytest.Config) -> None:
    tests = os.environ.get("DASK_SUITE_TESTS")
    if tests:  # vendored tests of distributed.shuffle (its wheel ships none): import them from there
        import distributed.shuffle

        distributed.shuffle.__path__.append(str(Path(tests) / "distributed" / "shuffle"))
    for marker in ("gpu", "slow", "network", "skip_with_pyarrow_strings", "xfail_with_pyarrow_strings"):
        config.addinivalue_line("markers", f"{marker}: dask's own marker")
    report = Path(config.getoption("--device-report"))
    report.parent.mkdir(parents=True, exist_ok=True)
    if not hasattr(config, "workerinput"):  # not an xdist worker: the run's first process
        report.write_text("")
    route, clusters = config.getoption("--device-route") == "on", config.getoption("--device-clusters")
    if route and clusters == "tests":
        _preload_everywhere()
    config._device_routing = _Routing(report, route, clusters)  # type: ignore[attr-defined]


def _preload_everywhere() -> None:
    """Every scheduler and worker the tests start runs ``device_preload``: set before the
    tests import ``distributed.utils_test``, whose clusters reset the config to what it was
    then, and in the environment, for clusters started in subprocesses."""
    import dask

    preload = ["ci.dask_suite.device_preload"]
    for server in ("scheduler", "worker"):
        dask.config.set({f"distributed.{server}.preload": preload})
        os.environ[f"DASK_DISTRIBUTED__{server.upper()}__PRELOAD"] = repr(preload)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Routed, the tests ``known.txt`` says hang are skipped with its reason: each would only
    burn its timeout (the summary still lists them, as not run)."""
    if config.getoption("--device-route") != "on":
        return
    from ci.dask_suite.summarize import hangs

    for item in items:
        reason = hangs(_name(item))
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=f"known.txt: {reason}"))


def _name(item: pytest.Item) -> str:
    """A test's name from the rootdir (site-packages, or the vendored tests' folder), or,
    run from elsewhere (a test's tmp_path), from its top-level package:
    ``dask/.../test_shuffle.py::test_x``."""
    try:
        path = item.path.relative_to(item.config.rootpath)
    except ValueError:
        root = item.path.parent
        while (root / "__init__.py").exists():
            root = root.parent
        path = item.path.relative_to(root)
    return path.as_posix() + item.nodeid[item.nodeid.index("::"):]


def pytest_sessionfinish(session: pytest.Session) -> None:
    routing = getattr(session.config, "_device_routing", None)
    if routing is not None and routing.started:
        routing.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Any) -> Any:
    routing: _Routing = item.config._device_routing  # type: ignore[attr-defined]
    if not routing.started:  # in the process that runs tests (an xdist worker's, with -n)
        routing.start()
    seen = routing.seen.barriers if routing.seen is not None else []
    before = len(seen)
    record = {"test": _name(item), "outcome": "passed", "reached": 0, "error": ""}
    item._device_record = record  # type: ignore[attr-defined]
    yield
    record["reached"] = len(seen) - before
    routing.record(record)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    outcome = yield
    report = outcome.get_result()
    record = getattr(item, "_device_record", None)
    if record is None or report.passed and report.when != "call":
        return
    if report.skipped:
        wasxfail = getattr(report, "wasxfail", None)
        record["outcome"] = "xfailed" if wasxfail is not None else "skipped"
        record["error"] = wasxfail or (report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr))
    elif report.failed:
        record["outcome"] = "failed" if report.when == "call" else f"error in {report.when}"
        crash = getattr(report.longrepr, "reprcrash", None)
        record["error"] = crash.message.splitlines()[0] if crash is not None else str(report.longrepr).splitlines()[-1]
    elif getattr(report, "wasxfail", None) is not None:
        record["outcome"] = "xpassed"
