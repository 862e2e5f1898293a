"""Fixtures and helpers for the Table tests: a fresh sim device that must end empty,
and an exact Arrow comparison (bit for bit on floats, so NaN and -0.0 count)."""

from __future__ import annotations

import gc

import pyarrow as pa
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


def _bits(arr: pa.Array) -> pa.Array:
    if pa.types.is_float64(arr.type):
        return arr.view(pa.int64())
    if pa.types.is_float32(arr.type):
        return arr.view(pa.int32())
    return arr


def assert_identical(result: pa.Table, expected: pa.Table) -> None:
    """Same schema (metadata and nullability too), nulls, and values; floats by bits."""
    assert result.schema.equals(expected.schema, check_metadata=True), (
        f"{result.schema} != {expected.schema}"
    )
    assert result.num_rows == expected.num_rows
    for name in expected.column_names:
        r = result.column(name).combine_chunks()
        e = expected.column(name).combine_chunks()
        assert r.is_null().equals(e.is_null()), name
        assert _bits(r).equals(_bits(e)), f"{name}: {r} != {e}"
