"""Dtypes a Table cannot hold, through the lazy shuffle (``reference_impl.shuffle.carriers``):
categoricals, float16, dates, times, decimals, Arrow dictionaries, lists, structs and maps
carried and restored to meta's exact dtypes; everything else refused on the client before
anything is submitted.

Each carried result is checked against pandas with exact dtypes, nulls included, and each
test checks that the computation reached this shuffle (``seen.barriers``)."""

from __future__ import annotations

import decimal

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import test_in_dask
from shuffle_helpers import assert_clean
from test_in_dask import _scheduler_tasks, _wait_no_tasks

from reference_impl.shuffle import in_dask
from reference_impl.table.dtypes import SUPPORTED

dask_cluster = test_in_dask.dask_cluster  # test_in_dask's fixtures (a cluster for this module)
seen = test_in_dask.seen

CAT = pd.CategoricalDtype(["z", "b", "a", "unused"], ordered=True)  # not sorted, one never used


def _categorical_frame(n: int = 600, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    values = rng.choice(np.array(["a", "b", "z", None], dtype=object), n)
    return pd.DataFrame(
        {"c": pd.Categorical(values, dtype=CAT), "x": rng.random(n)},
        index=pd.Index(np.arange(n) * 2, name="rid"),
    )


def _partitions(client, collection) -> list[pd.DataFrame]:
    return client.compute(collection.to_delayed(), sync=True)


def test_a_known_categorical_key_shuffles_with_meta_categories_and_order(dask_cluster, seen):
    _, client = dask_cluster
    pdf = _categorical_frame()
    with in_dask.device_shuffle(client):
        parts = _partitions(client, dd.from_pandas(pdf, npartitions=4).shuffle("c", npartitions=3))
    assert len(seen.barriers) == 1, seen.barriers
    for part in parts:  # each output has exactly meta's categories, their order and ordered
        assert part["c"].dtype == CAT and list(part["c"].cat.categories) == list(CAT.categories)
    owners: dict = {}
    for i, part in enumerate(parts):
        for value in part["c"].astype(object).unique():
            assert owners.setdefault(value, i) == i, f"{value!r} in partitions {owners[value]} and {i}"
    got = pd.concat(parts).sort_index()
    pd.testing.assert_frame_equal(got, pdf.sort_index())
    assert got["c"].isna().sum() == pdf["c"].isna().sum() > 0
    assert (got["c"] < "a").tolist() == (pdf.sort_index()["c"] < "a").tolist()  # the order kept
    _wait_no_tasks(client)
    assert_clean(client)


def test_a_merge_on_a_categorical_key_equals_pandas(dask_cluster, seen):
    _, client = dask_cluster
    left = _categorical_frame(500, 1).reset_index()
    right = _categorical_frame(300, 2).reset_index(drop=True).rename(columns={"x": "y"})
    a, b = dd.from_pandas(left, npartitions=3), dd.from_pandas(right, npartitions=2)
    with in_dask.device_shuffle(client):
        got = a.merge(b, on="c", how="inner", shuffle_method=None, broadcast=False).compute()
    assert len(seen.barriers) == 2, seen.barriers  # the two sides of the merge
    want = left.merge(right, on="c")
    cols = list(want.columns)
    assert got["c"].dtype == CAT
    pd.testing.assert_frame_equal(
        got[cols].sort_values(["rid", "y"]).reset_index(drop=True),
        want.sort_values(["rid", "y"]).reset_index(drop=True),
    )
    _wait_no_tasks(client)
    assert_clean(client)


def test_a_categorical_index_comes_back_with_meta_categories(dask_cluster, seen):
    _, client = dask_cluster
    rng = np.random.default_rng(3)
    pdf = pd.DataFrame(
        {"k": rng.integers(0, 30, 400), "x": rng.random(400)},
        index=pd.CategoricalIndex(rng.choice(["p", "q", "r"], 400), categories=["r", "q", "p"], name="ci"),
    )
    with in_dask.device_shuffle(client):
        parts = _partitions(client, dd.from_pandas(pdf, npartitions=3).shuffle("k", npartitions=4))
    assert len(seen.barriers) == 1, seen.barriers
    assert all(p.index.dtype == pdf.index.dtype for p in parts), [p.index.dtype for p in parts]
    got = pd.concat(parts)
    pd.testing.assert_frame_equal(got.sort_values("x"), pdf.sort_values("x"))
    _wait_no_tasks(client)


def test_unknown_categories_come_back_as_the_values_present(dask_cluster, seen):
    """dask's unknown categories: each output's categories are those of its values."""
    _, client = dask_cluster
    pdf = _categorical_frame(400, 4)
    pdf["c"] = pdf["c"].cat.as_unordered()
    ddf = dd.from_pandas(pdf, npartitions=3)
    ddf = ddf.assign(c=ddf["c"].cat.as_unknown())
    with in_dask.device_shuffle(client):
        parts = _partitions(client, ddf.shuffle("c", npartitions=3))
    assert len(seen.barriers) == 1, seen.barriers
    for part in parts:
        present = sorted(part["c"].dropna().astype(str).unique())
        assert isinstance(part["c"].dtype, pd.CategoricalDtype) and not part["c"].cat.ordered
        assert list(part["c"].cat.categories) == present
    got = pd.concat(parts).sort_index()
    want = pdf.sort_index()
    pd.testing.assert_series_equal(got["c"].astype(object), want["c"].astype(object))
    pd.testing.assert_series_equal(got["x"], want["x"])
    _wait_no_tasks(client)


@pytest.mark.parametrize(
    "categories",
    [
        [7, -(2**63), 0, 2**62],
        [0.5, -0.0, float("inf")],
        [pd.Timestamp("2001-01-01", tz="Asia/Tokyo"), pd.Timestamp(1, tz="Asia/Tokyo")],
    ],
    ids=["int64", "float64", "datetime-tz"],
)
def test_unknown_categories_of_any_type_come_back_exactly(dask_cluster, seen, categories):
    """What dask users hold after read_parquet: unknown categories of ints, floats or
    timestamps. A carrier that only took strings refused these (found by the conformance
    front end holding Arrow dictionaries as categoricals: SHUF-DTYPE-001)."""
    _, client = dask_cluster
    rng = np.random.default_rng(5)
    picks = rng.integers(-1, len(categories), 300)  # -1: null
    values = pd.Categorical.from_codes(picks, categories=categories)
    pdf = pd.DataFrame({"c": values, "k": rng.integers(0, 20, 300)})
    ddf = dd.from_pandas(pdf, npartitions=3)
    ddf = ddf.assign(c=ddf["c"].cat.as_unknown())
    with in_dask.device_shuffle(client):
        parts = _partitions(client, ddf.shuffle("k", npartitions=4))
    assert len(seen.barriers) == 1, seen.barriers
    for part in parts:
        assert part["c"].cat.categories.dtype == values.categories.dtype, part["c"].dtype
        assert set(part["c"].cat.categories) == set(part["c"].dropna())
    got = pd.concat(parts).sort_index()
    pd.testing.assert_series_equal(got["c"].astype(object), pdf["c"].astype(object))
    _wait_no_tasks(client)


def test_an_unknown_category_tag_round_trips_exactly():
    from reference_impl.shuffle.carriers import _tag, _untag

    for value in ["", "s:x", "p:x", "héllo", 1, -0.0, float("nan"), pd.Timestamp(1, tz="UTC"), (1, "a")]:
        back = _untag(_tag(value))
        assert type(back) is type(value) and (back == value or (back != back and value != value))
    assert _tag("p:AAA") != _tag(pd.Timestamp(0)), "a string never reads as a pickle"


def test_ordered_unknown_categories_are_refused_before_anything_is_submitted(dask_cluster):
    _, client = dask_cluster
    ddf = dd.from_pandas(_categorical_frame(50), npartitions=2)
    ddf = ddf.assign(c=ddf["c"].cat.as_unknown())
    with in_dask.device_shuffle(client), pytest.raises(TypeError) as info:
        ddf.shuffle("x", npartitions=2).compute()
    assert str(info.value).startswith(
        "column 'c' has dtype category, which the shuffle does not support: an ordered "
        "categorical with unknown categories"
    )
    assert _scheduler_tasks(client) == 0


def test_a_value_outside_meta_categories_names_the_column(dask_cluster):
    _, client = dask_cluster
    meta = pd.DataFrame({"k": pd.Series([], dtype="int64"), "c": pd.Categorical([], dtype=CAT)})
    part = pd.DataFrame({"k": [1, 2], "c": pd.Categorical(["a", "q"])})
    ddf = dd.from_delayed([dask.delayed(part)], meta=meta, verify_meta=False)
    with in_dask.device_shuffle(client), pytest.raises(TypeError) as info:
        ddf.shuffle("k", npartitions=2).compute()
    assert str(info.value).startswith(
        "input partition 0: column 'c' has dtype category, which cannot be carried as meta's "
        "category: values ['q'] are not among meta's categories ['z', 'b', 'a', 'unused']"
    )
    _wait_no_tasks(client)
    assert_clean(client)


def _arrow(values: list, type_: pa.DataType) -> pd.api.extensions.ExtensionArray:
    return pd.arrays.ArrowExtensionArray(pa.array(values, type_))


def _widened_frame(n: int = 500, seed: int = 5) -> pd.DataFrame:
    """float16 (numpy and Arrow), dates, times and decimals, every one with nulls (and NaNs)."""
    rng = np.random.default_rng(seed)
    null = rng.random(n) < 0.2
    halves = rng.standard_normal(n).astype(np.float16)
    halves[rng.random(n) < 0.1] = np.nan
    days = [None if z else int(d) for z, d in zip(null, rng.integers(-20_000, 40_000, n), strict=True)]
    big = [None if z else decimal.Decimal(int(v)).scaleb(-10) for z, v in zip(null, rng.integers(-(10**18), 10**18, n), strict=True)]
    return pd.DataFrame(
        {
            "k": rng.integers(0, 40, n),
            "h": halves,
            "ah": _arrow([None if z else float(v) for z, v in zip(null, halves, strict=True)], pa.float16()),
            "d": pd.arrays.ArrowExtensionArray(pa.array(days, pa.int32()).cast(pa.date32())),
            "m": _arrow(big, pa.decimal128(38, 10)),
            "w": _arrow([None if v is None else v * 10**20 for v in big], pa.decimal256(60, 10)),
            "d64": _arrow([None if d is None else d * 86_400_000 for d in days], pa.int64()).astype(
                pd.ArrowDtype(pa.date64())
            ),
            "t32": _arrow([None if d is None else d % 86_400 for d in days], pa.int32()).astype(
                pd.ArrowDtype(pa.time32("s"))
            ),
            "t64": _arrow([None if d is None else (d % 86_400) * 10**9 + 7 for d in days], pa.int64()).astype(
                pd.ArrowDtype(pa.time64("ns"))
            ),
            "m32": _arrow([None if d is None else decimal.Decimal(d).scaleb(-2) for d in days], pa.decimal32(9, 2)),
            "m64": _arrow(big, pa.decimal64(18, 10)),
            # an ArrowDtype of a dictionary: pandas cannot read its name back from metadata
            "dict": pd.arrays.ArrowExtensionArray(
                pa.DictionaryArray.from_arrays(
                    pa.array(
                        [None if z else int(d) % 5 for z, d in zip(null, days, strict=True)],
                        pa.int16(),
                    ),
                    ["q", "r", "s", "t", "u"],
                )
            ),
        },
        index=pd.Index(np.arange(n), name="rid"),
    )


def test_float16_dates_times_decimals_and_dictionaries_round_trip_with_nulls(dask_cluster, seen):
    _, client = dask_cluster
    pdf = _widened_frame()
    assert pdf["ah"].isna().any() and np.isnan(pdf["h"]).any() and pdf["d"].isna().any()
    with in_dask.device_shuffle(client):
        got = dd.from_pandas(pdf, npartitions=4).shuffle("k", npartitions=3).compute()
    assert len(seen.barriers) == 1, seen.barriers
    assert got.dtypes.to_dict() == pdf.dtypes.to_dict()
    pd.testing.assert_frame_equal(got.sort_index(), pdf, check_exact=True)
    _wait_no_tasks(client)
    assert_clean(client)


def _nested_frame(n: int = 300, seed: int = 2) -> pd.DataFrame:
    """ArrowDtype lists, large lists, fixed-size lists, structs and maps: nulls at every
    level, empties, -0.0 and NaN, extremes, a logical type inside."""
    rng = np.random.default_rng(seed)
    lists = [[1], [], None, [None], [2**63 - 1, -(2**63)]]
    structs = [
        {"a": 1, "b": "x", "c": [-0.0, float("nan")], "d": decimal.Decimal("1.50")},
        None,
        {"a": None, "b": None, "c": None, "d": None},
        {"a": -5, "b": "", "c": [None], "d": decimal.Decimal("-0.01")},
    ]
    pairs = [[2.5, None], None, [-0.0, float("inf")]]
    maps = [[("k", [1])], None, [], [("a", None), ("a", [])]]
    struct = pa.struct([("a", pa.int64()), ("b", pa.string()), ("c", pa.list_(pa.float64())), ("d", pa.decimal128(5, 2))])

    def column(pool: list, type_: pa.DataType) -> pd.arrays.ArrowExtensionArray:
        return pd.arrays.ArrowExtensionArray(pa.array([pool[i] for i in rng.integers(0, len(pool), n)], type_))

    return pd.DataFrame(
        {
            "k": rng.integers(0, 30, n),
            "l": column(lists, pa.list_(pa.int64())),
            "ll": column([["é", None], None, []], pa.large_list(pa.string())),
            "f": column(pairs, pa.list_(pa.float32(), 2)),
            "s": column(structs, struct),
            "m": column(maps, pa.map_(pa.string(), pa.list_(pa.int8()))),
        },
        index=pd.Index(np.arange(n), name="rid"),
    )


def test_list_struct_and_map_columns_round_trip_exactly(dask_cluster, seen):
    """Carried as the bytes the Table holds them as (``table.nested``), restored to meta's
    exact ArrowDtypes; compared by repr, so -0.0 and NaN count."""
    _, client = dask_cluster
    pdf = _nested_frame()
    with in_dask.device_shuffle(client):
        got = dd.from_pandas(pdf, npartitions=4).shuffle("k", npartitions=3).compute()
    assert len(seen.barriers) == 1, seen.barriers
    assert got.dtypes.to_dict() == pdf.dtypes.to_dict()
    got = got.sort_index()
    assert got.index.equals(pdf.index) and got["k"].equals(pdf["k"])
    for name in ("l", "ll", "f", "s", "m"):
        assert repr(pa.array(got[name]).to_pylist()) == repr(pa.array(pdf[name]).to_pylist()), name
    _wait_no_tasks(client)
    assert_clean(client)


def test_a_nested_column_holding_what_cannot_travel_is_refused_before_anything_is_submitted(dask_cluster):
    _, client = dask_cluster
    type_ = pa.list_(pa.struct([("raw", pa.binary(2))]))
    pdf = pd.DataFrame({"k": [1, 2, 3], "l": pd.arrays.ArrowExtensionArray(pa.array([[{"raw": b"ab"}], None, []], type_))})
    with in_dask.device_shuffle(client), pytest.raises(TypeError) as info:
        dd.from_pandas(pdf, npartitions=2).shuffle("k", npartitions=2).compute()
    assert str(info.value) == (
        f"column 'l' has dtype {pdf['l'].dtype}, which the shuffle does not support: it has "
        f"unsupported type {type_} (field 'item.raw' is fixed_size_binary[2]); supported: {SUPPORTED}"
    )
    assert _scheduler_tasks(client) == 0


def test_an_ordered_arrow_dictionary_is_refused_before_anything_is_submitted(dask_cluster):
    """Its order lives in a dictionary each output rebuilds (the Table's rule, one place)."""
    _, client = dask_cluster
    ordered = pa.DictionaryArray.from_arrays(
        pa.array([0, 1, 0], pa.int8()), ["lo", "hi"], ordered=True
    )
    pdf = pd.DataFrame({"k": [1, 2, 3], "o": pd.arrays.ArrowExtensionArray(ordered)})
    with in_dask.device_shuffle(client), pytest.raises(TypeError) as info:
        dd.from_pandas(pdf, npartitions=2).shuffle("k", npartitions=2).compute()
    assert str(info.value) == (
        f"column 'o' has dtype {pdf['o'].dtype}, which the shuffle does not support: it is an "
        "ordered dictionary (dictionary<values=string, indices=int8, ordered=1>): its order lives "
        "in a dictionary each output rebuilds from the values it holds; cast it to its values first"
    )
    assert _scheduler_tasks(client) == 0


def test_an_object_column_of_arrays_is_named_with_its_partition(dask_cluster):
    """An empty meta says only ``object`` (held as strings): its arrays show in a partition."""
    _, client = dask_cluster
    pdf = pd.DataFrame({"k": [1, 2, 3], "o": [np.array([1]), np.array([2]), None]})
    with dask.config.set({"dataframe.convert-string": False}):
        ddf = dd.from_pandas(pdf, npartitions=1)
        with in_dask.device_shuffle(client), pytest.raises(TypeError) as info:
            ddf.shuffle("k", npartitions=2).compute()
    assert str(info.value).startswith(
        "input partition 0: column 'o' has dtype object, which cannot be cast to meta's string"
    )
    _wait_no_tasks(client)
    assert_clean(client)


def test_an_object_column_of_python_lists_says_which_dtype_would_carry_it(dask_cluster):
    """An object column's meta is empty (dask's), so it cannot say the lists' Arrow type,
    which every input must share; the error says which ArrowDtype would carry them."""
    _, client = dask_cluster
    pdf = pd.DataFrame({"k": [1, 2, 3], "o": [[1], [2, 3], None]})
    with dask.config.set({"dataframe.convert-string": False}):
        ddf = dd.from_pandas(pdf, npartitions=1)
        with in_dask.device_shuffle(client), pytest.raises(TypeError) as info:
            ddf.shuffle("k", npartitions=2).compute()
    message = str(info.value)
    assert message.startswith("input partition 0: column 'o' has dtype object, which cannot be cast to meta's string")
    assert message.endswith(
        "; its values are list<item: int64>, which an object column's meta cannot name: give "
        "the column that dtype (pd.ArrowDtype) to shuffle them"
    )
    _wait_no_tasks(client)
    assert_clean(client)
    pdf["o"] = pdf["o"].astype(pd.ArrowDtype(pa.list_(pa.int64())))
    with in_dask.device_shuffle(client):
        got = dd.from_pandas(pdf, npartitions=2).shuffle("k", npartitions=2).compute()
    assert got.sort_index()["o"].tolist() == pdf["o"].tolist()


def test_a_sliced_struct_with_null_fields_is_carried_without_a_cast():
    """pyarrow 26's cast of a sliced struct with null-typed fields to its own type gives an
    invalid array; the carrier casts only to another type (found by SHUF-DTYPE-003 on the
    lazy path)."""
    from reference_impl.shuffle.carriers import _carry_logical
    from reference_impl.table.logical import restore_column

    type_ = pa.struct([("a", pa.list_(pa.null())), ("b", pa.null()), ("c", pa.int64())])
    whole = pa.array([{"a": [None] * (i % 3), "b": None, "c": i} for i in range(5)], type_)
    sliced = whole.slice(2)
    with pytest.raises(pa.ArrowInvalid):  # the upstream bug; when it goes, this guard is moot
        sliced.cast(type_).validate(full=True)
    series = pd.Series(pd.arrays.ArrowExtensionArray(sliced))
    held = pa.array(_carry_logical(series, pd.ArrowDtype(type_)))
    back = restore_column(pa.chunked_array([held]), type_)
    assert back.to_pylist() == sliced.to_pylist()


def test_an_all_null_arrow_column_comes_back_null_typed(dask_cluster, seen):
    """``pd.ArrowDtype(pa.null())``, what an all-None column read with the Arrow backend is:
    it was 'unsupported type null' (issue 26); now carried as an all-null int8."""
    _, client = dask_cluster
    pdf = pd.DataFrame(
        {"k": np.arange(40) % 7, "n": pd.Series([None] * 40, dtype=pd.ArrowDtype(pa.null()))}
    )
    with in_dask.device_shuffle(client):
        parts = _partitions(client, dd.from_pandas(pdf, npartitions=3).shuffle("k", npartitions=4))
    assert len(seen.barriers) == 1, seen.barriers
    assert all(p["n"].dtype == pd.ArrowDtype(pa.null()) for p in parts), [p["n"].dtype for p in parts]
    got = pd.concat(parts).sort_index()
    pd.testing.assert_frame_equal(got, pdf)
    _wait_no_tasks(client)


def test_the_cast_error_names_the_failing_column_past_columns_with_nan_that_cast(dask_cluster):
    """pandas marks missing values with NaN: in an object column of strings (read_csv), and
    in a float partition of a column meta says is int64 (which comes back float64, P2P's
    rule). Both cast, so the diagnosis must pass over them and name the column that does
    not."""
    _, client = dask_cluster
    meta = pd.DataFrame({
        "k": pd.Series([], dtype="int64"),
        "s": pd.Series([], dtype=object),
        "n": pd.Series([], dtype="int64"),
        "o": pd.Series([], dtype="float64"),
    })
    part = pd.DataFrame(
        {"k": [1, 2, 3], "s": ["a", np.nan, "c"], "n": [1.0, np.nan, 3.0], "o": ["x", "y", "z"]}
    )
    with dask.config.set({"dataframe.convert-string": False}):
        ddf = dd.from_delayed([dask.delayed(part)], meta=meta, verify_meta=False)
        with in_dask.device_shuffle(client), pytest.raises(TypeError) as info:
            ddf.shuffle("k", npartitions=2).compute()
    assert str(info.value).startswith(
        f"input partition 0: column 'o' has dtype {part['o'].dtype}, which cannot be cast to "
        "meta's double"
    )
    _wait_no_tasks(client)
    assert_clean(client)


@pytest.mark.parametrize(("name", "named"), [(None, "index"), ("when", "index 'when'")])
def test_an_index_arrow_cannot_hold_is_named_as_the_index(dask_cluster, name, named):
    _, client = dask_cluster
    pdf = pd.DataFrame({"k": [1, 2, 3]}, index=pd.Index([1 + 1j, 2, 3], name=name))
    with in_dask.device_shuffle(client), pytest.raises(TypeError) as info:
        dd.from_pandas(pdf, npartitions=1).shuffle("k", npartitions=2).compute()
    assert str(info.value).startswith(f"{named} has dtype complex128, which Arrow cannot hold")
    assert _scheduler_tasks(client) == 0


def test_an_output_keeps_arrow_columns_arrow_and_a_type_numpy_columns_share_converts_as_before():
    """``to_frame`` keeps Arrow types meta holds as ``pd.ArrowDtype`` as Arrow (no numpy round
    trip); int64 is also a numpy column's type here, so it converts as before: with a null,
    int64 meta comes back float64 (P2P's common-type rule), the Arrow one keeps its null."""
    from reference_impl import Table
    from reference_impl.device import SimDevice
    from reference_impl.shuffle.frames import to_frame

    data = pa.table({
        "a": pa.array([1, None, 3], pa.int64()),
        "b": pa.array([4, None, 6], pa.int64()),
        "s": pa.array(["x", None, "z"]),
        "f": pa.array([0.5, None, 1.5]),
    })  # fmt: skip
    meta = pd.DataFrame({
        "a": pd.Series([], dtype=pd.ArrowDtype(pa.int64())),
        "b": pd.Series([], dtype="int64"),
        "s": pd.Series([], dtype=pd.ArrowDtype(pa.string())),
        "f": pd.Series([], dtype=pd.ArrowDtype(pa.float64())),
    })  # fmt: skip
    out = to_frame(Table.from_arrow(data, SimDevice("1 MiB")), meta)
    assert out.dtypes.to_dict() == {
        "a": pd.ArrowDtype(pa.int64()), "b": np.dtype("float64"),
        "s": pd.ArrowDtype(pa.string()), "f": pd.ArrowDtype(pa.float64()),
    }  # fmt: skip
    assert out["a"].isna().tolist() == [False, True, False]
    assert out["s"].tolist()[::2] == ["x", "z"] and out["f"].isna().sum() == 1
    assert np.isnan(out["b"][1]) and out["b"][2] == 6.0


def test_a_multiindex_from_delayed_meta_round_trips_and_its_levels_are_checked(dask_cluster, seen):
    """dask holds no MultiIndex itself (from_pandas refuses one), but a from_delayed meta can
    have one: its levels come back, and a level the shuffle cannot hold or carry is named
    before anything is submitted."""
    _, client = dask_cluster
    part = pd.DataFrame(
        {"a": [1, 2, 3, 4], "b": ["x", "y", "z", "w"], "k": [1, 2, 3, 4], "v": [0.5, 1.5, 2.5, 3.5]}
    ).set_index(["a", "b"])
    ddf = dd.from_delayed([dask.delayed(part)], meta=part.iloc[:0], verify_meta=False)
    with in_dask.device_shuffle(client):
        got = ddf.shuffle("k", npartitions=2).compute()
    pd.testing.assert_frame_equal(got.sort_values("k"), part)
    assert len(seen.barriers) == 1

    for dtype, why in [
        ("complex128", "which Arrow cannot hold"),
        ("category", "which the shuffle carries only as a column or a single index"),
    ]:
        bad = part.reset_index()
        bad["b"] = np.arange(4) * 1j if dtype == "complex128" else bad["b"].astype("category")
        bad = bad.set_index(["a", "b"])
        ddf = dd.from_delayed([dask.delayed(bad)], meta=bad.iloc[:0], verify_meta=False)
        with in_dask.device_shuffle(client), pytest.raises(TypeError) as info:
            ddf.shuffle("k", npartitions=2).compute()
        assert str(info.value).startswith(f"index level 'b' has dtype {dtype}, {why}")
    assert _scheduler_tasks(client) == 0


@pytest.mark.parametrize("type_", [pa.list_(pa.int64()), pa.struct([("a", pa.int64())])])
def test_a_nested_key_is_refused_naming_the_column_before_anything_is_submitted(dask_cluster, type_):
    """dask hashes shuffle keys with pandas, which cannot hash lists or structs (its tasks
    shuffle fails inside a task with "unhashable type"); the device method says so first."""
    _, client = dask_cluster
    values = [[1], [2, 3], None, [1]] if pa.types.is_list(type_) else [{"a": 1}, {"a": 2}, None, {"a": 1}]
    pdf = pd.DataFrame({"n": pd.Series(values, dtype=pd.ArrowDtype(type_)), "v": [1, 2, 3, 4]})
    with in_dask.device_shuffle(client), pytest.raises(TypeError) as info:
        dd.from_pandas(pdf, npartitions=2).shuffle("n", npartitions=2).compute()
    assert str(info.value) == (
        f"column 'n' has dtype {pdf['n'].dtype}: dask hashes shuffle keys with pandas, which "
        "cannot hash list, struct or map values; shuffle by a flat column made from it"
    )
    assert _scheduler_tasks(client) == 0
    with in_dask.device_shuffle(client):  # as payload it travels
        got = dd.from_pandas(pdf, npartitions=2).shuffle("v", npartitions=2).compute()
    assert got.sort_values("v")["n"].tolist() == pdf["n"].tolist()
