"""Frames in and out of a shuffle inside a dask graph, with ``meta`` as the truth: every
input partition is cast to the Arrow schema of ``meta`` before it becomes a Table (so all
inputs agree), and every output is cast back to ``meta``'s dtypes (as P2P does). A
partition that cannot be cast is an error naming the partition, the column and both
types, never a silently different result."""

from __future__ import annotations

from typing import Any

import distributed
import pyarrow as pa


def arrow_schema_of(meta: Any) -> pa.Schema:
    """The Arrow schema of ``meta`` with its index as a column; an object column with no
    sample (Arrow's ``null``) holds strings, as in practice it does."""
    schema = pa.Schema.from_pandas(meta, preserve_index=True)
    for i, field in enumerate(schema):
        if pa.types.is_null(field.type):
            schema = schema.set(i, field.with_type(pa.string()))
    return schema


def _on_a_worker(what: str) -> distributed.Worker:
    try:
        return distributed.get_worker()
    except ValueError:
        raise RuntimeError(
            f"the device shuffle runs on a dask.distributed cluster; {what} ran outside a "
            "worker (dask's local scheduler?): compute with a distributed Client"
        ) from None


def to_table(df: Any, schema: pa.Schema, partition: int) -> Any:
    """Task: input partition ``partition`` as a Table on this worker's device."""
    from reference_impl.device import get_device
    from reference_impl.table import Table

    _on_a_worker(f"input partition {partition}")
    if type(df).__module__.startswith("cudf"):
        return Table.from_cudf(df, get_device("auto"))
    extra = [str(c) for c in df.columns if c not in schema.names]
    if extra:
        raise TypeError(f"input partition {partition} has columns meta lacks: {', '.join(extra)}")
    try:
        arrow = pa.Table.from_pandas(df, schema=schema, preserve_index=True)
    except (pa.ArrowException, KeyError, TypeError, ValueError) as exc:
        raise TypeError(_cast_error(df, schema, partition, exc)) from None
    return Table.from_arrow(arrow, get_device("auto"))


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
            )
    return f"input partition {partition} does not match meta's schema: {exc}"


def to_frame(table: Any, meta: Any) -> Any:
    """Task: an output Table as a frame with ``meta``'s columns, index and dtypes."""
    if type(meta).__module__.startswith("cudf"):
        return table.to_cudf()
    out = table.to_pandas()
    for name in meta.columns:
        want = meta[name].dtype
        if out[name].dtype != want:
            try:
                out[name] = out[name].astype(want)
            except (TypeError, ValueError) as exc:
                raise TypeError(
                    f"output column {name!r} came back as {out[name].dtype} and cannot be "
                    f"cast to meta's {want}: {exc}"
                ) from None
    if out.index.dtype != meta.index.dtype:
        out.index = out.index.astype(meta.index.dtype)
    out.index.name = meta.index.name
    return out
