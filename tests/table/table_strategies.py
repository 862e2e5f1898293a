"""Hypothesis strategies: Arrow tables of every supported type, with nulls, chunks and
slices (an offset into the buffers)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import strategies as st

UNITS = ("s", "ms", "us", "ns")
INTS = {f"{k}{b}": (getattr(np, f"{k}{b}"),) for k in ("int", "uint") for b in (8, 16, 32, 64)}


def _int_range(dtype) -> st.SearchStrategy[int]:
    info = np.iinfo(dtype)
    return st.integers(int(info.min), int(info.max))


def value_strategy(type_: pa.DataType) -> st.SearchStrategy:
    if pa.types.is_boolean(type_):
        return st.booleans()
    if pa.types.is_integer(type_):
        return _int_range(type_.to_pandas_dtype())
    if pa.types.is_float32(type_):
        return st.floats(width=32)
    if pa.types.is_float64(type_):
        return st.floats()
    if pa.types.is_timestamp(type_) or pa.types.is_duration(type_):
        return st.integers(-(2**62), 2**62)
    if pa.types.is_binary(type_) or pa.types.is_large_binary(type_):
        return st.binary(max_size=6)  # NUL and bytes that are no UTF-8 included
    return st.text(max_size=6)  # empty and non-ASCII strings included


ALL_TYPES = (
    [pa.bool_(), pa.float32(), pa.float64(), pa.string(), pa.large_string()]
    + [pa.binary(), pa.large_binary()]
    + [getattr(pa, n)() for n in INTS]
    + [pa.timestamp(u) for u in UNITS]
    + [pa.timestamp("us", tz="Europe/Paris")]
    + [pa.duration(u) for u in UNITS]
)


def _build(type_: pa.DataType, values: list) -> pa.Array:
    if pa.types.is_timestamp(type_) or pa.types.is_duration(type_):
        mask = np.array([v is None for v in values], dtype=bool)
        ints = np.array([0 if v is None else v for v in values], dtype=np.int64)
        return pa.array(ints, type=pa.int64(), mask=mask).view(type_)
    return pa.array(values, type=type_)


@st.composite
def arrays(draw, type_: pa.DataType, n: int) -> pa.ChunkedArray:
    """``n`` values (some null) of ``type_``, split in 1-3 chunks, maybe sliced."""
    pad = draw(st.integers(0, 9))  # extra rows sliced away: a nonzero offset
    values = draw(st.lists(st.none() | value_strategy(type_), min_size=n + pad, max_size=n + pad))
    arr = _build(type_, values).slice(pad)
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=2)))
    bounds = [0, *cuts, n]
    pieces = [arr.slice(a, b - a) for a, b in zip(bounds, bounds[1:], strict=False)]
    return pa.chunked_array(pieces, type_)


@st.composite
def tables(draw, types=ALL_TYPES, max_rows: int = 20, max_cols: int = 4) -> pa.Table:
    n = draw(st.integers(0, max_rows))
    chosen = draw(st.lists(st.sampled_from(types), min_size=1, max_size=max_cols))
    cols = {f"c{i}": draw(arrays(t, n)) for i, t in enumerate(chosen)}
    nullable = draw(st.lists(st.booleans(), min_size=len(cols), max_size=len(cols)))
    fields = [
        pa.field(name, col.type, nullable=nl or col.null_count > 0)
        for (name, col), nl in zip(cols.items(), nullable, strict=True)
    ]
    return pa.table(list(cols.values()), schema=pa.schema(fields))
