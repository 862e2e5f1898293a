"""Fixtures for the Table tests: a fresh sim device that must end empty. The exact Arrow
comparison lives in ``table_asserts`` (a uniquely named module: ``from conftest import``
picks whichever conftest was imported last when several test folders run together)."""

from __future__ import annotations

import gc

import pytest

from reference_impl import Table
from reference_impl.device import SimDevice


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    setattr(item, f"_table_report_{report.when}", report)
    return report


@pytest.fixture
def dev(request):
    """A fresh 64 MiB sim device; a passing test must leave nothing on its ledger."""
    device = SimDevice("64 MiB")
    yield device
    gc.collect()
    call = getattr(request.node, "_table_report_call", None)
    if call is None or not call.passed:
        return
    held: set[int] = set()  # other fixtures' values are still alive here
    for value in request.node.funcargs.values():
        if isinstance(value, Table) and value.device is device:
            held.update(aid for aid, _ in value.allocations())
        elif device.is_device_array(value):
            held.add(device.allocation_of(value)[0])
    leaked = {a: n for a, n in device.live_allocations().items() if a not in held}
    if leaked:
        pytest.fail(f"the test left {sum(leaked.values()):,} bytes on the device ledger")
