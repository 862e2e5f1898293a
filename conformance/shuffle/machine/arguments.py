"""What the shuffle machine's rules are given: explicit strategies, so that a failure prints a
program that reads as it ran, and the cases made from what they drew."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from hypothesis import strategies as st

from ..rich_tables import describe, rich_cases
from ..tables import ShuffleCase, uniform_case

SPILL_CASE_MAX = 3 * 2**19  # bytes; an implementation that always writes shards needs no more
BAD_ARGUMENTS = ("column", "npartitions", "empty on", "schemas")


class Drawn:
    """A drawn case with a short repr, for the printed program."""

    def __init__(self, case: ShuffleCase) -> None:
        self.case = case

    def __repr__(self) -> str:
        return f"<{describe(self.case)}>"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # hypothesis prints programs so
        p.text(repr(self))


@dataclass(frozen=True)
class Rekey:
    """Other keys and another count for inputs already shuffled, drawn before the inputs'
    columns are known: ``picks`` index the usable columns, ``count`` the partitions (each
    modulo what there is)."""

    picks: tuple[int, ...]
    count: int

    def of(self, names: list[str], num_rows: int) -> tuple[list[str], int]:
        on = list(dict.fromkeys(names[p % len(names)] for p in self.picks))
        return on, 1 + self.count % (num_rows + 3)


# Rule arguments. Null keys are drawn for every implementation; one without shuffle.nulls
# gets the rows whose keys hold none (without_null_keys).
CASES = st.deferred(lambda: rich_cases().map(Drawn))
SMALL_CASES = st.deferred(lambda: rich_cases(max_rows=30).map(Drawn))
MOVING_CASES = st.deferred(lambda: rich_cases(max_rows=400, max_inputs=6).map(Drawn))
REKEYS = st.builds(
    Rekey, st.lists(st.integers(0, 2**8), min_size=1, max_size=3).map(tuple), st.integers(0, 2**16)
)
PHASES = st.sampled_from(["unpack", "transfer"])


def key_columns(case: ShuffleCase, nulls: bool) -> list[str]:
    """The columns a rekey may pick: never a pandas index column (14.23: keys are data
    columns), nor, without ``nulls``, one holding a null."""
    index = {c for c in (case.schema.pandas_metadata or {}).get("index_columns", ()) if isinstance(c, str)}
    return [
        f.name
        for f in case.schema
        if f.name not in index
        and (nulls or all(t.column(f.name).null_count == 0 for t in case.tables))
    ]


def bad_call(
    kind: str, case: ShuffleCase, missing: str, bad_n: Any, retype: int
) -> tuple[list[pa.Table], list[str], Any, str]:
    """``case``'s call made bad in the way ``kind`` names (one of BAD_ARGUMENTS): its tables,
    keys and count, and a pattern the error must match (14.12)."""
    tables, on, n = list(case.tables), list(case.on), case.npartitions
    if kind == "column":
        on, pattern = [*on, missing], re.escape(missing)
    elif kind == "empty on":
        on, pattern = [], r"\bon\b|key"
    elif kind == "npartitions":
        n, pattern = bad_n, "npartitions"
    else:
        if len(tables) < 2:
            tables.append(tables[0].slice(0, 0))
        names = tables[0].schema.names
        target = names[retype % len(names)]
        tables[-1] = retyped(tables[-1], target)
        pattern = re.escape(target)
    return tables, on, n, pattern


def without_null_keys(case: ShuffleCase) -> ShuffleCase:
    """For implementations without ``shuffle.nulls``: the rows whose keys hold no null."""
    import pyarrow.compute as pc

    def keep(t: pa.Table) -> pa.Table:
        valid = None
        for k in case.on:
            v = pc.is_valid(t.column(k))
            valid = v if valid is None else pc.and_(valid, v)
        return t.filter(valid) if valid is not None else t

    return ShuffleCase(tuple(keep(t) for t in case.tables), case.on, case.npartitions)


def retyped(table: pa.Table, name: str) -> pa.Table:
    """``table`` with column ``name`` of another type (int64 <-> string)."""
    i = table.schema.get_field_index(name)
    col = table.column(i)
    if pa.types.is_string(col.type):
        new = pa.array([0] * table.num_rows, pa.int64())
    else:
        new = pa.array(["x"] * table.num_rows, pa.string())
    return table.set_column(i, pa.field(name, new.type), new)


def spilling_case(cluster: Any, seed: int) -> ShuffleCase:
    """1.5 times what the device and host tiers of the workers hold (at most
    SPILL_CASE_MAX), in 8 inputs."""
    host = cluster.env.host_limit or 0
    total = min(3 * (cluster.budget() + host) * cluster.env.n_workers // 2, SPILL_CASE_MAX)
    return uniform_case(8, max(1, total // 8 // 24), 4, seed=seed)
