"""Documented deviations at run time: a manifest's ``matches`` entry turns only the failures
it names into its xfail, and a ``flaky`` entry runs its test several times in one item."""

from __future__ import annotations

import pytest

from .manifests import DocumentedDeviation, matched_deviations, unmatched_failures
from .shrink import limit as shrink_limit
from .state import run_state

MATCHES = pytest.StashKey[tuple]()
FLAKY_RUNS = pytest.StashKey[int]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """An xfail entry with ``matches``: a failure every leaf of which matches a named
    deviation becomes DocumentedDeviation (the one exception its xfail accepts); any other
    failure propagates unchanged and fails the run."""
    try:
        if item.get_closest_marker("conformance_id") is None:
            return (yield)
        with shrink_limit(run_state(item.config).shrink):
            return (yield)
    except BaseException as exc:  # pytest.fail() raises a BaseException too
        matches = item.stash.get(MATCHES, None)
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


def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    """A manifest's ``flaky`` entry: run the test ``runs`` times in this one item, each run
    on a fresh copy of the item (fresh fixtures), and report one call that passes and records
    ``failed/runs``."""
    runs = item.stash.get(FLAKY_RUNS, None)
    if runs is None:
        return None
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    failures: list[str] = []
    reports: list[pytest.TestReport] = []
    spent = 0.0
    for i in range(runs):
        # nextitem=None between runs: tear everything down so the next run starts fresh.
        reports = _run_once(item, nextitem if i == runs - 1 else None)
        spent += sum(r.duration for r in reports)
        failed = [r for r in reports if r.failed]
        if failed:
            failures.append(f"run {i + 1}/{runs} ({failed[0].when}):\n{failed[0].longreprtext}")
    for r in _as_passed(item, reports):
        if r.when == "call" and not r.skipped:
            r.duration = spent - sum(x.duration for x in reports if x is not r)  # every run's
            r.user_properties = [*item.user_properties, ("conformance_flaky", [len(failures), runs])]
            r.sections.extend(("flaky failure", text) for text in failures)
        item.ihook.pytest_runtest_logreport(report=r)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def _fresh_copy(item: pytest.Item) -> pytest.Function:
    """``item`` again, through the public node constructor: its own request and fixtures."""
    copy = pytest.Function.from_parent(
        item.parent,
        name=item.name,
        callspec=getattr(item, "callspec", None),
        callobj=item.obj,
        originalname=item.originalname,
    )
    copy.user_properties = list(item.user_properties)
    return copy


def _run_once(item: pytest.Item, nextitem: pytest.Item | None) -> list[pytest.TestReport]:
    """Setup, call and teardown of a fresh copy through the public hooks, without logging."""
    run = _fresh_copy(item)
    hooks = run.ihook
    reports = [_call_and_report(run, "setup", lambda: hooks.pytest_runtest_setup(item=run))]
    if reports[0].passed:
        reports.append(_call_and_report(run, "call", lambda: hooks.pytest_runtest_call(item=run)))
    teardown = lambda: hooks.pytest_runtest_teardown(item=run, nextitem=nextitem)  # noqa: E731
    reports.append(_call_and_report(run, "teardown", teardown))
    return reports


def _call_and_report(item: pytest.Item, when: str, fn) -> pytest.TestReport:
    reraise = (pytest.exit.Exception, KeyboardInterrupt)
    call = pytest.CallInfo.from_call(fn, when=when, reraise=reraise)
    return item.ihook.pytest_runtest_makereport(item=item, call=call)


def _as_passed(item: pytest.Item, reports: list[pytest.TestReport]) -> list[pytest.TestReport]:
    """The last run's reports with every failure turned into a pass, and a passing call
    where the last run failed in setup."""
    final = []
    for r in reports:
        if r.failed:
            r.outcome, r.longrepr = "passed", None
        final.append(r)
    if not any(r.when == "call" for r in final):
        first = final[0]
        call = pytest.TestReport(
            item.nodeid, item.location, first.keywords, "passed", None, "call"
        )
        final.insert(1, call)
    return final

