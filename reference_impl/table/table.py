"""Table: ordered, named, equal-length device columns.

The unit the store proxies and spills, dask sends between workers and the
partition kernels split. Every constructor checks all of its input before it
allocates, so bad input leaves the device ledger as it was.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from . import devops, frames, ops
from .arrow import columns_from_arrow
from .arrow import to_arrow as _to_arrow
from .column import Column
from .errors import ColumnNotFoundError, SchemaMismatchError
from .logical import KEY as LOGICAL_KEY
from .logical import logical_schema


class Table:
    """A device table. Build with :meth:`from_arrow`, :meth:`from_pandas`,
    :meth:`from_cudf` or from :class:`Column` objects."""

    __slots__ = ("_columns", "_device", "_num_rows", "_metadata", "__weakref__")

    def __init__(
        self,
        columns: Mapping[str, Column] | Iterable[tuple[str, Column]],
        *,
        device: Any = None,
        num_rows: int | None = None,
        metadata: Mapping[bytes, bytes] | None = None,
    ) -> None:
        """``device`` and ``num_rows`` are needed only for a table without columns;
        ``metadata`` is the Arrow schema metadata (pandas keeps its index there)."""
        items = list(columns.items() if isinstance(columns, Mapping) else columns)
        cols: dict[str, Column] = {}
        for name, col in items:
            if not isinstance(name, str):
                raise TypeError(f"column names must be str, got {type(name).__name__} {name!r}")
            if name in cols:
                raise ValueError(f"duplicate column name {name!r}")
            if not isinstance(col, Column):
                raise TypeError(
                    f"column {name!r} is a {type(col).__name__}, not a Column; wrap device arrays "
                    "with Column(data, valid, device=...)"
                )
            cols[name] = col
        if cols:
            first = next(iter(cols.values()))
            device = first.device if device is None else device
            lengths = {name: len(c) for name, c in cols.items()}
            for name, col in cols.items():
                if col.device is not device:
                    raise ValueError(
                        f"column {name!r} lives on {devops.device_name(col.device)}, the table on "
                        f"{devops.device_name(device)}; all columns must share one device"
                    )
            if len(set(lengths.values())) > 1:
                shown = ", ".join(f"{n!r}: {k}" for n, k in lengths.items())
                raise ValueError(
                    f"columns have different lengths ({shown}); a table's columns "
                    "must all have the same number of rows"
                )
            rows = next(iter(lengths.values()))
            if num_rows is not None and num_rows != rows:
                raise ValueError(f"num_rows={num_rows} but the columns have {rows} rows")
            num_rows = rows
        elif device is None:
            raise TypeError("a table without columns needs device=")
        self._columns = cols
        self._device = device
        self._num_rows = int(num_rows or 0)
        self._metadata = dict(metadata) if metadata else None

    @classmethod
    def trusted(
        cls,
        device: Any,
        columns: dict[str, Column],
        num_rows: int,
        metadata: dict[bytes, bytes] | None,
    ) -> Table:
        """The fast path: a table over ``columns`` as given, ``num_rows`` rows each.

        Nothing is validated (``Table(...)`` checks lengths, names and devices); for code
        that built the columns itself with :meth:`Column.trusted`."""
        t = cls.__new__(cls)
        t._columns, t._device, t._num_rows, t._metadata = columns, device, num_rows, metadata
        return t

    # --- description ---------------------------------------------------------------
    @property
    def device(self) -> Any:
        return self._device

    @property
    def num_rows(self) -> int:
        return self._num_rows

    def __len__(self) -> int:
        return self._num_rows

    @property
    def num_columns(self) -> int:
        return len(self._columns)

    @property
    def column_names(self) -> list[str]:
        return list(self._columns)

    @property
    def columns(self) -> list[Column]:
        return list(self._columns.values())

    @property
    def metadata(self) -> dict[bytes, bytes] | None:
        return dict(self._metadata) if self._metadata else None

    @property
    def schema(self) -> pa.Schema:
        fields = [pa.field(n, c.type, nullable=c.nullable) for n, c in self._columns.items()]
        return pa.schema(fields, metadata=self._metadata)

    @property
    def nbytes(self) -> int:
        """Device bytes the columns cover (see :attr:`Column.nbytes`); for a freshly
        built table, exactly what the device ledger counts for it."""
        return sum(c.nbytes for c in self._columns.values())

    def allocations(self) -> list[tuple[int, int]]:
        """``(allocation_id, nbytes)`` of each distinct base allocation, once each."""
        seen: dict[int, int] = {}
        for col in self._columns.values():
            for buf in col.buffers():
                aid, nbytes = self._device.allocation_of(buf)
                seen[aid] = nbytes
        return list(seen.items())

    def column(self, name: str) -> Column:
        try:
            return self._columns[name]
        except KeyError:
            raise ColumnNotFoundError([name], self._columns) from None

    __getitem__ = column

    def __repr__(self) -> str:
        cols = ", ".join(f"{n}: {c.type}" for n, c in self._columns.items())
        return (
            f"<Table rows={self._num_rows} [{cols}] nbytes={self.nbytes} "
            f"on {devops.device_name(self._device)}>"
        )

    # --- row and column selection ------------------------------------------------
    def slice(self, start: int = 0, stop: int | None = None) -> Table:
        """Rows ``start:stop`` (Python slice rules, step 1) as zero-copy views."""
        start, stop, _ = slice(start, stop).indices(self._num_rows)
        stop = max(start, stop)
        cols = {n: c.slice(start, stop) for n, c in self._columns.items()}
        return Table.trusted(self._device, cols, stop - start, self._metadata)

    def select(self, names: Sequence[str]) -> Table:
        """The named columns, in the order given (zero-copy)."""
        if isinstance(names, str):
            names = [names]
        missing = [n for n in names if n not in self._columns]
        if missing:
            raise ColumnNotFoundError(missing, self._columns)
        if len(set(names)) != len(names):
            raise ValueError(f"column names repeat in {list(names)!r}")
        cols = {n: self._columns[n] for n in names}
        return Table.trusted(self._device, cols, self._num_rows, self._metadata)

    def take(self, indices: Any) -> Table:
        """Rows ``indices`` (a 1-D integer device array, each in ``[0, num_rows)``),
        gathered into new device buffers."""
        device = self._device
        devops.check_device_array(device, indices, "take indices")
        if indices.dtype.kind not in "iu":
            raise TypeError(f"take indices must be integers, got dtype {indices.dtype}")
        if len(indices):
            xp = devops.namespace(device)
            view = devops.readable(device, indices)
            lo, hi = devops.to_int(xp.min(view)), devops.to_int(xp.max(view))
            if lo < 0 or hi >= self._num_rows:
                bad = lo if lo < 0 else hi
                raise IndexError(
                    f"take index {bad} is out of range for a table of {self._num_rows} rows"
                )
        idx = indices.astype(np.int64, copy=False)
        cols = {n: ops.gather(c, idx) for n, c in self._columns.items()}
        return Table.trusted(device, cols, len(indices), self._metadata)

    # --- comparison and combination ------------------------------------------------
    def _shape(self) -> list[tuple[str, pa.DataType]]:
        """Names and logical types: a date32 column held as int32 is no int32 column."""
        if not self._metadata or LOGICAL_KEY not in self._metadata:
            return [(n, c.type) for n, c in self._columns.items()]
        return [(f.name, f.type) for f in logical_schema(self.schema)]

    def equals(self, other: Table) -> bool:
        """Same column names, types, rows and values; nulls compare equal, NaN equals
        NaN (and, as in Arrow, -0.0 equals 0.0). Metadata and nullability are ignored."""
        if not isinstance(other, Table):
            return False
        if self._shape() != other._shape() or self._num_rows != other._num_rows:
            return False
        return all(
            ops.equals(a, b)
            for a, b in zip(self._columns.values(), other._columns.values(), strict=True)
        )

    @staticmethod
    def concat(tables: Sequence[Table]) -> Table:
        """The rows of ``tables`` one after another, in new device buffers.

        Every table must have the same column names and types (nullability may
        differ); a mismatch raises :class:`SchemaMismatchError` showing both.
        """
        tables = list(tables)
        if not tables:
            raise ValueError("concat needs at least one table")
        for i, t in enumerate(tables):
            if not isinstance(t, Table):
                raise TypeError(f"concat: item {i} is a {type(t).__name__}, not a Table")
        first = tables[0]
        for i, t in enumerate(tables[1:], start=1):
            if t._shape() != first._shape():
                raise SchemaMismatchError(
                    f"cannot concat tables with different schemas: table 0 has "
                    f"{_describe(first)}, table {i} has {_describe(t)}"
                )
            if t._device is not first._device:
                raise ValueError(
                    f"cannot concat tables on different devices: table 0 on "
                    f"{devops.device_name(first._device)}, table {i} on "
                    f"{devops.device_name(t._device)}"
                )
        if len(tables) == 1:
            return first
        cols = {n: ops.concat([t._columns[n] for t in tables]) for n in first._columns}
        rows = sum(t._num_rows for t in tables)
        return Table.trusted(first._device, cols, rows, first._metadata)

    # --- interchange (arrow.py, interop_cudf.py and frames.py build the columns) -------------
    @classmethod
    def from_arrow(cls, data: pa.Table | pa.RecordBatch, device: Any) -> Table:
        """Copy an Arrow table or record batch onto ``device`` (exact round trip)."""
        cols, num_rows, metadata = columns_from_arrow(data, device)
        return cls.trusted(device, cols, num_rows, metadata)

    def to_arrow(self) -> pa.Table:
        """Copy to a host Arrow table (d2h)."""
        return _to_arrow(self)

    @classmethod
    def from_pandas(cls, df: Any, device: Any, *, preserve_index: bool | None = None) -> Table:
        """Through Arrow: ``pa.Table.from_pandas(df, preserve_index=...)``."""
        return cls.from_arrow(pa.Table.from_pandas(df, preserve_index=preserve_index), device)

    def to_pandas(self, **kwargs: Any) -> Any:
        """Through Arrow: ``self.to_arrow().to_pandas(**kwargs)``."""
        return self.to_arrow().to_pandas(**kwargs)

    @classmethod
    def from_cudf(cls, df: Any, device: Any) -> Table:
        """A cuDF DataFrame's columns, zero-copy where cuDF's layout allows it."""
        from .interop_cudf import columns_from_cudf  # cuDF-only code, loaded when used

        cols, num_rows = columns_from_cudf(df, device)
        return cls.trusted(device, cols, num_rows, None)

    def to_cudf(self) -> Any:
        from .interop_cudf import to_cudf

        return to_cudf(self)

    @classmethod
    def _from_frames(
        cls, header: dict[str, Any], frames_: list[Any], device: Any, upload: Any = None
    ) -> Table:
        """Rebuild from :func:`frames.encode`'s ``(header, frames)`` on ``device``."""
        cols, num_rows, metadata = frames.decode_columns(header, frames_, device, upload)
        return cls.trusted(device, cols, num_rows, metadata)

    def __reduce__(self):
        """Host frames (d2h copies) that pickle 5 keeps out of band."""
        return _rebuild_table, frames.encode(self)


def _rebuild_table(header: dict[str, Any], frames_: list[Any]) -> Table:
    """Unpickle onto the device the header names, or this process's own."""
    return Table._from_frames(header, frames_, frames.device_for(header["device"]))


def _describe(t: Table) -> str:
    return "(" + ", ".join(f"{n}: {ty}" for n, ty in t._shape()) + ")"
