"""The shuffle's result: every row once, at the hash spec's output, keys co-located,
types and nulls kept, deterministic. Tables, keys and partition counts are drawn
by hypothesis; one 2-process cluster serves the whole module (workers are warm:
the kernels compile once per process)."""

from __future__ import annotations

import distributed
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shuffle_helpers import (
    check_shuffle,
    cluster,
    scatter_tables,
    shuffle_keys,
    worker_addresses,
    worker_state,
)

from reference_impl.shuffle import shuffle
from reference_impl.table import ColumnNotFoundError, SchemaMismatchError

TYPES = {
    "i64": pa.int64(),
    "i8": pa.int8(),
    "u32": pa.uint32(),
    "f64": pa.float64(),
    "f32": pa.float32(),
    "bool": pa.bool_(),
    "ts": pa.timestamp("us"),
    "str": pa.string(),
}


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    with (
        cluster(tmp_path_factory.mktemp("shuffle")) as c,
        distributed.Client(c) as client,
    ):
        yield client


def _values(draw, type_: pa.DataType, n: int) -> pa.Array:
    if pa.types.is_floating(type_):
        pool = [0.0, -0.0, float("nan"), 1.5, -2.25, 1e300, 3.0]
        vals = draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n))
    elif pa.types.is_string(type_):
        vals = draw(st.lists(st.sampled_from(["", "a", "é", "bb", "a\x00b"]), min_size=n, max_size=n))
    elif pa.types.is_boolean(type_):
        vals = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    elif pa.types.is_unsigned_integer(type_):
        vals = draw(st.lists(st.integers(0, 6), min_size=n, max_size=n))
    else:
        vals = draw(st.lists(st.integers(-3, 5), min_size=n, max_size=n))
    nulls = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    return pa.array(vals, type=type_, mask=np.array(nulls, dtype=bool) if n else None)


# Each new dtype costs every process a kernel compile (seconds on 2 cores), so the
# default run draws from the types whose kernels the rest of the module compiles anyway.
FAST_TYPES = ["i64", "f64", "ts"]


@st.composite
def problems(draw, types=tuple(FAST_TYPES)):
    names = draw(st.lists(st.sampled_from(sorted(types)), min_size=1, max_size=3, unique=True))
    schema = {f"c_{n}": TYPES[n] for n in names}
    on = draw(st.lists(st.sampled_from(sorted(schema)), min_size=1, max_size=2, unique=True))
    n_inputs = draw(st.integers(1, 4))
    rid = 0
    tables = []
    for _ in range(n_inputs):
        n = draw(st.integers(0, 40))
        cols = {name: _values(draw, t, n) for name, t in schema.items()}
        cols["rid"] = pa.array(np.arange(rid, rid + n, dtype=np.int64))
        rid += n
        tables.append(pa.table(cols))
    return tables, on, draw(st.integers(1, 6))


@pytest.mark.parametrize(
    "types",
    [FAST_TYPES, pytest.param(sorted(TYPES), marks=pytest.mark.slow, id="all-types")],
    ids=lambda t: "-".join(t),
)
def test_every_row_lands_once_where_the_hash_says(client, types):
    @settings(max_examples=max(5, settings().max_examples // 5),
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(problems(types))
    def run(problem):
        tables, on, npartitions = problem
        outs = shuffle(client, scatter_tables(client, tables), on, npartitions)
        check_shuffle(tables, client.gather(outs), on, npartitions)

    run()
    assert all(s["runs"] == [] and s["externals"] == 0 for s in client.run(worker_state).values())


def example(n_inputs=4, rows=200, seed=0):
    rng = np.random.default_rng(seed)
    out, rid = [], 0
    for _ in range(n_inputs):
        k = rng.integers(0, 30, rows)
        out.append(pa.table({
            "k": pa.array(k, mask=k % 7 == 0),
            "f": pa.array(rng.choice([0.0, -0.0, np.nan, 2.5], rows)),
            "s": pa.array([f"é{x}" * (x % 4) for x in k], mask=k % 5 == 0),
            "rid": np.arange(rid, rid + rows, dtype=np.int64),
        }))
        rid += rows
    return out


def test_deterministic_and_empty_outputs_and_zero_row_inputs(client):
    tables = example()
    first = client.gather(shuffle(client, scatter_tables(client, tables), ["k", "f"], 5))
    again = client.gather(shuffle(client, scatter_tables(client, tables[::-1])[::-1], ["k", "f"], 5))
    assert all(a.equals(b) for a, b in zip(first, again, strict=True))
    check_shuffle(tables, first, ["k", "f"], 5)
    by_string = client.gather(shuffle(client, scatter_tables(client, tables), ["s"], 4))
    check_shuffle(tables, by_string, ["s"], 4)  # string keys and payload
    # more outputs than keys: some are empty, with the schema; zero-row inputs are fine
    empty = tables[0].slice(0, 0)
    outs = client.gather(shuffle(client, scatter_tables(client, [empty, tables[1], empty]), "k", 40))
    check_shuffle([empty, tables[1], empty], outs, "k", 40)
    assert any(t.num_rows == 0 for t in outs)
    outs = client.gather(shuffle(client, scatter_tables(client, [empty, empty]), "k", 3))
    assert [t.num_rows for t in outs] == [0, 0, 0]
    assert outs[0].schema == tables[0].schema


def test_placement_is_by_sorted_worker_range(client):
    workers = worker_addresses(client)
    outs = shuffle(client, scatter_tables(client, example(2, 50)), "k", 4)
    distributed.wait(outs)
    where = client.who_has(outs)
    assert [where[f.key] for f in outs] == [(workers[0],), (workers[0],), (workers[1],), (workers[1],)]


def _bad(client, inputs, on, npartitions, error, message):
    before = client.run_on_scheduler(shuffle_keys)
    with pytest.raises(error) as info:
        shuffle(client, inputs, on, npartitions)
    assert str(info.value) == message
    # Nothing was submitted. Keys of an earlier test's shuffle may still be going away (its
    # futures die with a garbage collection), so only new keys count.
    assert set(client.run_on_scheduler(shuffle_keys)) <= set(before)


def test_missing_key_column(client):
    ins = scatter_tables(client, example(2, 10))
    _bad(client, ins, ["k", "nope"], 3, ColumnNotFoundError,
         "column 'nope' not in the table; columns present: 'k', 'f', 's', 'rid'")


def test_differing_schemas(client):
    a, b = example(2, 10)
    b = b.set_column(1, "f", pa.array(np.arange(10), pa.int64()))
    _bad(client, scatter_tables(client, [a, b]), "k", 3, SchemaMismatchError,
         "inputs have different schemas: input 0 has (k: int64, f: double, s: string, "
         "rid: int64), input 1 has (k: int64, f: int64, s: string, rid: int64)")


def test_npartitions_below_one(client):
    _bad(client, scatter_tables(client, example(1, 10)), "k", 0, ValueError,
         "npartitions must be at least 1, got 0")


def test_no_inputs(client):
    _bad(client, [], "k", 3, ValueError, "shuffle needs at least one input partition, got none")


LIST = pa.list_(pa.int64())
STRUCT = pa.struct([("a", pa.int64()), ("b", pa.string()), ("c", pa.list_(pa.float64()))])
LISTS = [[1], [], None, [None], [1, 2], [2**63 - 1, -(2**63)]]
STRUCTS = [
    {"a": 1, "b": "x", "c": [-0.0, float("nan")]},
    None,
    {"a": None, "b": None, "c": None},
    {"a": 1, "b": "x", "c": []},
    {"a": -5, "b": "", "c": [None, 0.0]},
]


def nested_tables(n_inputs=3, rows=40, seed=4) -> list[pa.Table]:
    """List and struct columns (nulls at every level, empties, -0.0, NaN), each input a
    slice of a larger table (offsets at the nested levels too)."""
    rng = np.random.default_rng(seed)
    out, rid = [], 0
    for _ in range(n_inputs):
        big = rows + 3
        whole = pa.table({
            "l": pa.array([LISTS[i] for i in rng.integers(0, len(LISTS), big)], LIST),
            "s": pa.array([STRUCTS[i] for i in rng.integers(0, len(STRUCTS), big)], STRUCT),
            "rid": np.arange(rid - 2, rid - 2 + big, dtype=np.int64),
        })
        out.append(whole.slice(2, rows))
        rid += rows
    return out


@pytest.mark.parametrize("on", [["l"], ["s"], ["rid"]])
def test_list_and_struct_columns_shuffle_exactly_as_keys_and_payload(client, on):
    """Held as canonical bytes (``table.nested``): equal lists and structs land in one
    output, and every row comes back with its exact values and types."""
    tables = nested_tables()
    outs = client.gather(shuffle(client, scatter_tables(client, tables), on, 4))
    check_shuffle(tables, outs, on, 4)
    for out in outs:
        assert out.to_arrow().schema.field("s").type == STRUCT


def test_list_and_struct_dataframe_columns_shuffle_exactly(client):
    """``shuffle_dataframe``: ArrowDtype list and struct columns as payload and as keys."""
    import dask.dataframe as dd
    import pandas as pd

    from reference_impl.shuffle import shuffle_dataframe

    whole = pa.concat_tables(nested_tables(1, 60))
    df = pd.DataFrame({
        "rid": whole.column("rid").to_numpy(),
        "l": pd.Series(pd.arrays.ArrowExtensionArray(whole.column("l")), dtype=pd.ArrowDtype(LIST)),
        "s": pd.Series(pd.arrays.ArrowExtensionArray(whole.column("s")), dtype=pd.ArrowDtype(STRUCT)),
    })
    for key in ("l", "s"):
        out = shuffle_dataframe(dd.from_pandas(df, npartitions=3), key, 3, client=client)
        parts = [p.compute() for p in out.partitions]
        got = pd.concat(parts).sort_values("rid")
        assert got.dtypes.to_dict() == df.dtypes.to_dict()
        for name in ("l", "s"):
            assert repr(pa.array(got[name]).to_pylist()) == repr(pa.array(df[name]).to_pylist()), name
        homes: dict[str, int] = {}
        for i, part in enumerate(parts):
            for value in pa.array(part[key]).to_pylist():
                assert homes.setdefault(repr(value), i) == i, f"{key} {value} in two outputs"


def test_a_categorical_travels_as_an_arrow_dictionary(client):
    """The Table holds an unordered dictionary as its values (``table.logical``); meta's
    categories and their order come back. (An ordered one is refused, naming the column: the
    lazy path carries those, as codes in meta's categories.)"""
    import dask.dataframe as dd
    import pandas as pd

    from reference_impl.shuffle import shuffle_dataframe

    dtype = pd.CategoricalDtype(["z", "a", "b"])
    df = pd.DataFrame({"k": range(40), "c": pd.Categorical(list("abz" * 13) + [None], dtype=dtype)})
    out = shuffle_dataframe(dd.from_pandas(df, npartitions=3), "k", 4, client=client)
    got = out.compute().sort_values("k").reset_index(drop=True)
    assert got["c"].dtype == dtype
    pd.testing.assert_frame_equal(got, df, check_index_type=False)


def test_shuffle_dataframe_round_trip(client):
    import dask.dataframe as dd
    import pandas as pd

    from reference_impl.shuffle import shuffle_dataframe

    rng = np.random.default_rng(3)
    df = pd.DataFrame({
        "k": rng.integers(0, 20, 300),
        "v": rng.random(300),
        "t": pd.date_range("2024-01-01", periods=300, freq="h"),
    }, index=pd.Index(np.arange(300) * 3, name="idx"))
    out = shuffle_dataframe(dd.from_pandas(df, npartitions=4), "k", 3, client=client)
    assert out.npartitions == 3
    parts = [p.compute() for p in out.partitions]
    got = pd.concat(parts).sort_index()
    pd.testing.assert_frame_equal(got, df)
    homes = {}
    for i, p in enumerate(parts):
        for k in p["k"]:
            assert homes.setdefault(k, i) == i


def test_shuffle_dataframe_without_a_client_uses_the_default_one(client):
    import dask.dataframe as dd
    import pandas as pd

    from reference_impl.shuffle import shuffle_dataframe

    assert distributed.default_client() is client
    df = pd.DataFrame({"k": np.arange(60) % 7, "v": np.arange(60.0)})
    out = shuffle_dataframe(dd.from_pandas(df, npartitions=3), "k", 2)
    got = out.compute().sort_index()
    pd.testing.assert_frame_equal(got, df)
