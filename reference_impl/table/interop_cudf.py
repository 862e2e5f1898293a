"""cuDF interchange; cuDF itself is imported only when used (an optional GPU package).

Fixed-width columns cross zero-copy through ``__cuda_array_interface__``:
the Table's CuPy array and the cuDF column share device memory (cuDF keeps
the owner alive). cuDF's validity bitmaps are unpacked to (or packed from)
this library's bool masks on the device, and string columns go through Arrow
(a host round trip) because cuDF's string-column internals change between
releases.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from .arrow import columns_from_arrow
from .column import Column
from .dtypes import arrow_type_of, check_arrow_type

if TYPE_CHECKING:
    from .table import Table


def _import_cudf() -> Any:
    try:
        import cudf
    except ImportError as exc:
        raise ImportError(
            "Table.from_cudf/to_cudf need cuDF (RAPIDS), which is not installed"
        ) from exc
    return cudf


def _check_cuda(device: Any) -> None:
    if getattr(device, "kind", None) != "cuda":
        raise TypeError(f"cuDF columns live on a CUDA device, not on {device!r}")


def columns_from_cudf(df: Any, device: Any) -> tuple[dict[str, Column], int]:
    """A cuDF DataFrame's columns on ``device`` (a CudaDevice): ``(columns, num_rows)``."""
    cudf = _import_cudf()
    _check_cuda(device)
    if not isinstance(df, cudf.DataFrame):
        raise TypeError(f"from_cudf expects a cudf.DataFrame, got {type(df).__name__}")
    names = [str(n) for n in df.columns]
    if len(set(names)) != len(names):
        raise ValueError(f"column names repeat in {names!r}")
    types = {}
    for name in df.columns:  # all checked before anything is allocated
        series = df[name]
        if series.dtype == object or str(series.dtype) in ("str", "string"):
            types[name] = check_arrow_type(str(name), pa.string())
        else:
            types[name] = arrow_type_of(str(name), series.dtype)
    import cupy

    cols: dict[str, Column] = {}
    for name in df.columns:
        series, type_ = df[name], types[name]
        if pa.types.is_string(type_):
            host = series.to_arrow()
            sub, _, _ = columns_from_arrow(pa.table({str(name): host}), device)
            cols[str(name)] = sub[str(name)]
            continue
        n = len(series)
        data = (
            cupy.asarray(series.data).view(series.dtype)[:n] if n else device.empty(0, series.dtype)
        )
        valid = None
        if series.null_count:
            bits = cupy.asarray(series.nullmask).view(np.uint8)
            valid = cupy.unpackbits(bits, bitorder="little")[:n].astype(np.bool_)
        cols[str(name)] = Column.trusted(device, type_, data, valid, None, True)
    return cols, len(df)


def to_cudf(table: Table) -> Any:
    """The Table as a cudf.DataFrame: fixed-width values zero-copy, strings through Arrow."""
    cudf = _import_cudf()
    _check_cuda(table.device)
    import cupy

    out = {}
    for name, col in zip(table.column_names, table.columns, strict=True):
        if col.is_varlen or pa.types.is_timestamp(col.type) and col.type.tz is not None:
            out[name] = cudf.Series.from_arrow(table.select([name]).to_arrow().column(0))
            continue
        series = cudf.Series(col.data)
        if col.valid is not None and col.null_count:
            mask = cupy.packbits(col.valid, bitorder="little")
            series = series.set_mask(mask)
        out[name] = series
    return cudf.DataFrame(out)
