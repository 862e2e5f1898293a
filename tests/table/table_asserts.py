"""An exact Arrow comparison for the Table tests (bit for bit on floats, so NaN and -0.0
count)."""

from __future__ import annotations

import pyarrow as pa


def _bits(arr: pa.Array) -> pa.Array:
    """Floats as their bits; a dictionary as its values (its own dictionary is not promised)."""
    if pa.types.is_dictionary(arr.type):
        return _bits(arr.cast(arr.type.value_type))
    if pa.types.is_float16(arr.type):
        return arr.view(pa.int16())
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
