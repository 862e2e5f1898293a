"""Clauses 14.27 and 14.28: a shuffle method under dask's own API. Outputs carry meta's
dtypes, column order, index and names, for every dtype a pandas or Arrow-backed frame holds;
merge, groupby with ``split_out``, set_index and sort_values give the same rows, in the same
partitions, as with ``shuffle_method="tasks"``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pytest
from hypothesis import strategies as st

from conformance import conformance_id, extras, requires
from conformance.shuffle.calls import compute_partitions

if TYPE_CHECKING:  # pandas is the shuffle extra's: collecting the suite never imports it
    import pandas as pd

NPARTITIONS = 3


def _method(cluster) -> str:
    return cluster.adapter.dask_method


def _shuffled_through(cluster, collection) -> bool:
    """Whether the collection's graph has tasks of the method's phases (dask may plan an
    operation with no shuffle at all; then the method was not judged)."""
    phase_of = getattr(cluster.adapter, "phase_of", None)
    if phase_of is None:
        return True
    return any(phase_of(str(k)) for k in collection.__dask_graph__())


@st.composite
def _dtype_frames(draw):
    names = draw(st.lists(st.sampled_from(sorted(extras.frames().DTYPES)), min_size=1, max_size=4))
    return names, draw(st.sampled_from(["idx", None]))


def _meta_case(cluster, names: list[str], index: str | None) -> list[str]:
    """The problems of one frame of ``names``'s dtypes shuffled by the key; a refusal naming
    the column of the dtype is allowed (as 14.22's)."""
    import dask.dataframe as dd

    f = extras.frames()
    frame = f.frame_of(names, index)
    ddf = dd.from_pandas(frame, npartitions=2, sort=False)
    out = ddf.shuffle(f.KEY, npartitions=NPARTITIONS, shuffle_method=_method(cluster), force=True)
    try:
        parts = compute_partitions(cluster, out)
    except Exception as exc:  # a refusal must name the column it refuses
        named = [c for c in frame.columns if c != f.KEY and c != f.ROW and str(c) in str(exc)]
        return [] if named else [f"{names}: refused naming no column: {exc!r}"]
    meta = out._meta
    problems = [p for i, part in enumerate(parts) for p in f.meta_problems(part, meta, f"{names} output {i}")]
    got = f.rows_of(extras.pandas().concat(parts)) if parts else []
    if got != f.rows_of(frame):
        problems.append(f"{names}: the rows changed through the shuffle")
    return problems


@conformance_id("SHUF-META-001", clause=("14.27",))
@requires("shuffle", "shuffle.dask")
def test_outputs_carry_metas_dtypes_order_and_index(impl, shuffle_cluster, hyp_settings, record_detail):
    """Every dtype of ``conformance.shuffle.frames.DTYPES`` once (numpy, pandas' nullable, categorical
    and Arrow-backed), then hypothesis' mixes of up to four, with a named index or none.
    (Found by mutation: the lazy reference's casts to meta were reached by no clause.)"""
    from hypothesis import given

    names = sorted(extras.frames().DTYPES)
    problems = _meta_case(shuffle_cluster, names, "idx") + _meta_case(shuffle_cluster, names[::-1], None)
    assert not problems, "; ".join(problems[:6])

    @hyp_settings(shuffle=True)
    @given(_dtype_frames())
    def mixes(drawn):
        found = _meta_case(shuffle_cluster, *drawn)
        assert not found, "; ".join(found[:6])

    mixes()
    record_detail(f"{len(names)} dtypes")


def _frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    pd, f = extras.pandas(), extras.frames()
    KEY, ROW = f.KEY, f.ROW
    rng = np.random.default_rng(7)
    n = 60
    left = pd.DataFrame(
        {
            KEY: rng.integers(0, 12, n),
            "g": rng.choice(np.array(["a", "b", "c", "d"], dtype=object), n),
            "v": rng.permutation(n).astype("float64"),
            ROW: np.arange(n),
        }
    )
    right = pd.DataFrame({KEY: np.arange(12), "w": np.arange(12) * 10})
    return left, right


OPERATIONS = ("merge", "groupby", "set_index", "sort_values")


def _operation(name: str, method: str):
    import dask.dataframe as dd

    KEY, ROW = extras.frames().KEY, extras.frames().ROW
    left, right = _frames()
    a = dd.from_pandas(left, npartitions=4, sort=False)
    b = dd.from_pandas(right, npartitions=2, sort=False)
    if name == "merge":
        return a.merge(b, on=KEY, how="inner", npartitions=NPARTITIONS, shuffle_method=method, broadcast=False)
    if name == "groupby":
        return a.groupby("g").agg({"v": "sum", ROW: "count"}, split_out=NPARTITIONS, shuffle_method=method)
    if name == "set_index":
        return a.set_index("v", divisions=[0.0, 20.0, 40.0, 59.0], shuffle_method=method)
    return a.sort_values("v", npartitions=NPARTITIONS, shuffle_method=method)


def _sorted_rows(part: pd.DataFrame) -> list[tuple]:
    out = part.reset_index()
    return sorted(tuple(repr(v) for v in row) for row in out.astype(object).itertuples(index=False))


@conformance_id("SHUF-DASK-001", clause=("14.28", "14.27"))
@requires("shuffle", "shuffle.dask")
@pytest.mark.parametrize("operation", OPERATIONS)
def test_dask_operations_give_what_tasks_gives(impl, shuffle_cluster, operation, record_detail):
    """Each partition holds the rows it holds with ``shuffle_method="tasks"`` (dask's
    hashing or divisions say where a row goes, whatever moves it), the divisions are the
    same, and a sorted partition is sorted."""
    meta_problems = extras.frames().meta_problems
    method = _method(shuffle_cluster)
    got_collection = _operation(operation, method)
    assert _shuffled_through(shuffle_cluster, got_collection), f"{operation}: dask planned no {method} shuffle"
    want_collection = _operation(operation, "tasks")
    got, want = compute_partitions(shuffle_cluster, got_collection), compute_partitions(shuffle_cluster, want_collection)
    assert len(got) == len(want), f"{operation}: {len(got)} partitions, tasks gives {len(want)}"
    assert got_collection.divisions == want_collection.divisions, "divisions differ"
    problems = []
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        problems += meta_problems(g, got_collection._meta, f"{operation} partition {i}")
        if _sorted_rows(g) != _sorted_rows(w):
            problems.append(f"{operation} partition {i}: {len(g)} rows, not the {len(w)} tasks puts there")
        if operation == "sort_values" and not g["v"].is_monotonic_increasing:
            problems.append(f"sort_values partition {i} is not sorted")
        if operation == "set_index" and not g.index.is_monotonic_increasing:
            problems.append(f"set_index partition {i}'s index is not sorted")
    assert not problems, "; ".join(problems[:6])
    record_detail(f"{operation}: {len(got)} partitions as tasks'")
