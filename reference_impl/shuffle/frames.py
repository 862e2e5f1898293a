"""Frames in and out of a shuffle inside a dask graph, with ``meta`` as the truth: every
input partition is cast to the Arrow schema of ``meta`` before it becomes a Table (so all
inputs agree), and every output is cast back to ``meta``'s dtypes, or to their common type
with the values' where meta's cannot hold them (nulls in an int column), as P2P does. A
partition that cannot be cast is an error naming the partition, the column and both
types, never a silently different result. Dtypes a Table cannot hold but a carrier can
(:mod:`.carriers`: categoricals, float16, date32, decimals) travel as their carriers."""

from __future__ import annotations

from typing import Any

import distributed
import numpy as np
import pandas as pd
import pyarrow as pa

from .carriers import CarryError, carrier_for
from .worker_device import worker_device


def held_type(type_: pa.DataType) -> pa.DataType:
    """The type a column of Arrow type ``type_`` is held as: an object column with no
    sample (Arrow's ``null``, what an empty ``meta`` gives) holds strings, as in practice
    it does. The one place this rule lives."""
    return pa.string() if pa.types.is_null(type_) else type_


def arrow_schema_of(meta: Any, *, index: bool = True) -> pa.Schema:
    """The Arrow schema ``meta``'s partitions travel as: its index as a column (unless
    ``index`` is False: dask's ``ignore_index``, the outputs get a fresh RangeIndex, as
    dask's own shuffles give them), each carried dtype as its carrier's type, each
    sampleless object column as strings."""
    schema = pa.Schema.from_pandas(_carried(meta, meta, "meta"), preserve_index=index)
    for i, field in enumerate(schema):
        schema = schema.set(i, field.with_type(held_type(field.type)))
    return schema


def _is_cudf(frame: Any) -> bool:
    return type(frame).__module__.startswith("cudf")


def _labelled(meta: Any) -> list[tuple[str | None, str, Any, bool]]:
    """``meta``'s columns and index levels as (column name, how errors name it, values,
    whether a carrier may move it: not a level of a MultiIndex, which ``_carried`` leaves)."""
    out = [(str(name), f"column {name!r}", meta[name], True) for name in meta.columns]
    if meta.index.nlevels == 1:
        name = meta.index.name
        out.append((None, "index" if name is None else f"index {name!r}", meta.index, True))
    else:  # dask holds no MultiIndex itself, but a from_delayed meta can have one
        for i, name in enumerate(meta.index.names):
            label = f"index level {i}" if name is None else f"index level {name!r}"
            out.append((None, label, meta.index.get_level_values(i), False))
    return out


def check_frame_schema(meta: Any, *, carriers: bool = False) -> None:
    """Every column and the index of a dask DataFrame's ``_meta`` must be one a Table
    holds or, with ``carriers`` (the lazy path), one a carrier moves; checked on the
    client from ``meta`` alone, before anything is submitted."""
    from reference_impl.table.logical import check_type

    carriers = carriers and not _is_cudf(meta)
    names = [str(c) for c in meta.columns]
    clashing = sorted({n for n in names if names.count(n) > 1})
    if clashing:
        raise ValueError(
            f"column labels {[c for c in meta.columns if str(c) in clashing]!r} are one name "
            "once made strings (Arrow names fields by str(label)): rename one of them"
        )
    for name, label, values, carriable in _labelled(meta):
        carrier = carrier_for(values.dtype) if carriers else None
        if carrier is not None and not carriable:
            raise TypeError(
                f"{label} has dtype {values.dtype}, which the shuffle carries only as a "
                "column or a single index: reset_index() first"
            )
        if carrier is not None:
            reason = carrier.refuse(values.dtype)
            if reason:
                raise TypeError(f"{label} has dtype {values.dtype}, which the shuffle does not support: {reason}")
            continue
        try:
            type_ = pa.Schema.from_pandas(values.to_frame(name="_"), preserve_index=False).field(0).type
        except (pa.ArrowException, TypeError, ValueError) as exc:
            raise TypeError(f"{label} has dtype {values.dtype}, which Arrow cannot hold: {exc}") from exc
        try:
            check_type(name, held_type(type_))
        except TypeError as exc:
            raise TypeError(
                f"{label} has dtype {values.dtype}, which the shuffle does not support: {exc}"
            ) from exc


def _carried(df: Any, meta: Any, partition: int | str) -> Any:
    """``df`` with each column (and the index) whose meta dtype has a carrier carried."""
    if _is_cudf(meta):
        return df
    out = df
    for name in meta.columns:
        carrier = carrier_for(meta[name].dtype)
        if carrier is not None and name in df.columns:
            if out is df:
                out = df.copy(deep=False)
            out[name] = _carry(carrier, df[name], meta[name].dtype, f"column {name!r}", partition)
    carrier = carrier_for(meta.index.dtype)
    if carrier is not None:
        out = df.copy(deep=False) if out is df else out
        values = pd.Series(df.index, copy=False)
        out.index = pd.Index(_carry(carrier, values, meta.index.dtype, "the index", partition), name=df.index.name)
    return out


def _carry(carrier: Any, values: pd.Series, dtype: Any, what: str, partition: int | str) -> Any:
    try:
        return carrier.carry(values, dtype)
    except CarryError as exc:
        where = "meta" if partition == "meta" else f"input partition {partition}"
        raise TypeError(
            f"{where}: {what} has dtype {values.dtype}, which cannot be carried as meta's "
            f"{dtype}: {exc}"
        ) from None


def _has_index(schema: pa.Schema) -> bool:
    """Whether partitions of ``schema`` carry their index as a column."""
    return bool((schema.pandas_metadata or {}).get("index_columns"))


def _on_a_worker(what: str) -> distributed.Worker:
    try:
        return distributed.get_worker()
    except ValueError:
        raise RuntimeError(
            f"the device shuffle runs on a dask.distributed cluster; {what} ran outside a "
            "worker (dask's local scheduler?): compute with a distributed Client"
        ) from None


def to_table(df: Any, meta: Any, schema: pa.Schema, partition: int) -> Any:
    """Task: input partition ``partition`` as a Table on this worker's device, its
    carried dtypes (``meta``'s) as their carriers."""
    from reference_impl.table import Table

    rows = to_transfer_input(df, meta, schema, partition)
    if isinstance(rows, pa.Table):
        return Table.from_arrow(rows, worker_device(_on_a_worker(f"input partition {partition}")))
    return rows


def to_transfer_input(df: Any, meta: Any, schema: pa.Schema, partition: int) -> Any:
    """Task: input partition ``partition`` as a transfer takes it. A cuDF frame is on the
    device already: a Table. A pandas frame becomes Arrow in host memory, with ``schema``
    and its carried dtypes as their carriers; the transfer moves it to the device a chunk
    at a time, so a whole input is never on the device outside the store."""
    worker = _on_a_worker(f"input partition {partition}")
    if _is_cudf(df):
        from reference_impl.table import Table

        return Table.from_cudf(df, worker_device(worker))
    extra = [str(c) for c in df.columns if str(c) not in schema.names]
    if extra:
        raise TypeError(f"input partition {partition} has columns meta lacks: {', '.join(extra)}")
    df = _carried(df, meta, partition)
    if not all(isinstance(c, str) for c in df.columns):  # Arrow names fields by str(label)
        df = df.set_axis([str(c) for c in df.columns], axis=1)
    try:
        return pa.Table.from_pandas(df, schema=schema, preserve_index=_has_index(schema))
    except (pa.ArrowException, KeyError, TypeError, ValueError) as exc:
        raise TypeError(_cast_error(df, schema, partition, exc)) from None


def _cast_error(df: Any, schema: pa.Schema, partition: int, exc: Exception) -> str:
    """Which column of ``df`` fails to become its field of ``schema``, and why."""
    frame = df.reset_index() if df.index.name in schema.names else df
    for field in schema:
        if field.name not in frame.columns:
            if field.name.startswith("__index_level_"):
                continue
            return f"input partition {partition} has no column {field.name!r}, which meta has"
        try:
            pa.array(frame[field.name], type=field.type, from_pandas=True)
        except (pa.ArrowException, TypeError, ValueError) as col_exc:
            return (
                f"input partition {partition}: column {field.name!r} has dtype "
                f"{frame[field.name].dtype}, which cannot be cast to meta's {field.type}: {col_exc}"
                + _nested_hint(frame[field.name])
            )
    return f"input partition {partition} does not match meta's schema: {exc}"


def _nested_hint(values: pd.Series) -> str:
    """For an object column whose values are lists or dicts: meta (empty, so only
    ``object``) cannot say their type, which every input must share; its dtype can."""
    from reference_impl.table.nested import is_nested

    try:
        type_ = pa.array(values, from_pandas=True).type
    except (pa.ArrowException, TypeError, ValueError):
        return ""
    if not is_nested(type_):
        return ""
    return (
        f"; its values are {type_}, which an object column's meta cannot name: give the "
        f"column that dtype (pd.ArrowDtype) to shuffle them"
    )


def _reconciled(values: pd.Series, want: Any, name: Any) -> pd.Series:
    """An output column as meta's dtype ``want`` or, where its values cannot be held by it
    (nulls in an int64 column, which come back float64), as the common type of both, the
    rule P2P reconciles every column by (``distributed/shuffle/_arrow.py``,
    ``convert_shards``: ``find_common_type([actual, dtype])``)."""
    from pandas.core.dtypes.cast import find_common_type

    try:
        if values.hasnans and isinstance(want, np.dtype) and want.kind in "biu":
            # a numpy bool or int cannot hold a missing value: object -> bool would turn
            # None into False without an error (an outer merge's unmatched rows, dask's meta
            # saying bool), so the missing values decide the type, as P2P's rule does
            raise TypeError(f"{values.isna().sum()} missing values")
        return values.astype(want)
    except (TypeError, ValueError) as first:
        common = find_common_type([values.dtype, want])
        try:
            return values.astype(common)
        except (TypeError, ValueError):
            raise TypeError(
                f"output column {name!r} came back as {values.dtype} and cannot be cast to "
                f"meta's {want}: {first}"
            ) from None


def _arrow_backed(meta: Any, schema: pa.Schema) -> Any:
    """``to_pandas``'s types_mapper: an Arrow type that only columns meta holds as
    ``pd.ArrowDtype`` have stays Arrow (the column wraps the output's buffers), instead of
    becoming numpy and being cast back: two more copies of the output in host memory, with
    ``dtype_backend="pyarrow"``. A type some numpy column has too converts as before."""
    dtype_of = {str(name): meta[name].dtype for name in meta.columns}
    arrow, other = set(), set()
    for field in schema:
        dtype = dtype_of.get(field.name, meta.index.dtype)  # the rest: the index
        (arrow if isinstance(dtype, pd.ArrowDtype) else other).add(field.type)
    wanted = arrow - other
    return (lambda type_: pd.ArrowDtype(type_) if type_ in wanted else None) if wanted else None


def to_frame(table: Any, meta: Any, constants: dict[str, int] | None = None) -> Any:
    """Task: an output Table as a frame with ``meta``'s columns, index and dtypes (the
    carried ones restored from their carriers); each of ``constants`` a column of one int64
    value, at meta's place for it (a column the shuffle did not carry)."""
    # each constant column: its place in meta, and its values
    filled = [
        ([str(c) for c in meta.columns].index(name), name, np.full(table.num_rows, value, np.int64))
        for name, value in (constants or {}).items()
    ]
    if _is_cudf(meta):
        out = table.to_cudf()
        for at, name, values in filled:
            out.insert(at, name, values)
        return out
    arrow = table.to_arrow()
    # The caller handed the Table over: it goes before the frame is built, so the output is
    # held twice (device and host), not three times, at the unpack's peak.
    del table
    for at, name, values in filled:
        arrow = arrow.add_column(at, name, pa.array(values))
    out = arrow.to_pandas(types_mapper=_arrow_backed(meta, arrow.schema))
    if list(out.columns) != list(meta.columns) and list(out.columns) == [str(c) for c in meta.columns]:
        out.columns = meta.columns  # labels that are not strings (ints, tuples...) as meta has them
    for name in meta.columns:
        want = meta[name].dtype
        carrier = carrier_for(want)
        if carrier is not None:
            out[name] = carrier.restore(arrow.column(str(name)), want)
        elif out[name].dtype != want:
            out[name] = _reconciled(out[name], want, name)
    if not _has_index(arrow.schema):
        return out  # ignore_index: a fresh RangeIndex
    carrier = carrier_for(meta.index.dtype)
    if carrier is not None:
        field = arrow.schema.pandas_metadata["index_columns"][0]
        out.index = pd.Index(carrier.restore(arrow.column(field), meta.index.dtype))
    elif out.index.dtype != meta.index.dtype:
        out.index = out.index.astype(meta.index.dtype)
    out.index.name = meta.index.name
    return out
