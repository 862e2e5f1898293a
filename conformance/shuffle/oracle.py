"""Judging a shuffle's outputs against its inputs, from the Arrow tables alone.

Each check returns a list of problems (empty when it holds), each naming the row ids,
partitions, keys or columns involved, so that a failing test says what went wrong.
Keys compare as values: null equals null, NaN equals NaN, -0.0 equals 0.0.
"""

from __future__ import annotations

import math
import struct
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from .tables import ROW_ID

MAX_LISTED = 5


def _exact(v: object) -> object:
    """A value as compared for 'the same row': floats by their bits (NaN payloads aside),
    at any depth of a list, struct or map (Python's list equality takes NaN != NaN)."""
    if isinstance(v, float):
        return ("nan",) if math.isnan(v) else struct.pack("<d", v)
    if isinstance(v, (list, tuple)):
        return tuple(_exact(x) for x in v)
    if isinstance(v, dict):
        return tuple((k, _exact(x)) for k, x in v.items())
    return v


def _key(v: object) -> object:
    """A key as compared for co-location: all NaNs one value, -0.0 the same as 0.0; a list,
    struct or map value (14.22's keys) item by item, field by field, entry by entry."""
    if isinstance(v, float):
        return ("nan",) if math.isnan(v) else v + 0.0
    if isinstance(v, list | tuple):
        return ("list", *(_key(x) for x in v))
    if isinstance(v, dict):
        return ("struct", *((k, _key(x)) for k, x in v.items()))
    return v


def _values(column: pa.ChunkedArray) -> list:
    """Python values; dates, times, timestamps and durations as their integers (years past
    9999 and durations past 10^9 days have no Python object); a dictionary's as its values."""
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    if pa.types.is_temporal(column.type):
        column = column.cast(pa.int32() if column.type.bit_width == 32 else pa.int64())
    return column.to_pylist()


def _rows(table: pa.Table) -> dict[int, tuple]:
    ids = table.column(ROW_ID).to_pylist()
    cols = [_values(table.column(name)) for name in table.column_names]
    return {rid: tuple(_exact(c[i]) for c in cols) for i, rid in enumerate(ids)}


def same_rows_problems(got: pa.Table, want: pa.Table, what: str) -> list[str]:
    """``got`` holds exactly ``want``'s rows (by row id), each once and unchanged."""
    return [f"{what}: {problem}" for problem in row_problems([want], [got])]


def _listed(items) -> str:
    items = sorted(items, key=repr)
    more = f" (+{len(items) - MAX_LISTED} more)" if len(items) > MAX_LISTED else ""
    return ", ".join(map(repr, items[:MAX_LISTED])) + more


def count_problems(outputs: Sequence[object], npartitions: int) -> list[str]:
    """Exactly ``npartitions`` outputs, each a ``pyarrow.Table``."""
    problems = []
    if len(outputs) != npartitions:
        problems.append(f"{len(outputs)} outputs returned for npartitions={npartitions}")
    bad = [i for i, t in enumerate(outputs) if not isinstance(t, pa.Table)]
    if bad:
        problems.append(
            f"outputs {bad[:MAX_LISTED]} are not pyarrow Tables "
            f"({type(outputs[bad[0]]).__name__})"
        )
    return problems


def schema_problems(outputs: Sequence[pa.Table], schema: pa.Schema) -> list[str]:
    """Every output has the inputs' column names, order and types."""
    problems = []
    for i, t in enumerate(outputs):
        if t.schema.equals(schema, check_metadata=False):
            continue
        if t.column_names != schema.names:
            problems.append(f"output {i}: columns {t.column_names}, expected {schema.names}")
            continue
        for f in schema:
            got = t.schema.field(f.name).type
            if got != f.type:
                problems.append(f"output {i}: column {f.name!r} is {got}, expected {f.type}")
    return problems


def row_problems(inputs: Sequence[pa.Table], outputs: Sequence[pa.Table]) -> list[str]:
    """The outputs hold every input row exactly once, with every value unchanged."""
    want: dict[int, tuple] = {}
    for t in inputs:
        want.update(_rows(t))
    got: dict[int, tuple] = {}
    seen_twice: set[int] = set()
    problems = []
    names = inputs[0].column_names if inputs else []
    for i, t in enumerate(outputs):
        if t.num_rows and ROW_ID not in t.column_names:
            return [f"output {i} has no {ROW_ID!r} column"]
        if t.num_rows and t.column_names != names:
            t = t.select([n for n in names if n in t.column_names])
        if not t.num_rows:
            continue
        rows = _rows(t)
        if len(rows) < t.num_rows:  # a row twice in this one output (equal keys land together)
            ids = t.column(ROW_ID).to_pylist()
            seen_twice.update(rid for rid, n in Counter(ids).items() if n > 1)
        for rid, row in rows.items():
            if rid in got:
                seen_twice.add(rid)
            got[rid] = row
    missing = set(want) - set(got)
    extra = set(got) - set(want)
    if missing:
        problems.append(f"{len(missing)} of {len(want)} rows lost: row ids {_listed(missing)}")
    if extra:
        problems.append(f"{len(extra)} rows that no input had: row ids {_listed(extra)}")
    if seen_twice:
        problems.append(f"{len(seen_twice)} rows output twice: row ids {_listed(seen_twice)}")
    changed = [rid for rid in set(want) & set(got) if want[rid] != got[rid]]
    if changed:
        rid = min(changed)
        diff = [
            f"{n}: {w!r} -> {g!r}"
            for n, w, g in zip(names, want[rid], got[rid], strict=False)
            if w != g
        ]
        problems.append(
            f"{len(changed)} rows changed, e.g. row id {rid}: {'; '.join(diff) or 'columns'}"
        )
    return problems


def assignment(outputs: Sequence[pa.Table]) -> dict[int, int]:
    """``{row id: output index}``."""
    out = {}
    for i, t in enumerate(outputs):
        if t.num_rows:
            for rid in t.column(ROW_ID).to_pylist():
                out[rid] = i
    return out


def colocation_problems(outputs: Sequence[pa.Table], on: Sequence[str]) -> list[str]:
    """Rows with equal keys are all in one output."""
    where: dict[tuple, set[int]] = {}
    for i, t in enumerate(outputs):
        if not t.num_rows:
            continue
        cols = [_values(t.column(k)) for k in on]
        for row in zip(*cols, strict=True):
            where.setdefault(tuple(_key(v) for v in row), set()).add(i)
    split = {k: sorted(v) for k, v in where.items() if len(v) > 1}
    if not split:
        return []
    k, parts = next(iter(sorted(split.items(), key=repr)))
    return [f"{len(split)} keys split across outputs, e.g. {dict(zip(on, k, strict=True))} in {parts}"]


def assignment_problems(first: dict[int, int], second: dict[int, int], what: str) -> list[str]:
    """Two runs put every row in the same output."""
    moved = [rid for rid in first if second.get(rid) != first[rid]]
    if not moved:
        return []
    rid = min(moved)
    return [
        f"{len(moved)} rows land in another output {what}, e.g. row id {rid}: "
        f"output {first[rid]} then {second.get(rid)}"
    ]


def check(case, outputs: Sequence[object]) -> list[str]:
    """Everything clause 14.1, 14.6, 14.7 and 14.8 say about one shuffle's outputs."""
    problems = count_problems(outputs, case.npartitions)
    if any(not isinstance(t, pa.Table) for t in outputs):
        return problems
    return (
        problems
        + schema_problems(outputs, case.schema)
        + row_problems(case.tables, outputs)
        + colocation_problems(outputs, case.on)
    )


def row_ids_problems(case: Any, outputs: Sequence[object]) -> list[str]:
    """14.1 for a large case, by row ids and a checksum per column (fast)."""
    import numpy as np

    problems = count_problems(outputs, case.npartitions)
    if problems:
        return problems
    got = pa.concat_tables(outputs).combine_chunks()
    want = pa.concat_tables(case.tables)
    ids = np.sort(got.column(ROW_ID).to_numpy())
    if not np.array_equal(ids, np.sort(want.column(ROW_ID).to_numpy())):
        return [f"row ids differ: {got.num_rows:,} rows out, {want.num_rows:,} in"]
    order = np.argsort(got.column(ROW_ID).to_numpy())
    for name in want.column_names:
        a = want.column(name).to_numpy()
        b = got.column(name).to_numpy()[order]
        if not np.array_equal(a.view(np.uint8), np.ascontiguousarray(b).view(np.uint8)):
            problems.append(f"column {name!r} changed")
    return problems
