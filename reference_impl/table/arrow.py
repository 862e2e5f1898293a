"""Arrow interchange on pyarrow's buffers: device columns in, Arrow out.

Every column is read straight from its Arrow buffers with numpy (bitmaps
unpacked with ``np.unpackbits``, offsets rebased with one subtraction): no
Python loop runs over rows, and each buffer crosses to the device in one copy.
All columns are read and checked on the host before the first device
allocation, so an unsupported type leaves the ledger untouched. It builds columns,
never a Table (``table.py`` imports this module, not the reverse).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from .column import Column
from .dtypes import check_arrow_type, is_varlen, offsets_dtype, storage_dtype
from .logical import carry, restore
from .ranges import unpack_bits

if TYPE_CHECKING:
    from .table import Table


def _fixed(buf: pa.Buffer | None, dtype: np.dtype, offset: int, n: int) -> np.ndarray:
    if n == 0:
        return np.empty(0, dtype)
    return np.frombuffer(buf, dtype, count=n, offset=offset * dtype.itemsize)


def _host_column(arr: pa.Array) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """``(data or chars, valid, offsets)`` host arrays of one Arrow array."""
    type_, n, off = arr.type, len(arr), arr.offset
    bufs = arr.buffers()
    valid = unpack_bits(bufs[0], off, n) if arr.null_count else None
    if is_varlen(type_):
        odt = offsets_dtype(type_)
        offsets = _fixed(bufs[1], odt, off, n + 1) if n else np.zeros(1, odt)
        start, stop = int(offsets[0]), int(offsets[-1])
        chars = (
            np.frombuffer(bufs[2], np.uint8, count=stop - start, offset=start)
            if stop > start
            else np.empty(0, np.uint8)
        )
        if start:
            offsets = offsets - odt.type(start)
        return chars, valid, offsets
    if pa.types.is_boolean(type_):
        return unpack_bits(bufs[1], off, n), valid, None
    return _fixed(bufs[1], storage_dtype(type_), off, n), valid, None


def _one_array(col: pa.ChunkedArray | pa.Array) -> pa.Array:
    if isinstance(col, pa.ChunkedArray):
        if col.num_chunks == 1:
            return col.chunk(0)
        if col.num_chunks == 0:
            return pa.array([], type=col.type)
        return col.combine_chunks()
    return col


def columns_from_arrow(
    data: pa.Table | pa.RecordBatch, device: Any
) -> tuple[dict[str, Column], int, dict[bytes, bytes] | None]:
    """Copy ``data`` onto ``device``: ``(columns, num_rows, metadata)``, exact values,
    nulls, schema and metadata."""
    if not isinstance(data, (pa.Table, pa.RecordBatch)):
        raise TypeError(
            f"from_arrow expects a pyarrow Table or RecordBatch, got {type(data).__name__}"
        )
    data = carry(data)  # dictionaries, decimals, dates, times, float16 as the types held
    schema = data.schema
    names = list(schema.names)
    seen: set[str] = set()
    for field in schema:
        if field.name in seen:
            raise ValueError(f"duplicate column name {field.name!r}; a Table's names are unique")
        seen.add(field.name)
        check_arrow_type(field.name, field.type)
    host = [_host_column(_one_array(data.column(i))) for i in range(len(names))]
    columns: dict[str, Column] = {}  # first device allocation from here on
    for field, (values, valid, offsets) in zip(schema, host, strict=True):
        columns[field.name] = Column.trusted(
            device,
            field.type,
            device.asarray(values),
            None if valid is None else device.asarray(valid),
            None if offsets is None else device.asarray(offsets),
            field.nullable,
        )
    metadata = dict(schema.metadata) if schema.metadata else None
    return columns, data.num_rows, metadata


def _to_arrow_array(col: Column, n: int) -> pa.Array:
    device = col.device
    validity, null_count = None, 0
    if col.valid is not None:
        mask = device.to_host(col.valid)
        null_count = n - int(np.count_nonzero(mask))
        if null_count:
            validity = pa.py_buffer(np.packbits(mask, bitorder="little"))
    if col.offsets is not None:
        start, stop = col.chars_range()
        chars = device.to_host(col.data[start:stop])
        offsets = device.to_host(col.offsets)
        if start:
            offsets -= offsets.dtype.type(start)
        buffers = [validity, pa.py_buffer(offsets), pa.py_buffer(chars)]
    else:
        values = device.to_host(col.data)
        if values.dtype == np.bool_:
            values = np.packbits(values, bitorder="little")
        elif values.dtype.kind in "mM":
            values = values.view(np.int64)  # the buffer protocol has no datetime format
        buffers = [validity, pa.py_buffer(values)]
    return pa.Array.from_buffers(col.type, n, buffers, null_count=null_count)


def to_arrow(table: Table) -> pa.Table:
    """Copy ``table`` to a host Arrow table (d2h), with its schema and metadata, its
    logical types restored."""
    n = table.num_rows
    arrays = [_to_arrow_array(c, n) for c in table.columns]
    return restore(pa.Table.from_arrays(arrays, schema=table.schema))
