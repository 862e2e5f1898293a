"""What a received shard is, and how an output partition is built from shards.

A shard is one input partition's rows for one output partition. Its sizes are
recorded when it arrives (``ShardMeta``), so the output can be allocated once,
at its exact size, before any shard is read back: unpacking then adds the
output plus one shard at a time, not the 5-6x of concat-everything-then-convert.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableSequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from reference_impl.store.proxy import unwrap
from reference_impl.table import Column, Table, devops
from reference_impl.table.dtypes import is_string, offsets_dtype, storage_dtype


@dataclass(frozen=True)
class ShardMeta:
    """Sizes of one shard, read once on arrival (a spilled shard is not read again)."""

    source: tuple[int, int]  # (input index, chunk of that input): the order rows keep
    rows: int
    nbytes: int
    chars: dict[str, int] = field(default_factory=dict)  # string column -> chars in use
    masked: frozenset[str] = frozenset()  # columns with a validity mask


def describe(table: Table, source: tuple[int, int]) -> ShardMeta:
    chars = {}
    for name, col in zip(table.column_names, table.columns, strict=True):
        if col.is_string:
            start, stop = col.chars_range()
            chars[name] = stop - start
    masked = frozenset(
        n for n, c in zip(table.column_names, table.columns, strict=True) if c.valid is not None
    )
    return ShardMeta(tuple(source), table.num_rows, table.nbytes, chars, masked)


def empty_table(schema: pa.Schema, device: Any) -> Table:
    return Table.from_arrow(schema.empty_table(), device)


def _consume(pieces: MutableSequence[tuple[ShardMeta, Any]]) -> Iterator[tuple[ShardMeta, Table]]:
    """Pieces in order, each read back (unspilled) only when its turn comes and
    dropped from ``pieces`` first, so the caller's last reference is the one here."""
    pieces.reverse()
    while pieces:
        meta, obj = pieces.pop()
        table = unwrap(obj)
        del obj
        yield meta, table
        del table


def assemble(
    schema: pa.Schema, pieces: MutableSequence[tuple[ShardMeta, Any]], device: Any
) -> Table:
    """One table with ``pieces``' rows in order, in new buffers of exactly its size.

    ``pieces`` (shard metadata, shard or its proxy) is emptied as it is read, so
    each shard can be freed, or forgotten by the store, as soon as it is copied.
    """
    metas = [m for m, _ in pieces]
    if not metas:
        return empty_table(schema, device)
    rows = sum(m.rows for m in metas)
    out: dict[str, dict[str, Any]] = {}
    for f in schema:
        bufs: dict[str, Any] = {}
        if any(f.name in m.masked for m in metas):
            bufs["valid"] = devops.empty(device, rows, np.bool_)
        if is_string(f.type):
            nchars = sum(m.chars.get(f.name, 0) for m in metas)
            bufs["offsets"] = devops.empty(device, rows + 1, offsets_dtype(f.type))
            bufs["data"] = devops.empty(device, nchars, np.uint8)
            bufs["chars_at"] = 0
        else:
            bufs["data"] = devops.empty(device, rows, storage_dtype(f.type))
        out[f.name] = bufs
    xp = devops.namespace(device)
    row = 0
    for meta, table in _consume(pieces):
        n = meta.rows
        for f in schema:
            col, bufs = table.column(f.name), out[f.name]
            if "valid" in bufs:
                if col.valid is not None:
                    bufs["valid"][row : row + n] = col.valid
                else:
                    bufs["valid"][row : row + n] = True
            if col.offsets is None:
                bufs["data"][row : row + n] = col.data
                continue
            start, stop = col.chars_range()
            at = bufs["chars_at"]
            bufs["data"][at : at + stop - start] = col.data[start:stop]
            odt = bufs["offsets"].dtype
            xp.subtract(col.offsets[:-1], odt.type(start - at), out=bufs["offsets"][row : row + n])
            bufs["chars_at"] = at + stop - start
        row += n
    cols = {}
    for f in schema:
        bufs = out[f.name]
        if "offsets" in bufs:
            bufs["offsets"][rows] = bufs["chars_at"]
        cols[f.name] = Column._trusted(
            device, f.type, bufs["data"], bufs.get("valid"), bufs.get("offsets"), f.nullable
        )
    return Table._trusted(device, cols, rows, dict(schema.metadata) if schema.metadata else None)


def copy_table(table: Table, source: tuple[int, int]) -> tuple[ShardMeta, Table]:
    """A compact copy (own buffers): a kept shard must not pin the whole partitioned input."""
    meta = describe(table, source)
    return meta, assemble(table.schema, [(meta, table)], table.device)
