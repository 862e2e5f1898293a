"""Nested columns users hold (clause 14.22), drawn rather than listed: any tree of lists,
large lists, fixed-size lists, structs and maps over leaf types of 14.1 and 14.22, with
nulls at every level (a null list, an empty one, a list of nulls, a null struct, a struct
of nulls), in inputs that are slices or chunked (``tables.cut``).

``tables.HARD_TYPES`` names a few such types; a fixed list catches the bugs it was written
for. Drawing the tree catches the level or the combination nobody listed (a fixed-size list
of size 0, a map in a struct in a large list). Drawn as plain data, built at the end.
"""

from __future__ import annotations

import pyarrow as pa
from hypothesis import strategies as st

from .hard_types import HARD_COLUMN
from .tables import ROW_ID, ShuffleCase, cut, draw_inputs, values_of

# Leaves, by the name ``tables.values_of`` draws values for.
LEAF_TYPES: dict[str, pa.DataType] = {
    "int8": pa.int8(),
    "int64": pa.int64(),
    "uint64": pa.uint64(),
    "float64": pa.float64(),
    "bool": pa.bool_(),
    "string": pa.string(),
    "large_string": pa.large_string(),
    "timestamp[ns]": pa.timestamp("ns"),
    "duration[us]": pa.duration("us"),
    "decimal128(38, 10)": pa.decimal128(38, 10),
    "date32": pa.date32(),
    "binary": pa.binary(),
    "null": pa.null(),  # what pyarrow infers for lists of nothing but None
}
MAP_KEYS = ("string", "int64")  # a map's keys are never null
_NAMES = {str(t): name for name, t in LEAF_TYPES.items()}


def _is_nested(type_: pa.DataType) -> bool:
    return isinstance(type_, (pa.ListType, pa.LargeListType, pa.FixedSizeListType, pa.StructType, pa.MapType))


def nested_types(max_leaves: int = 5) -> st.SearchStrategy[pa.DataType]:
    """A nested Arrow type: at least one level of nesting, at most ``max_leaves`` leaves."""
    leaves = st.sampled_from(list(LEAF_TYPES.values()))

    def extend(children: st.SearchStrategy[pa.DataType]) -> st.SearchStrategy[pa.DataType]:
        return st.one_of(
            children.map(pa.list_),
            children.map(pa.large_list),
            st.tuples(children, st.integers(0, 3)).map(lambda t: pa.list_(t[0], t[1])),
            st.lists(children, min_size=1, max_size=3).map(
                lambda cs: pa.struct([(f"f{i}", c) for i, c in enumerate(cs)])
            ),
            st.tuples(st.sampled_from(MAP_KEYS), children).map(
                lambda t: pa.map_(LEAF_TYPES[t[0]], t[1])
            ),
        )

    return st.recursive(leaves, extend, max_leaves=max_leaves).filter(_is_nested)


def values_for(type_: pa.DataType, nullable: bool = True) -> st.SearchStrategy:
    """Python values of ``type_`` that ``pa.array(..., type_)`` builds; None at any level."""
    if isinstance(type_, pa.MapType):
        keys = values_of(_NAMES[str(type_.key_type)])
        inner = st.lists(st.tuples(keys, values_for(type_.item_type)), max_size=3)
    elif isinstance(type_, pa.FixedSizeListType):
        n = type_.list_size
        inner = st.lists(values_for(type_.value_type), min_size=n, max_size=n)
    elif isinstance(type_, (pa.ListType, pa.LargeListType)):
        inner = st.lists(values_for(type_.value_type), max_size=3)
    elif isinstance(type_, pa.StructType):
        fields = [type_.field(i) for i in range(type_.num_fields)]
        inner = st.fixed_dictionaries({f.name: values_for(f.type) for f in fields})
    elif type_ == pa.null():
        return st.none()
    elif type_ == pa.binary():
        inner = st.sampled_from([b"", b"\x00", b"\xff\xfe"]) | st.binary(max_size=6)
    else:
        inner = values_of(_NAMES[str(type_)])
    return (st.none() | inner) if nullable else inner


@st.composite
def nested_cases(draw, *, max_rows: int = 30, max_inputs: int = 3) -> ShuffleCase:
    """An int64 key, a drawn nested payload column ``HARD_COLUMN``, the row id; inputs cut
    as users hand them over."""
    type_ = draw(nested_types())
    n = draw(st.integers(0, max_rows))
    values = draw(st.lists(values_for(type_), min_size=n, max_size=n))
    keys = draw(st.lists(st.integers(0, 6), min_size=n, max_size=n))
    whole = pa.table(
        {
            "k0": pa.array(keys, pa.int64()),
            HARD_COLUMN: pa.array(values, type_),
            ROW_ID: pa.array(range(n), pa.int64()),
        }
    )
    tables = draw_inputs(draw, whole, max_inputs, max_pieces=3)
    npartitions = draw(st.integers(1, max(1, n) + 2))
    return ShuffleCase(tables, ("k0",), npartitions)


def null_leaves_case() -> ShuffleCase:
    """Always run: null-typed leaves (``list<null>``, what pyarrow infers for lists holding
    only None) in a struct, next to a fixed-size list of size 0; two inputs, one a slice."""
    type_ = pa.struct(
        [("a", pa.list_(pa.null())), ("b", pa.null()), ("c", pa.list_(pa.int64(), 0))]
    )
    values = [
        {"a": [None, None], "b": None, "c": []},
        None,
        {"a": [], "b": None, "c": None},
        {"a": None, "b": None, "c": []},
        {"a": [None], "b": None, "c": []},
    ]
    whole = pa.table(
        {
            "k0": pa.array([1, 2, 1, 3, 2], pa.int64()),
            HARD_COLUMN: pa.array(values, type_),
            ROW_ID: pa.array(range(5), pa.int64()),
        }
    )
    return ShuffleCase((whole.slice(0, 2), whole.slice(2)), ("k0",), 3)


def dynamic_fields_case() -> ShuffleCase:
    """Always run: a list of structs with several variable-size fields (text, a list, a map),
    so each element records several sizes, in several rows and inputs."""
    type_ = pa.list_(
        pa.struct(
            [
                ("s", pa.string()),
                ("l", pa.list_(pa.int64())),
                ("m", pa.map_(pa.string(), pa.float64())),
                ("i", pa.int32()),
            ]
        )
    )
    rows = [
        [{"s": "a", "l": [1, None], "m": [("x", 1.5)], "i": 1}, None],
        [],
        None,
        [{"s": None, "l": None, "m": None, "i": None}, {"s": "héllo", "l": [], "m": [], "i": -1}],
        [{"s": "", "l": [2, 3, 4], "m": [("y", -0.0), ("z", None)], "i": 7}],
        [{"s": "zz" * 20, "l": [5], "m": [("a", float("nan"))], "i": 0}] * 3,
    ]
    whole = pa.table(
        {
            "k0": pa.array([1, 2, 1, 3, 2, 4], pa.int64()),
            HARD_COLUMN: pa.array(rows, type_),
            ROW_ID: pa.array(range(len(rows)), pa.int64()),
        }
    )
    return ShuffleCase((whole.slice(0, 3), cut(whole.slice(3), "chunked", 2)), ("k0",), 3)
