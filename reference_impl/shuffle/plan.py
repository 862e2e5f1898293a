"""Validation before any data moves, and the output -> worker placement.

Everything here runs before a single shard is made: the inputs' schemas are
read from the workers (cached proxy metadata, nothing is unspilled), checked
against each other and the key columns, and every column is tried against the
partition kernels on a one-row table of nulls, so an unsupported type is
refused with its name instead of failing halfway through a transfer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from reference_impl.device import SimDevice
from reference_impl.table import ColumnNotFoundError, SchemaMismatchError, Table
from reference_impl.table.logical import logical_schema
from reference_impl.table.partition import MAX_PARTITIONS, partition_ids, partition_table

_PROBE_DEVICE: SimDevice | None = None


def check_arguments(n_inputs: int, on: str | Sequence[str], npartitions: Any) -> list[str]:
    """The cheap checks: no inputs, no keys, a bad partition count."""
    if n_inputs == 0:
        raise ValueError("shuffle needs at least one input partition, got none")
    if isinstance(npartitions, bool) or not isinstance(npartitions, int):
        raise TypeError(f"npartitions must be an int, got {type(npartitions).__name__}")
    if npartitions < 1:
        raise ValueError(f"npartitions must be at least 1, got {npartitions}")
    if npartitions > MAX_PARTITIONS:
        raise ValueError(f"npartitions must be at most {MAX_PARTITIONS}, got {npartitions}")
    keys = [on] if isinstance(on, str) else list(on)
    if not keys:
        raise ValueError("shuffle needs at least one key column in on=")
    if len(set(keys)) != len(keys):
        raise ValueError(f"key columns repeat in on={keys!r}")
    return keys


def describe_input(value: Any) -> tuple[str, pa.Schema | None]:
    """Task: the type and schema of one input, without unspilling it."""
    if isinstance(value, Table):  # a proxy of a Table answers from its metadata
        return "Table", value.schema
    return type(value).__name__, None


def _shape(schema: pa.Schema) -> str:
    return "(" + ", ".join(f"{f.name}: {f.type}" for f in schema) + ")"


def check_schemas(described: Sequence[tuple[str, pa.Schema | None]], keys: list[str]) -> pa.Schema:
    """One schema for all inputs (nullability may differ: the output's is the union)."""
    for i, (kind, _) in enumerate(described):
        if kind != "Table":
            raise TypeError(f"input {i} is a {kind}, not a reference_impl Table")
    first = described[0][1]
    assert first is not None
    logical0 = logical_schema(first)  # the types compared: a date32 held as int32 is no int32
    shape0 = [(f.name, f.type) for f in logical0]
    nullable = {f.name: f.nullable for f in first}
    for i, (_, schema) in enumerate(described[1:], start=1):
        assert schema is not None
        logical = logical_schema(schema)
        if [(f.name, f.type) for f in logical] != shape0:
            raise SchemaMismatchError(
                f"inputs have different schemas: input 0 has {_shape(logical0)}, "
                f"input {i} has {_shape(logical)}"
            )
        for f in schema:
            nullable[f.name] |= f.nullable
    missing = [k for k in keys if k not in nullable]
    if missing:
        raise ColumnNotFoundError(missing, first.names)
    fields = [pa.field(f.name, f.type, nullable=nullable[f.name]) for f in first]
    return pa.schema(fields, metadata=first.metadata)


def check_types(schema: pa.Schema, keys: list[str], npartitions: int) -> None:
    """Each column through the kernels on one null row: keys hashed, others scattered."""
    global _PROBE_DEVICE
    if _PROBE_DEVICE is None:
        _PROBE_DEVICE = SimDevice("1 MiB", name="sim:shuffle-probe")
    for f in sorted(schema, key=lambda f: f.name not in keys):  # keys first
        cols = {f.name: pa.nulls(1, f.type)}
        for k in keys:
            cols.setdefault(k, pa.nulls(1, schema.field(k).type))
        probe = Table.from_arrow(pa.table(cols), _PROBE_DEVICE)
        try:
            if f.name in keys:
                partition_ids(probe, [f.name], npartitions)
            else:
                partition_table(probe, keys, npartitions)
        except (NotImplementedError, TypeError) as exc:
            role = "key column" if f.name in keys else "column"
            raise TypeError(
                f"{role} {f.name!r} has type {f.type}, which the shuffle cannot partition: {exc}"
            ) from exc


def place(npartitions: int, workers: Sequence[str]) -> list[str]:
    """Output i -> worker: contiguous ranges over the sorted workers (as P2P does)."""
    ordered = sorted(workers)
    n = len(ordered)
    return [ordered[n * i // npartitions] for i in range(npartitions)]
