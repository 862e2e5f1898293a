"""An input table's layout (its chunks and their offsets), kept across the hop to a worker.

The suite's inputs are slices of larger tables, and some are chunked (``tables``,
``rich_tables``): what users hand a shuffle. distributed's Arrow serializer writes an IPC
stream, which keeps the chunks but compacts every array to offset 0, so without this no
implementation would ever be handed an array at an offset, and the offset arithmetic every
Arrow reader needs (validity bits that start mid-byte, string offsets that do not start at 0)
would go untested. :func:`layout_of` describes the layout on the client, the table travels
compact, and :func:`with_layout` builds it again on the worker: every chunk of every column
at an offset of the same kind (zero or not; the same remainder modulo 8, which is what bitmap
readers get wrong), padded with at most :data:`MAX_PAD` rows of the chunk itself (an empty chunk stays at
offset 0) so that a
large input does not travel twice.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

MAX_PAD = 64 + 7  # rows: offsets up to this are kept; larger ones become 64 + offset % 8

Layout = tuple[tuple[tuple[int, int], ...], ...]  # per column, per chunk: (length, offset)


def layout_of(table: pa.Table) -> Layout:
    """Each column's chunks as ``(length, offset)``."""
    return tuple(tuple((len(c), c.offset) for c in col.chunks) for col in table.columns)


def is_compact(layout: Layout) -> bool:
    """One chunk a column (or none), each at offset 0: what IPC gives back anyway."""
    return all(len(col) <= 1 and all(off == 0 for _, off in col) for col in layout)


def _pad(offset: int) -> int:
    return offset if offset <= MAX_PAD else 64 + offset % 8


def _at_offset(array: pa.Array, offset: int) -> pa.Array:
    """``array``'s values at ``_pad(offset)`` in a new buffer, padded with its own rows
    (repeated when it is shorter than the pad; an empty chunk stays at 0)."""
    pad = _pad(offset) if len(array) else 0
    if pad == 0:
        return array
    filler = pa.concat_arrays([array] * -(-pad // len(array))).slice(0, pad)
    return pa.concat_arrays([filler, array]).slice(pad)


def with_layout(table: pa.Table, layout: Layout) -> pa.Table:
    """``table`` (compact, as IPC returns it) with ``layout``'s chunks and offsets; the
    same rows, schema and metadata. A layout that does not match ``table`` raises."""
    if is_compact(layout):
        return table
    if len(layout) != table.num_columns:
        raise ValueError(f"layout of {len(layout)} columns for a table of {table.num_columns}")
    columns = []
    for name, col, chunks in zip(table.column_names, table.columns, layout, strict=True):
        whole = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
        if sum(n for n, _ in chunks) != len(whole):
            raise ValueError(f"layout of column {name!r} covers other rows than the table's")
        pieces, start = [], 0
        for n, offset in chunks:
            pieces.append(_at_offset(whole.slice(start, n), offset))
            start += n
        columns.append(pa.chunked_array(pieces, type=col.type))
    return pa.Table.from_arrays(columns, schema=table.schema)


def ship(table: Any) -> Any:
    """What the conveyor sends: ``(table, layout)`` for a ``pyarrow.Table``, else the value."""
    if isinstance(table, pa.Table):
        return table, layout_of(table)
    return table, None


def land(shipped: tuple[Any, Layout | None]) -> Any:
    """The table :func:`ship` sent, with its layout again (after a compacting hop)."""
    table, layout = shipped
    return table if layout is None else with_layout(table, layout)
