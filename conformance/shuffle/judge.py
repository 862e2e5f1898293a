"""The whole shuffle contract on one shuffle's outcome, for the shuffle machine.

``shuffle_oracle`` judges one property at a time; this adds what a sequence of shuffles can
break (the schema's metadata and nullable flags, 14.15; the landing of a key against every
earlier shuffle of that key, 14.9) and the shape of an error (14.5, 14.12).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from . import oracle as oracle
from .oracle import _key, _values

BIG = 10_000  # rows: above, a case is numeric (tables.uniform_case) and judged by NumPy


def metadata_problems(outputs: Sequence[pa.Table], schema: pa.Schema) -> list[str]:
    """Clause 14.15: the schema's metadata, byte for byte, and every field's nullable flag."""
    problems = []
    for i, t in enumerate(outputs):
        if (t.schema.metadata or {}) != (schema.metadata or {}):
            problems.append(
                f"output {i}: schema metadata {t.schema.metadata}, expected {schema.metadata}"
            )
            break
    for i, t in enumerate(outputs):
        flags = [
            f"{f.name} nullable={t.schema.field(f.name).nullable}, expected {f.nullable}"
            for f in schema
            if f.name in t.schema.names and t.schema.field(f.name).nullable != f.nullable
        ]
        if flags:
            problems.append(f"output {i}: {'; '.join(flags)}")
            break
    return problems


def field_metadata_kept(outputs: Sequence[pa.Table], schema: pa.Schema) -> bool:
    """Whether every output kept every field's metadata (recorded, not promised)."""
    return all(
        t.schema.field(f.name).metadata == f.metadata
        for t in outputs
        for f in schema
        if f.metadata and f.name in t.schema.names
    )


class Landing:
    """Where each key landed, over every shuffle of a machine run: clause 14.9 says a key's
    output depends on the key and ``npartitions`` alone (types are part of the key)."""

    def __init__(self) -> None:
        self.seen: dict[tuple, int] = {}

    def problems(self, case: Any, outputs: Sequence[pa.Table], what: str) -> list[str]:
        types = tuple(str(case.schema.field(k).type) for k in case.on)
        moved = []
        for i, t in enumerate(outputs):
            if not t.num_rows:
                continue
            cols = [_values(t.column(k)) for k in case.on]
            for row in zip(*cols, strict=True):
                key = (case.npartitions, types, tuple(_key(v) for v in row))
                if self.seen.setdefault(key, i) != i:
                    moved.append((key[2], self.seen[key], i))
        if not moved:
            return []
        k, before, now = moved[0]
        return [
            f"{len(moved)} keys land elsewhere than in an earlier shuffle ({what}), e.g. "
            f"{dict(zip(case.on, k, strict=True))}: output {before} then {now}"
        ]


def outcome_problems(
    case: Any, outputs: Sequence[object], landing: Landing | None, what: str
) -> list[str]:
    """14.1, 14.6, 14.7, 14.8 (``oracle.check``), 14.15 and 14.9 against ``landing``."""
    if case.num_rows > BIG and all(isinstance(t, pa.Table) for t in outputs):
        problems = oracle.row_ids_problems(case, outputs)  # numeric columns, by NumPy
        problems += oracle.schema_problems(outputs, case.schema)
        problems += oracle.colocation_problems(outputs, case.on)
    else:
        problems = oracle.check(case, outputs)
    if any(not isinstance(t, pa.Table) for t in outputs) or problems:
        return problems
    problems += metadata_problems(outputs, case.schema)
    if landing is not None:
        problems += landing.problems(case, outputs, what)
    return problems


def error_names(exc: BaseException, *patterns: str) -> bool:
    """Whether the error's text (its chain included) matches one of ``patterns``."""
    text = []
    while exc is not None and len(text) < 5:
        text.append(f"{type(exc).__name__}: {exc}")
        exc = exc.__cause__ or exc.__context__
    joined = " | ".join(text)
    return any(re.search(p, joined) for p in patterns)
