"""Logical types: Arrow types a Table holds as another of its types, restored on the way out.

A Table's columns keep one small physical type set (:mod:`.dtypes`). A few more Arrow types
travel exactly as one of those, so a user's table need not be converted first:

===============================================  ==============================
Arrow type                                       held as
===============================================  ==============================
dictionary<values=V, indices=I>, unordered        V (decoded; carried again if V is)
decimal32/64/128/256(p, s)                        utf8, every digit
date32, time32(s/ms)                              int32, their own integers
date64, time64(us/ns)                             int64, their own integers
halffloat (float16)                               float32 (every value, NaN and -0.0 kept)
null (all rows null: an all-None column)         int8, every row null
list, large_list, fixed_size_list, struct, map    large_binary, one canonical byte string
of any of these, nested to any depth              per row (:mod:`.nested`)
===============================================  ==============================

The logical schema rides in the Table's schema metadata under :data:`KEY`, which slicing,
concatenation, comms, spilling and the shuffle all keep, so :func:`restore` in ``to_arrow``
gives back the exact types (a dictionary's own dictionary is rebuilt from the values present,
in the order they first appear, with the original index type). An ordered dictionary is
refused, naming the column: its order lives in a dictionary the outputs rebuild; so is a
dictionary inside a nested type, or of nested values (naming the field's path).
"""

from __future__ import annotations

import base64

import pyarrow as pa
import pyarrow.compute as pc

from . import nested
from .dtypes import check_arrow_type
from .nested_decode import restore as restore_nested
from .nested_encode import hold as hold_nested
from .scalars import scalar_held

KEY = b"reference_impl:logical-schema"  # base64 of the IPC-serialized logical fields


def held_as(name: str | None, type_: pa.DataType) -> pa.DataType | None:
    """The Table type a column of logical ``type_`` is held as, or None when ``type_`` is
    held as itself or not at all (``dtypes.check_arrow_type`` decides); a TypeError naming
    the column for the logical types that cannot travel."""
    label = f"column {name!r}" if name is not None else "column"
    if pa.types.is_dictionary(type_):
        if type_.ordered:
            raise TypeError(
                f"{label} is an ordered dictionary ({type_}): its order lives in a dictionary "
                "each output rebuilds from the values it holds; cast it to its values first"
            )
        if nested.is_nested(type_.value_type):
            raise TypeError(
                f"{label} is a dictionary of {type_.value_type}: a dictionary of nested values "
                "cannot be held; cast it to its values first"
            )
        return held_as(name, type_.value_type) or type_.value_type
    if nested.is_nested(type_):
        nested.check(name, type_)
        return pa.large_binary()
    if pa.types.is_null(type_):
        return pa.int8()
    return scalar_held(type_)


def check_type(name: str | None, type_: pa.DataType) -> pa.DataType:
    """The type a Table holds a column of logical ``type_`` as; a TypeError naming the column
    when it holds it neither as itself nor as another."""
    return check_arrow_type(name, held_as(name, type_) or type_)


def carry(data: pa.Table | pa.RecordBatch) -> pa.Table | pa.RecordBatch:
    """``data`` with each logical-type column cast to what it is held as, and the logical
    fields recorded under :data:`KEY`; ``data`` itself when it has none."""
    logical: list[pa.Field] = []
    columns, fields = [], []
    for i, field in enumerate(data.schema):
        held = held_as(field.name, field.type)
        column = data.column(i)
        if held is not None:
            logical.append(field)
            column = hold(column, field.type)
            field = field.with_type(held)
        columns.append(column)
        fields.append(field)
    if not logical:
        return data
    metadata = dict(data.schema.metadata or {})
    metadata[KEY] = base64.b64encode(pa.schema(logical).serialize().to_pybytes())
    schema = pa.schema(fields, metadata=metadata)
    if isinstance(data, pa.RecordBatch):
        return pa.RecordBatch.from_arrays(columns, schema=schema)
    return pa.Table.from_arrays(columns, schema=schema)


def hold(column: pa.Array | pa.ChunkedArray, type_: pa.DataType) -> pa.Array | pa.ChunkedArray:
    """``column`` of logical ``type_`` as the type it is held as (``held_as`` checked it)."""
    if nested.is_nested(type_):
        return hold_nested(column)
    return column.cast(held_as(None, type_))


def logical_fields(schema: pa.Schema) -> dict[str, pa.Field]:
    """The logical fields a held ``schema`` records, by name (empty when none)."""
    raw = (schema.metadata or {}).get(KEY)
    if raw is None:
        return {}
    fields = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(raw)))
    return {f.name: f for f in fields}


def logical_schema(schema: pa.Schema) -> pa.Schema:
    """What ``restore`` gives for a table of the held ``schema``: its logical types, without
    :data:`KEY`."""
    return _with_logical(schema, logical_fields(schema))


def _with_logical(schema: pa.Schema, logical: dict[str, pa.Field]) -> pa.Schema:
    if not logical:
        return schema
    fields = [logical.get(f.name, f) for f in schema]
    metadata = {k: v for k, v in schema.metadata.items() if k != KEY}
    return pa.schema(fields, metadata=metadata or None)


def restore_column(column: pa.ChunkedArray, type_: pa.DataType) -> pa.ChunkedArray | pa.Array:
    """A column held as ``held_as(type_)`` back as logical ``type_``."""
    if nested.is_nested(type_):
        return restore_nested(column, type_)
    if pa.types.is_null(type_):  # Arrow casts nothing to null; every row was null anyway
        return pa.nulls(len(column))
    if not pa.types.is_dictionary(type_):
        return column.cast(type_)
    values = restore_column(column, type_.value_type)
    values = values.combine_chunks() if values.num_chunks else pa.array([], type_.value_type)
    encoded = pc.dictionary_encode(values)
    return pa.DictionaryArray.from_arrays(
        encoded.indices.cast(type_.index_type), encoded.dictionary
    )


def restore(table: pa.Table) -> pa.Table:
    """``table`` (held types) with its logical types back and :data:`KEY` dropped."""
    logical = logical_fields(table.schema)  # decoded once
    if not logical:
        return table
    schema = _with_logical(table.schema, logical)
    columns = [
        restore_column(table.column(i), schema.field(i).type)
        if f.name in logical
        else table.column(i)
        for i, f in enumerate(table.schema)
    ]
    return pa.Table.from_arrays(columns, schema=schema)
