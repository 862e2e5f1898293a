"""Shared fixtures for the partition-kernel tests."""

from __future__ import annotations

import gc

import pytest

from reference_impl.device import SimDevice


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Keep each phase's report on the item, so ``dev`` knows whether the test body passed."""
    report = yield
    setattr(item, f"_kernels_report_{report.when}", report)
    return report


@pytest.fixture
def dev(request):
    """A fresh sim device; the test fails if it leaves bytes on the ledger.

    Checked at teardown, after ``gc.collect()``, only when the test body passed: a failing
    body's traceback keeps its arrays alive, and the leak report would only add noise.
    """
    device = SimDevice("256 MiB")
    yield device
    gc.collect()
    call = getattr(request.node, "_kernels_report_call", None)
    if call is None or not call.passed:
        return
    held = _allocations_held(device, [v for v in request.node.funcargs.values() if v is not device])
    live = device.live_allocations()
    leaked = {a: n for a, n in live.items() if a not in held}
    if leaked:
        pytest.fail(
            f"the test left {sum(leaked.values()):,} bytes on the device ledger in "
            f"{len(leaked)} allocation(s) no fixture holds "
            f"(largest: {sorted(leaked.values(), reverse=True)[:8]} bytes)",
            pytrace=False,
        )
    assert device.bytes_in_use() == sum(live.values()), "ledger and live allocations disagree"


def _allocations_held(device, values) -> set[int]:
    """Allocation ids of this device's arrays inside other fixtures' values (alive until
    pytest drops ``item.funcargs`` after teardown): those are not leaks."""
    ids: set[int] = set()
    stack = list(values)
    while stack:
        v = stack.pop()
        if device.is_device_array(v):
            ids.add(device.allocation_of(v)[0])
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
    return ids
