"""An exact Arrow comparison for the Table tests (bit for bit on floats, at any nesting
depth, so NaN and -0.0 count)."""

from __future__ import annotations

import pyarrow as pa

_FLOAT_BITS = {pa.float16(): pa.int16(), pa.float32(): pa.int32(), pa.float64(): pa.int64()}


def _bits_type(type_: pa.DataType) -> pa.DataType:
    """``type_`` with every float, at any depth, as the ints of its width."""
    if type_ in _FLOAT_BITS:
        return _FLOAT_BITS[type_]

    def child(f: pa.Field) -> pa.Field:
        return f.with_type(_bits_type(f.type))

    if pa.types.is_struct(type_):
        return pa.struct([child(f) for f in type_])
    if pa.types.is_map(type_):
        return pa.map_(child(type_.key_field), child(type_.item_field), type_.keys_sorted)
    if pa.types.is_fixed_size_list(type_):
        return pa.list_(child(type_.value_field), type_.list_size)
    if pa.types.is_large_list(type_):
        return pa.large_list(child(type_.value_field))
    if pa.types.is_list(type_):
        return pa.list_(child(type_.value_field))
    return type_


def _bits(arr: pa.Array) -> pa.Array:
    """Floats (nested ones too) as their bits; a dictionary as its values (its own
    dictionary is not promised)."""
    if pa.types.is_dictionary(arr.type):
        return _bits(arr.cast(arr.type.value_type))
    bits = _bits_type(arr.type)
    return arr if bits == arr.type else arr.view(bits)


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
