"""Clause 14.22's other half: the types an implementation may not carry (lists, structs,
maps, ordered dictionaries), as payload and as the key."""

from __future__ import annotations

import pyarrow as pa

from .tables import ROW_ID, ShuffleCase

# Clause 14.22's other half: types an implementation may not carry, each of which it must
# either shuffle exactly or refuse naming the column.
HARD_COLUMN = "hard_column"
HARD_TYPES: dict[str, tuple[pa.DataType, list]] = {
    "list<int64>": (pa.list_(pa.int64()), [[1, 2], None, [], [3]]),
    "struct<a: int64>": (pa.struct([("a", pa.int64())]), [{"a": 1}, None, {"a": None}, {"a": 4}]),
    "ordered dictionary": (pa.dictionary(pa.int8(), pa.string(), ordered=True), ["lo", "hi", None, "lo"]),
    "list<string>": (pa.list_(pa.string()), [["a", None, ""], [], None, ["héllo"]]),
    "large_list<float64>": (pa.large_list(pa.float64()), [[-0.0, float("nan")], None, [], [1.5]]),
    "fixed_size_list<int32, 2>": (pa.list_(pa.int32(), 2), [[1, None], None, [3, 4], [-(2**31), 0]]),
    "map<string, int64>": (pa.map_(pa.string(), pa.int64()), [[("a", 1), ("b", None)], None, [], [("a", 2)]]),
    "list<struct<a: int64, b: list<string>>>": (
        pa.list_(pa.struct([("a", pa.int64()), ("b", pa.list_(pa.string()))])),
        [[{"a": 1, "b": ["x", None]}, None], [], None, [{"a": None, "b": None}]],
    ),
}


def _hard_array(name: str, times: int = 1) -> pa.Array:
    """The values of ``HARD_TYPES[name]``, ``times`` over."""
    type_, values = HARD_TYPES[name]
    if pa.types.is_dictionary(type_):
        codes = pa.array([0, 1, None, 0] * times, type_.index_type)
        return pa.DictionaryArray.from_arrays(codes, ["lo", "hi"], ordered=type_.ordered)
    return pa.array(values * times, type_)


def hard_type_case(name: str) -> ShuffleCase:
    """An int64 key, a payload column ``HARD_COLUMN`` of one of ``HARD_TYPES``, two inputs."""
    hard = _hard_array(name)
    whole = pa.table({"k0": pa.array([1, 2, 3, 1], pa.int64()), HARD_COLUMN: hard, ROW_ID: pa.array(range(4), pa.int64())})
    return ShuffleCase((whole.slice(0, 2), whole.slice(2)), ("k0",), 2)


def hard_key_case(name: str) -> ShuffleCase:
    """``HARD_COLUMN`` of one of ``HARD_TYPES`` as the key (14.22's keys): every value twice,
    the first copy in one input and the second in the other, so that a shuffle that splits
    equal values is seen; five outputs for four distinct values."""
    hard = _hard_array(name, times=2)
    n = len(hard)
    whole = pa.table({HARD_COLUMN: hard, ROW_ID: pa.array(range(n), pa.int64())})
    return ShuffleCase((whole.slice(0, n // 2), whole.slice(n // 2)), (HARD_COLUMN,), 5)
