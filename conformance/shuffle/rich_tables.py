"""Inputs carrying everything a Table holds and every property an Arrow schema carries.

``tables.shuffle_cases`` draws values; this draws the rest of what users hand a shuffle:
timestamps with time zones, durations of every unit, text with odd code points, schema and
field metadata, non-nullable fields, inputs that are slices (non-zero offsets), chunked
(several chunks a column) or contiguous, zero-row inputs, one input or many small ones, keys
that are all equal, and a pandas index (14.23). Drawn as plain data and built at the end, as ``tables`` does.
"""

from __future__ import annotations

import pyarrow as pa
from hypothesis import strategies as st

from .tables import CUTS, INDEX_KINDS, KEY_TYPES, ROW_ID, ShuffleCase, cut, values_of, with_index

EXTRA_TYPES: dict[str, pa.DataType] = {
    "timestamp[us, UTC]": pa.timestamp("us", tz="UTC"),
    "timestamp[ms, +05:30]": pa.timestamp("ms", tz="+05:30"),
    "timestamp[ns, Europe/Paris]": pa.timestamp("ns", tz="Europe/Paris"),
    "duration[s]": pa.duration("s"),
    "duration[ns]": pa.duration("ns"),
}
ALL_TYPES: dict[str, pa.DataType] = {**KEY_TYPES, **EXTRA_TYPES}
ODD_TEXT = ["", "\x00", "a\x00b", "\u202e\u0301", "😀", "\uffff", "\U0010ffff", "é" * 3, "x" * 300]


def _values(type_name: str) -> st.SearchStrategy:
    if type_name in EXTRA_TYPES:
        return st.sampled_from([0, 1, -1, 86_400]) | st.integers(-(2**62), 2**62)
    if type_name in ("string", "large_string"):
        return st.sampled_from(ODD_TEXT) | values_of(type_name) | st.text(min_size=0, max_size=6)
    return values_of(type_name)


# Keys any producer may use; not b"pandas" or b"ARROW:...", which pyarrow itself parses
# (pandas' JSON, the IPC schema): bytes of our own there break every pandas conversion.
_metadata = st.dictionaries(
    st.sampled_from([b"origin", b"", b"\xff\x00k", b"note"]),
    st.binary(max_size=8),
    max_size=2,
)


@st.composite
def _column(draw, name: str, type_name: str, n: int, *, nulls: bool, one_value: bool):
    """A field (nullable flag and metadata drawn) and its Python values."""
    values = _values(type_name)
    if one_value:
        values = st.just(draw(values))
    with_nulls = nulls and draw(st.booleans())
    elem = st.none() | values if with_nulls else values
    data = draw(st.lists(elem, min_size=n, max_size=n))
    nullable = any(v is None for v in data) or draw(st.booleans())
    metadata = draw(st.none() | _metadata)
    return pa.field(name, ALL_TYPES[type_name], nullable=nullable, metadata=metadata), data


@st.composite
def rich_cases(
    draw, *, max_rows: int = 60, max_inputs: int = 12, nulls: bool = True
) -> ShuffleCase:
    """One case; every input has the same schema (names, types, nullable flags, field and
    schema metadata). ``nulls=False`` draws no null keys."""
    n = draw(st.sampled_from([0, 1]) | st.integers(0, max_rows))
    n_keys = draw(st.integers(1, 3))
    types = st.sampled_from(tuple(ALL_TYPES))
    one_key = draw(st.booleans()) and draw(st.booleans())  # a quarter: all rows one key
    fields, columns, on = [], [], []
    for i in range(n_keys):
        f, data = draw(
            _column(f"k{i}", draw(types), n, nulls=nulls, one_value=one_key)
        )
        fields.append(f)
        columns.append(data)
        on.append(f.name)
    for i in range(draw(st.integers(0, 2))):
        f, data = draw(_column(f"p{i}", draw(types), n, nulls=True, one_value=False))
        fields.append(f)
        columns.append(data)
    fields.append(pa.field(ROW_ID, pa.int64(), nullable=False))
    columns.append(list(range(n)))
    order = draw(st.permutations(range(len(fields))))  # keys need not come first
    schema = pa.schema([fields[i] for i in order], metadata=draw(st.none() | _metadata))
    arrays = [pa.array(columns[i], type=fields[i].type) for i in order]
    whole = pa.Table.from_arrays(arrays, schema=schema)
    many = draw(st.booleans())
    n_inputs = draw(st.integers(1, max_inputs if many else 3))
    cuts = sorted(draw(st.lists(st.integers(0, n), min_size=n_inputs - 1, max_size=n_inputs - 1)))
    bounds = [0, *cuts, n]
    tables = tuple(
        cut(whole.slice(a, b - a), draw(st.sampled_from(CUTS)), draw(st.integers(2, 4)))
        for a, b in zip(bounds, bounds[1:], strict=False)
    )
    npartitions = draw(st.integers(1, max(1, n) + 3) | st.sampled_from([1, 2, n + 5]))
    case = ShuffleCase(tables, tuple(on), npartitions)
    index = draw(st.none() | st.tuples(st.sampled_from(INDEX_KINDS), st.sampled_from(("label", None))))
    return case if index is None else with_index(case, *index)  # 14.23


def describe(case: ShuffleCase) -> str:
    """``ShuffleCase.describe`` plus what this module adds: metadata, flags, cuts."""
    s = case.schema
    extras = []
    index = (s.pandas_metadata or {}).get("index_columns")
    if index:
        extras.append(f"pandas index {index}")
    if s.metadata:
        extras.append(f"schema metadata {dict(s.metadata)}")
    extras += [f"{f.name} field metadata" for f in s if f.metadata]
    extras += [f"{f.name} not null" for f in s if not f.nullable]
    chunks = [t.column(0).num_chunks if t.num_columns else 0 for t in case.tables]
    return f"{case.describe()} chunks={chunks} {'; '.join(extras)}"
