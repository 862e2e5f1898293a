"""Hash-partition a Table by key columns with the Numba kernels.

``partition_ids`` and ``partition_table`` use ``reference_impl.kernels`` and
its hash specification (``reference_impl/kernels/README.md``, with worked
examples): null keys hash to the spec's fixed null value, -0.0 and every NaN
hash like 0.0 and one NaN, and a string key hashes its bytes only (a
splitmix64 chain over 8-byte little-endian words, length first), so where it
sits in its chars buffer and int32 against int64 offsets never matter.

Every buffer is scattered once, stably, into one contiguous partition-ordered
buffer: values, validity masks, and for a string column its offsets and its
chars (one pass each). The output tables are zero-copy views of those
buffers. A string column's view keeps the whole shared chars buffer and
offsets that are not rebased (partition ``i`` starts where ``i - 1`` ended),
exactly like a sliced Arrow array; ``Column``/``Table`` treat such offsets
like any slice (``to_arrow``, ``equals``, ``take``, ``concat`` and
spilling read only ``chars[offsets[0]:offsets[-1]]``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reference_impl import kernels

from . import devops
from .column import Column
from .errors import ColumnNotFoundError
from .table import Table

MAX_PARTITIONS = 2**31 - 1


def _check(table: Table, on: str | Sequence[str], npartitions: Any) -> list[str]:
    """Key names, checked with the partition count before anything is allocated."""
    if not isinstance(table, Table):
        raise TypeError(f"expected a Table, got {type(table).__name__}")
    keys = [on] if isinstance(on, str) else list(on)
    if not keys:
        raise ValueError("partition needs at least one key column")
    missing = [k for k in keys if k not in table.column_names]
    if missing:
        raise ColumnNotFoundError(missing, table.column_names)
    if len(set(keys)) != len(keys):
        raise ValueError(f"key columns repeat in {keys!r}")
    if isinstance(npartitions, bool) or not isinstance(npartitions, int):
        raise TypeError(f"npartitions must be an int, got {type(npartitions).__name__}")
    if not 1 <= npartitions <= MAX_PARTITIONS:
        raise ValueError(f"npartitions must be between 1 and {MAX_PARTITIONS}, got {npartitions}")
    return keys


def _kernel_column(col: Column) -> Any:
    """What the kernels take for ``col``: its values, or ``Strings`` (offsets that
    need not start at 0, as a sliced column has, index the whole chars buffer)."""
    return kernels.Strings(col.offsets, col.data) if col.is_varlen else col.data


def partition_ids(
    table: Table, on: str | Sequence[str], npartitions: int, *, backend: str = "auto"
) -> Any:
    """int32 partition id of every row (a device array), per the kernels' hash spec.

    ``backend="cuda"`` on a sim device runs the CUDA kernels (under the simulator).
    """
    keys = _check(table, on, npartitions)
    cols = [table.column(k) for k in keys]
    return kernels.partition_ids(
        table.device,
        {k: _kernel_column(c) for k, c in zip(keys, cols, strict=True)},
        npartitions,
        valid=[c.valid for c in cols],
        backend=backend,
    )


def partition_table(
    table: Table, on: str | Sequence[str], npartitions: int, *, backend: str = "auto"
) -> list[Table]:
    """``npartitions`` tables (empty ones included): row ``i`` goes to
    ``partition_ids(...)[i]``, rows keep their order within a partition, and
    every output column is a view of one contiguous buffer per input buffer.

    Each column is scattered once: the keys as kernel keys (they come back
    first), every other column and every validity mask as payload.
    """
    result = _scatter(table, on, npartitions, backend)
    counts = [int(x) for x in result.counts.tolist()]
    return [
        _table_of(table, result, views, rows)
        for views, rows in zip(result.split(), counts, strict=True)
    ]


def partition_grouped(
    table: Table, on: str | Sequence[str], npartitions: int, *, backend: str = "auto"
) -> tuple[Table, list[int]]:
    """``(grouped, offsets)``: the rows of ``partition_table``'s outputs back to back in one
    Table, partition ``i`` at rows ``offsets[i]:offsets[i + 1]``. One buffer per column,
    so a caller copying it to host makes one copy per column, not one per partition."""
    result = _scatter(table, on, npartitions, backend)
    offsets = [int(x) for x in result.offsets.tolist()]
    return _table_of(table, result, result.columns, offsets[-1]), offsets


def _scatter(table: Table, on: str | Sequence[str], npartitions: int, backend: str) -> Any:
    keys = _check(table, on, npartitions)
    device = table.device
    key_cols = [table.column(k) for k in keys]
    payload: dict[str, Any] = {}
    for name, col in zip(table.column_names, table.columns, strict=True):
        if name not in keys:
            payload[f"data:{name}"] = _kernel_column(col)
        if col.valid is not None:
            payload[f"valid:{name}"] = col.valid
    result = kernels.partition(
        device,
        {f"data:{k}": _kernel_column(c) for k, c in zip(keys, key_cols, strict=True)},
        payload,
        npartitions,
        valid=[c.valid for c in key_cols],
        backend=backend,
    )
    return result


def _table_of(table: Table, result: Any, views: list[Any], rows: int) -> Table:
    """``views`` (the scattered buffers of ``result``, or slices of them) as a Table
    shaped like ``table``."""
    device = table.device
    where = {label: i for i, label in enumerate(result.names)}
    cols = {}
    for name, col in zip(table.column_names, table.columns, strict=True):
        data = views[where[f"data:{name}"]]
        valid = views[where[f"valid:{name}"]] if col.valid is not None else None
        if col.is_varlen:  # Strings(offsets[start:stop + 1], the whole chars buffer)
            cols[name] = Column.trusted(device, col.type, data.chars, valid, data.offsets, col.nullable)
        else:
            cols[name] = Column.trusted(device, col.type, data, valid, None, col.nullable)
    return Table.trusted(device, cols, rows, table.metadata)


def partition_by_destination(
    table: Table, column: str, npartitions: int, *, keep: bool = True
) -> tuple[Table, list[int]]:
    """``partition_grouped``'s ``(grouped, offsets)`` where ``column`` already holds each
    row's output (what dask computes for a hash shuffle, ``set_index`` and
    ``sort_values``), so no key is hashed: row order is kept within an output. With
    ``keep=False`` the grouped Table lacks ``column``: every row of output ``i`` holds ``i``
    there, which whoever builds output ``i`` can restore without moving it.

    ``column`` must be integers without nulls in ``[0, npartitions)``; else a ValueError
    names the column, a bad value and its row (the kernels' range check), before anything
    is allocated.

    The rows go through ``kernels.partition_by_ids`` (the kernels' count, scan and
    scatter, CPU or CUDA twin by the device): every column, ``column`` itself included,
    and every validity mask is scattered once as payload, like ``partition_grouped``'s."""
    _check(table, [column], npartitions)
    col = table.column(column)
    if col.is_varlen or col.data.dtype.kind not in "iu":
        raise TypeError(f"destination column {column!r} must hold integers, not {col.type}")
    device = table.device
    xp = devops.namespace(device)
    if col.valid is not None and not bool(xp.all(devops.readable(device, col.valid))):
        raise ValueError(f"destination column {column!r} has nulls")
    if not keep:
        table = table.select([name for name in table.column_names if name != column])
    payload: dict[str, Any] = {}
    for name, c in zip(table.column_names, table.columns, strict=True):
        payload[f"data:{name}"] = _kernel_column(c)
        if c.valid is not None:
            payload[f"valid:{name}"] = c.valid
    result = kernels.partition_by_ids(
        device, col.data, payload, npartitions, label=f"destination column {column!r}"
    )
    offsets = [int(x) for x in result.offsets.tolist()]
    return _table_of(table, result, result.columns, offsets[-1]), offsets
