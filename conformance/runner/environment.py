"""The machine's failures, not the implementation's: a judged test that fails because the
environment did (``conformance.EnvironmentFailure``: a nanny that never brought a killed worker
back) runs once more on a fresh copy of the item, and its report says so.

The rerun's verdict is the cell's; the first attempt's failure goes into the junit properties
(``conformance_environment_rerun``) and the report's note, so an environment that fails often
is seen, never counted against the implementation and never silently green.
"""

from __future__ import annotations

import pytest
from _pytest.runner import runtestprotocol  # what pytest-rerunfailures builds on too

from .. import EnvironmentFailure
from .deviations import FLAKY_RUNS, run_once
from .report import ENVIRONMENT_RERUN


def environment_failure(exc: BaseException | None) -> EnvironmentFailure | None:
    """The EnvironmentFailure anywhere in ``exc``'s chain or groups (hypothesis wraps a
    failure in its own errors, and a machine's in an ExceptionGroup), else None."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, EnvironmentFailure):
            return e
        todo += [e.__cause__, e.__context__, *getattr(e, "exceptions", ())]
    return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if report.failed and call.excinfo is not None:
        found = environment_failure(call.excinfo.value)
        if found is not None:
            report.conformance_environment = f"{type(found).__name__}: {found}"
    return report


def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    """A judged test (not a manifest's flaky one, which runs itself several times) whose
    first attempt failed on the environment gets one rerun."""
    if item.get_closest_marker("conformance_id") is None or FLAKY_RUNS in item.stash:
        return None
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    reports = runtestprotocol(item, log=False, nextitem=nextitem)
    why = next((r.conformance_environment for r in reports if _environmental(r)), None)
    if why is not None:
        reports = run_once(item, nextitem)
        for r in reports:  # junit reads a test's properties from its teardown report
            r.user_properties = [*r.user_properties, (ENVIRONMENT_RERUN, why)]
    for r in reports:
        item.ihook.pytest_runtest_logreport(report=r)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def _environmental(report: pytest.TestReport) -> bool:
    return report.failed and getattr(report, "conformance_environment", None) is not None
