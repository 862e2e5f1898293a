"""The end-of-run report: every conformance item's result, the terminal table and
``--conformance-report``'s files. On an xdist controller it sees every worker's reports."""

from __future__ import annotations

import platform

import pytest

from .. import SPEC_VERSION, SUITE_VERSION
from ..api import PROTOCOL_VERSION
from .state import SUITE_DIR, RunState, run_state


class Recorder:
    """Collects results (``pytest_runtest_logreport`` is given no config, so a registered
    object holds the run's state)."""

    def __init__(self, state: RunState) -> None:
        self.state = state

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props = dict(report.user_properties)
        if "conformance_id" in props:
            self.state.results.add(report, props)


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    state = run_state(config)
    if state is not None:
        config.pluginmanager.register(Recorder(state), "conformance-recorder")


def failure_prefix(item, failed: list[str] | None = None) -> str | None:
    """``STORE-X [clause 9.6]: ``, what a failure of a conformance test begins with; a
    machine's names the clauses its failing step broke (``failed``), not all it cites."""
    mark = item.get_closest_marker("conformance_id")
    if mark is None:
        return None
    clause = mark.kwargs.get("clause", ())
    clauses = failed or ([clause] if isinstance(clause, str) else list(clause))
    return f"{mark.args[0]} [clause {', '.join(clauses)}]: " if clauses else f"{mark.args[0]}: "


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A failure's first line names its ID and clauses; a machine's failing clauses go to
    the report."""
    report = yield
    crash = getattr(report.longrepr, "reprcrash", None)
    failed = (
        getattr(call.excinfo.value, "conformance_failed_clauses", None) if call.excinfo else None
    )
    if failed and report.when == "call":
        report.user_properties.append(("conformance_failed_clauses", list(failed)))
    prefix = failure_prefix(item, failed) if report.failed and crash is not None else None
    if prefix and not crash.message.startswith(prefix):  # the short summary's line
        crash.message = prefix + crash.message
        report.sections.insert(0, ("conformance", prefix.rstrip(": ")))
    return report


def _commit() -> tuple[str | None, bool]:
    """The project's commit and whether tracked files differ from it; (None, False) when the
    suite does not run from its own git checkout."""
    from .gitinfo import checkout

    return checkout(SUITE_DIR.parent)


def _finish_meta(state: RunState) -> None:
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
    state = run_state(config)
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
    state = run_state(session.config)
    if state is None or hasattr(session.config, "workerinput"):
        return
    out = session.config.getoption("conformance_report")
    if (
        out and state.results.items
    ):  # also written when the terminal summary is off (-q -p no:terminal)
        _finish_meta(state)
        state.results.write(out)
