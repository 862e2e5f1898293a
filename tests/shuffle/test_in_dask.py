"""The shuffle under dask's own API (``reference_impl.shuffle.in_dask``): a lazy expression
in dask's graph, reached through ``dataframe.shuffle.method = "device"``.

Each result is checked against pandas, and each test checks that the computation reached
this shuffle (a scheduler plugin counts the graphs that carried one), not dask's own."""

from __future__ import annotations

import time

import dask
import dask.dataframe as dd
import distributed
import numpy as np
import pandas as pd
import pytest
from shuffle_helpers import assert_clean, cluster

from reference_impl.shuffle import in_dask


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory):
    with (
        cluster(tmp_path_factory.mktemp("in-dask"), device_memory_limit="8 MiB", memory_limit="64 MiB") as c,
        distributed.Client(c) as client,
    ):
        in_dask.install(client)
        yield c, client


@pytest.fixture
def seen(dask_cluster):
    c, _ = dask_cluster
    plugin = in_dask.DeviceShufflesSeen()
    c.scheduler.add_plugin(plugin, name=plugin.name)
    yield plugin
    c.scheduler.remove_plugin(name=plugin.name)


def _frame(n: int = 4_000, seed: int = 0) -> pd.DataFrame:
    """With the dtypes dask gives it (its string conversion), so results compare exactly."""
    rng = np.random.default_rng(seed)
    return _as_dask_types(pd.DataFrame(
        {
            "k": rng.integers(0, 200, n),
            "x": rng.random(n),
            "s": [f"s{i % 37}" for i in range(n)],
        },
        index=pd.Index(np.arange(n) * 3, name="rid"),
    ))


def _as_dask_types(pdf: pd.DataFrame) -> pd.DataFrame:
    return dd.from_pandas(pdf, npartitions=1).compute(scheduler="sync")


def _scheduler_tasks(client) -> int:
    return client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks))


def _wait_no_tasks(client, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while (n := _scheduler_tasks(client)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert n == 0, f"{n} tasks left on the scheduler"


def test_shuffle_is_lazy_and_its_partitions_hold_whole_keys(dask_cluster, seen):
    _, client = dask_cluster
    pdf = _frame()
    ddf = dd.from_pandas(pdf, npartitions=5)
    with in_dask.device_shuffle(client):
        out = ddf.shuffle("k", npartitions=7)
        assert out.npartitions == 7
        assert _scheduler_tasks(client) == 0, "something was submitted before compute"
        parts = client.compute(out.to_delayed(), sync=True)
    assert len(seen.barriers) == 1, seen.barriers
    got = pd.concat(parts).sort_index()
    pd.testing.assert_frame_equal(got, pdf.sort_index())
    owners = {}
    for i, part in enumerate(parts):
        for k in part["k"].unique():
            assert owners.setdefault(k, i) == i, f"key {k} is in partitions {owners[k]} and {i}"
    del out, parts
    _wait_no_tasks(client)
    assert_clean(client)


def test_each_transfer_assigns_the_partitions_column_itself(dask_cluster):
    """dask's lowering assigns ``_partitions`` in a task of its own: its result, each input
    again with one more column, was stored on the worker next to the input, and with a
    tight host limit went to disk and back. Each transfer now runs it inline, so the graph
    holds no such task and every transfer reads its input partition directly."""
    _, client = dask_cluster
    ddf = dd.from_pandas(_frame(400), npartitions=3)
    with in_dask.device_shuffle(client):
        graph = dict(ddf.shuffle("k", npartitions=4).optimize().__dask_graph__())
    names = {dask.utils.key_split(k) for k in graph}
    assert "operation" not in names and "assignpartitioningindex" not in names, names
    transfers = [t for k, t in graph.items() if "-transfer-" in str(k)]
    assert len(transfers) == 3
    for t in transfers:
        assert {dask.utils.key_split(d) for d in t.dependencies} == {"frompandas"}, t.dependencies


def _reset_device_peak(dask_worker) -> int:
    dask_worker.data.device.reset_peak()
    return dask_worker.data.device.bytes_in_use()


def _device_peak(dask_worker) -> int:
    return dask_worker.data.device.peak_bytes()


def test_a_pandas_input_goes_to_the_device_a_chunk_at_a_time(tmp_path):
    """A pandas partition is no Table in the store: made one whole inside its transfer, it
    sat on the device outside the budget, next to its partitioned chunks. Each transfer now
    takes it as host Arrow and moves one chunk (a quarter of the device limit) at a time, so
    the device's peak, read from its ledger, stays well under one input."""
    rows, n_inputs = 131_072, 3  # 2 MiB inputs (two 8-byte columns), a 1 MiB device limit
    pdf = pd.DataFrame({"k": np.arange(rows * n_inputs) % 997, "x": np.arange(rows * n_inputs) * 0.5})
    input_bytes = 16 * rows
    with (
        cluster(tmp_path, device_memory_limit="1 MiB", memory_limit="256 MiB") as c,
        distributed.Client(c) as client,
    ):
        in_dask.install(client)
        before = client.run(_reset_device_peak)
        with in_dask.device_shuffle(client):
            got = dd.from_pandas(pdf, npartitions=n_inputs, sort=False).shuffle("k", npartitions=24).compute()
        peaks = {w: p - before[w] for w, p in client.run(_device_peak).items()}
        pd.testing.assert_frame_equal(got.sort_index(), pdf)
        assert all(0 < p < input_bytes // 2 for p in peaks.values()), (
            f"device peaks {peaks} against inputs of {input_bytes:,} bytes"
        )


def test_the_destinations_are_not_carried(dask_cluster):
    """Every row of output i holds i in ``_partitions``: the shuffle's schema lacks it (no
    shard holds or sends it, 8 bytes a row), and each unpack restores it where meta has it
    (the merge and groupby tests below run through that)."""
    _, client = dask_cluster
    ddf = dd.from_pandas(_frame(400), npartitions=3)
    with in_dask.device_shuffle(client):
        graph = dict(ddf.shuffle("k", npartitions=4).optimize().__dask_graph__())
    (barrier,) = [t for k, t in graph.items() if str(k).endswith("-barrier")]
    spec = barrier.args[0]
    assert spec.destination and spec.on == (in_dask.DESTINATION,)
    assert in_dask.DESTINATION not in spec.schema.names and "k" in spec.schema.names


def test_merge_and_groupby_equal_pandas(dask_cluster, seen):
    _, client = dask_cluster
    left, right = _frame(3_000, 1), _frame(2_000, 2).rename(columns={"x": "y", "s": "t"})
    a = dd.from_pandas(left.reset_index(), npartitions=4)
    b = dd.from_pandas(right.reset_index(drop=True), npartitions=3)
    with in_dask.device_shuffle(client):
        joined = a.merge(b, on="k", how="inner", shuffle_method=None, broadcast=False)
        agg = joined.groupby("k").agg({"x": "sum", "y": "max"}, split_out=3)
        got_join, got_agg = dask.compute(joined, agg)
    # the two sides of the merge; the groupby needs none: dask knows the join's outputs are
    # partitioned by k (output i holds the rows dask's hash sent to i: destinations kept)
    assert len(seen.barriers) == 2, seen.barriers
    want_join = left.reset_index().merge(right.reset_index(drop=True), on="k")
    cols = list(want_join.columns)
    pd.testing.assert_frame_equal(
        got_join[cols].sort_values(cols).reset_index(drop=True),
        want_join.sort_values(cols).reset_index(drop=True),
    )
    want_agg = want_join.groupby("k").agg({"x": "sum", "y": "max"})
    pd.testing.assert_frame_equal(got_agg.sort_index(), want_agg, check_exact=False)
    _wait_no_tasks(client)
    assert_clean(client)


def test_set_index_goes_by_dask_quantiles_and_sort_values_is_right(dask_cluster, seen):
    _, client = dask_cluster
    # Two frames: after set_index on a frame, dask may find it needs no shuffle to sort it.
    pdf, other = _frame(3_000, 3).reset_index(), _frame(3_000, 5).reset_index()
    with in_dask.device_shuffle(client):
        got_index = dd.from_pandas(pdf, npartitions=4).set_index("x", npartitions=3).compute()
        assert len(seen.barriers) == 1, seen.barriers
        # .compute() of a sort_values is no shuffle under any method: dask first concatenates
        # the input to one partition (FinalizeCompute's RepartitionToFewer is pushed below
        # the sort) and sorts it blockwise. Its partitions, computed apart, are shuffled.
        parts = client.compute(dd.from_pandas(other, npartitions=4).sort_values("x", npartitions=3).to_delayed(), sync=True)
        assert len(seen.barriers) == 2, seen.barriers
    pd.testing.assert_frame_equal(got_index, pdf.set_index("x").sort_index())
    got_sorted = pd.concat(parts)
    pd.testing.assert_frame_equal(got_sorted.reset_index(drop=True), other.sort_values("x").reset_index(drop=True))
    assert all(len(p) for p in parts), [len(p) for p in parts]
    _wait_no_tasks(client)
    assert_clean(client)


def test_values_to_dask_array_persist_and_del_as_any_collection(dask_cluster, seen):
    _, client = dask_cluster
    pdf = _frame(2_000, 4)[["k", "x"]]
    with in_dask.device_shuffle(client):
        out = dd.from_pandas(pdf, npartitions=3).shuffle("k", npartitions=4)
        values = out.values.compute()
        array = out.to_dask_array(lengths=True).compute()
        kept = out.persist()
        distributed.wait(kept)
        again = kept.compute()
    for got in (values, array):
        assert sorted(map(tuple, got.tolist())) == sorted(map(tuple, pdf.to_numpy().tolist()))
    pd.testing.assert_frame_equal(again.sort_index(), pdf.sort_index())
    assert seen.barriers, "the computations did not reach the device shuffle"
    del out, kept
    _wait_no_tasks(client)
    assert_clean(client)


class _ResultTypes(distributed.SchedulerPlugin):
    """The type of every task result the scheduler hears of, by key."""

    name = "result-types"

    def __init__(self, scheduler: distributed.Scheduler) -> None:
        self.scheduler = scheduler
        self.types: dict = {}

    def transition(self, key, start, finish, *args, **kwargs) -> None:
        if finish == "memory":
            self.types[key] = self.scheduler.tasks[key].type


def test_no_task_result_is_a_device_table(dask_cluster, seen):
    """A Table another worker fetched would land on the sender's device when workers share a
    process: the lazy graph keeps Tables inside its tasks (transfer, unpack)."""
    c, client = dask_cluster
    plugin = _ResultTypes(c.scheduler)
    c.scheduler.add_plugin(plugin, name=plugin.name)
    try:
        with in_dask.device_shuffle(client):
            dd.from_pandas(_frame(1_000, 5), npartitions=3).shuffle("k", npartitions=4).compute()
    finally:
        c.scheduler.remove_plugin(name=plugin.name)
    assert seen.barriers, "the computation did not reach the device shuffle"
    ours = {k: t for k, t in plugin.types.items() if str(k).startswith("devshuffle-")}
    assert len(ours) >= 3 + 1 + 4, ours  # transfers, the barrier, unpacks
    tables = sorted(str(k) for k, t in plugin.types.items() if "Table" in str(t))
    assert not tables, f"tasks whose result is a device Table: {tables}"


def test_outputs_are_cast_to_meta(dask_cluster):
    """Partitions whose dtypes differ from meta (int in a float column, an object column of
    only None, ``string[python]``) come back with meta's dtypes."""
    _, client = dask_cluster
    parts = [
        pd.DataFrame({"k": [1, 2], "f": [1, 2], "o": [None, None], "s": pd.array(["a", "b"], dtype="string[python]")}),
        pd.DataFrame({"k": [2, 3], "f": [0.5, 1.5], "o": ["x", None], "s": pd.array(["c", None], dtype="string[python]")}),
    ]
    meta = pd.DataFrame({
        "k": pd.Series([], dtype="int64"), "f": pd.Series([], dtype="float64"),
        "o": pd.Series([], dtype="object"), "s": pd.Series([], dtype="string[python]"),
    })  # fmt: skip
    ddf = dd.from_delayed([dask.delayed(p) for p in parts], meta=meta, verify_meta=False)
    with in_dask.device_shuffle(client):
        got = ddf.shuffle("k", npartitions=2).compute()
    assert got.dtypes.to_dict() == ddf._meta.dtypes.to_dict()  # dask's meta (strings converted)
    assert sorted(got["f"].tolist()) == [0.5, 1.0, 1.5, 2.0]
    _wait_no_tasks(client)


def test_nulls_meta_int_cannot_hold_come_back_as_the_common_type(dask_cluster, seen):
    """A left join's missing matches are NaN in a column meta says is int64: the output takes
    the common type (float64), as P2P reconciles, not an error and not meta's int64."""
    _, client = dask_cluster
    left, right = pd.DataFrame({"a": [1, 2, 3]}), pd.DataFrame({"b": [10]})
    joined = dd.from_pandas(left, npartitions=1).join(dd.from_pandas(right, npartitions=1), how="left")
    assert joined._meta["b"].dtype == np.int64  # dask's meta: int64, the values hold NaN
    with in_dask.device_shuffle(client):
        got = joined.shuffle("a", npartitions=2).compute()
    assert seen.barriers, "the computation did not reach the device shuffle"
    pd.testing.assert_frame_equal(got.sort_index(), left.join(right, how="left"))
    assert got["b"].dtype == np.float64 and got["b"].isna().sum() == 2


def test_missing_values_in_a_column_meta_says_is_bool_stay_missing(dask_cluster, seen):
    """An outer merge's unmatched rows are missing in a bool column (dask's meta: bool; the
    partitions: object). Cast to meta's bool, None became False without an error, so a
    groupby after the merge counted them as False (dask's test_shuffle_nulls_introduced)."""
    _, client = dask_cluster
    left = pd.DataFrame({"a": [True, False] * 5, "b": range(10)})
    right = pd.DataFrame({"b": [2, 3, 50], "c": [1, 2, 3]})
    joined = dd.from_pandas(left, npartitions=2).merge(dd.from_pandas(right, npartitions=1), how="outer", on="b")
    assert joined._meta["a"].dtype == np.bool_  # dask's meta: bool, the values hold None
    with in_dask.device_shuffle(client):
        got = joined.shuffle("a", npartitions=3).compute()
    assert seen.barriers, "the computation did not reach the device shuffle"
    want = left.merge(right, how="outer", on="b")
    assert got["a"].isna().sum() == want["a"].isna().sum() == 1
    assert (got["a"] == False).sum() == (want["a"] == False).sum()  # noqa: E712 - values, not identity


def test_a_partition_that_does_not_match_meta_names_the_column(dask_cluster):
    _, client = dask_cluster
    part = pd.DataFrame({"k": [1, 2]})
    meta = pd.DataFrame({"k": pd.Series([], dtype="int64"), "gone": pd.Series([], dtype="float64")})
    ddf = dd.from_delayed([dask.delayed(part)], meta=meta, verify_meta=False)
    with in_dask.device_shuffle(client), pytest.raises(TypeError, match="input partition 0 has no column 'gone', which meta has"):
        ddf.shuffle("k", npartitions=2).compute()
    _wait_no_tasks(client)
    assert_clean(client)


def test_an_unsupported_dtype_is_refused_before_anything_is_submitted(dask_cluster):
    import pyarrow as pa

    _, client = dask_cluster
    pdf = pd.DataFrame({"k": [1, 2, 3], "c": pd.Series([b"ab", b"cd", None], dtype=pd.ArrowDtype(pa.binary(2)))})
    with in_dask.device_shuffle(client), pytest.raises(TypeError, match=r"column 'c' has dtype fixed_size_binary\[2\]\[pyarrow\]"):
        dd.from_pandas(pdf, npartitions=2).shuffle("k", npartitions=2).compute()
    assert _scheduler_tasks(client) == 0


def test_the_local_scheduler_gives_one_clear_error(dask_cluster):
    _, client = dask_cluster
    ddf = dd.from_pandas(_frame(100), npartitions=2)
    with in_dask.device_shuffle(client), pytest.raises(RuntimeError, match="runs on a dask.distributed cluster"):
        ddf.shuffle("k", npartitions=2).compute(scheduler="sync")


def test_an_untested_dask_version_fails_loudly(monkeypatch):
    monkeypatch.setattr(in_dask, "_original_lower", None)
    monkeypatch.setattr(dask, "__version__", "2099.1.0")
    with pytest.raises(RuntimeError, match=r"tested with dask 2026\.8\.\*; this is dask 2099\.1\.0"):
        in_dask.install_lowering()


def test_the_readme_example_runs_through_the_switch(dask_cluster, seen):
    """The README's snippet, with its ``client``, ``left`` and ``right`` given."""
    import re
    from pathlib import Path

    _, client = dask_cluster
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("- **Under dask's own API**", 1)[1]
    code = re.findall(r"```python\n(.*?)```", section, flags=re.S)[0]
    code = "\n".join(line[2:] if line.startswith("  ") else line for line in code.splitlines())
    lpdf, rpdf = _frame(2_000, 6)[["k", "x"]], _frame(1_000, 7)[["k", "s"]]
    scope = {"client": client, "left": dd.from_pandas(lpdf, npartitions=3), "right": dd.from_pandas(rpdf, npartitions=2)}
    exec(compile(code, "README.md", "exec"), scope)
    want = lpdf.merge(rpdf, on="k").groupby("k").x.sum()
    pd.testing.assert_series_equal(scope["out"].sort_index(), want, check_exact=False)
    assert len(seen.barriers) == 2, seen.barriers  # both sides of the merge
    _wait_no_tasks(client)


def test_column_labels_that_are_not_strings_come_back_as_meta_has_them(dask_cluster, seen):
    """dask takes any hashable label; Arrow names fields by str(label): ints (and a key
    among them) go through and come back as ints."""
    _, client = dask_cluster
    pdf = pd.DataFrame({0: np.arange(300) % 7, 1: np.arange(300) * 0.5, "s": [f"v{i % 5}" for i in range(300)]})
    pdf = _as_dask_types(pdf)
    with in_dask.device_shuffle(client):
        got = dd.from_pandas(pdf, npartitions=3).shuffle(0, npartitions=4).compute()
    assert len(seen.barriers) == 1, seen.barriers
    assert list(got.columns) == [0, 1, "s"]
    pd.testing.assert_frame_equal(got.sort_index(), pdf)


def test_labels_one_name_once_made_strings_are_refused_before_anything_is_submitted(dask_cluster):
    _, client = dask_cluster
    pdf = pd.DataFrame({1: [1, 2, 3], "1": [4, 5, 6]})
    with in_dask.device_shuffle(client), pytest.raises(ValueError, match=r"column labels \[1, '1'\] are one name"):
        dd.from_pandas(pdf, npartitions=2).shuffle(1, npartitions=2).compute()
    assert _scheduler_tasks(client) == 0


def test_ignore_index_gives_a_fresh_range_index_as_dask_shuffles_do(dask_cluster, seen):
    _, client = dask_cluster
    pdf = _frame(600, 8)
    with in_dask.device_shuffle(client):
        parts = client.compute(dd.from_pandas(pdf, npartitions=3).shuffle("k", npartitions=4, ignore_index=True).to_delayed(), sync=True)
    assert len(seen.barriers) == 1, seen.barriers
    for part in parts:
        pd.testing.assert_index_equal(part.index, pd.RangeIndex(len(part)))
    got = pd.concat(parts).sort_values(["k", "x"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, pdf.sort_values(["k", "x"]).reset_index(drop=True))


def test_destinations_travel_as_integers_whatever_dask_meta_says(dask_cluster, seen):
    """set_index by a datetime index of negative freq: dask's meta types its _partitions
    column datetime64, while its values are the int64 output indices."""
    _, client = dask_cluster
    index = pd.date_range(start="2022-02-22", freq="-16h", periods=12) - pd.Timedelta(seconds=30)
    pdf = pd.DataFrame({"x": [1, 2, 3, 4] * 3, "y": range(12)}, index=index)  # no strings to convert
    ddf = dd.from_pandas(pdf, npartitions=3, sort=False)
    with in_dask.device_shuffle(client):
        got = ddf.set_index(ddf.index.dt.floor("D")).compute()
    assert len(seen.barriers) == 1, seen.barriers
    want = pdf.set_axis(pdf.index.floor("D"))
    assert got.index.is_monotonic_increasing
    pd.testing.assert_frame_equal(got.sort_values("y"), want.sort_values("y"), check_names=False, check_freq=False)


@pytest.mark.parametrize("how", ["dask series", "dask frame", "index name", "on_index"])
def test_keys_as_dask_takes_them_never_pulled_to_the_client(dask_cluster, seen, how):
    """A dask Series or DataFrame aligned with the frame, an index-level name, on_index: dask
    computes the destinations on the workers; rows with one key land in one output."""
    _, client = dask_cluster
    pdf = _frame(1_500, 9)
    ddf = dd.from_pandas(pdf, npartitions=3)
    with in_dask.device_shuffle(client):
        out = {
            "dask series": lambda: ddf.shuffle(ddf.k, npartitions=4),
            "dask frame": lambda: ddf.shuffle(ddf[["k"]], npartitions=4),
            "index name": lambda: ddf.shuffle("rid", npartitions=4),
            "on_index": lambda: ddf.shuffle(on_index=True, npartitions=4),
        }[how]()
        assert _scheduler_tasks(client) == 0, "something was submitted before compute"
        parts = client.compute(out.to_delayed(), sync=True)
    assert len(seen.barriers) == 1, seen.barriers
    pd.testing.assert_frame_equal(pd.concat(parts).sort_index(), pdf.sort_index())
    key = (lambda p: p.index) if how in ("index name", "on_index") else (lambda p: p["k"])
    owners = {}
    for i, part in enumerate(parts):
        for k in set(key(part)):
            assert owners.setdefault(k, i) == i, f"key {k} is in outputs {owners[k]} and {i}"


def test_equal_numeric_keys_of_different_dtypes_meet_in_a_join(dask_cluster, seen):
    """int64 1 on one side, float64 1.0 on the other: dask casts numeric keys to float64
    before hashing, and the device shuffle sends rows where dask's hash says, so the two
    sides of a hash join co-locate them (no match is lost)."""
    _, client = dask_cluster
    left = pd.DataFrame({"k": np.arange(400, dtype="int64") % 50, "a": np.arange(400)})
    right = pd.DataFrame({"k": np.arange(50, dtype="float64"), "b": np.arange(50) * 2})
    with in_dask.device_shuffle(client):
        got = dd.from_pandas(left, npartitions=4).merge(
            dd.from_pandas(right, npartitions=3), on="k", shuffle_method=None, broadcast=False
        ).compute()
    assert len(seen.barriers) == 2, seen.barriers
    want = left.merge(right, on="k")
    assert len(got) == len(want) == 400
    pd.testing.assert_frame_equal(got.sort_values("a").reset_index(drop=True), want.sort_values("a").reset_index(drop=True))


def _held_input(i: int) -> pd.DataFrame:
    if i == 1:  # the shuffle's run starts with input 0 and waits here for input 1
        assert distributed.Event("hold-input-1").wait(timeout=60), "never released"
    return pd.DataFrame({"k": np.arange(i * 50, i * 50 + 50), "v": np.full(50, float(i))})


def test_workers_to_close_spares_the_workers_of_a_running_shuffle(dask_cluster, seen):
    """Adaptive scaling and retire_workers ask ``workers_to_close``: a worker of a run in
    progress is not offered (closing it would restart the shuffle), and is again once the
    shuffle is done."""
    c, client = dask_cluster
    scheduler = c.scheduler
    coordinator = scheduler.plugins["device-shuffle-coordinator"]
    assert len(scheduler.workers_to_close(n=2)) == 2
    meta = _held_input(0).iloc[:0]
    ddf = dd.from_delayed([dask.delayed(_held_input)(i) for i in range(2)], meta=meta)
    with in_dask.device_shuffle(client):
        future = client.compute(ddf.shuffle("k", npartitions=2))
    try:
        deadline = time.monotonic() + 30
        while not any(s.run is not None for s in coordinator.active.values()):
            assert time.monotonic() < deadline, "the shuffle's run never started"
            time.sleep(0.02)
        assert scheduler.workers_to_close(n=2) == []
    finally:
        distributed.Event("hold-input-1", client=client).set()
    got = future.result(timeout=60)
    assert sorted(got["k"]) == list(range(100))
    assert len(seen.barriers) == 1
    deadline = time.monotonic() + 30
    while coordinator.active:
        assert time.monotonic() < deadline, "the shuffle stayed active after its result"
        time.sleep(0.02)
    assert len(scheduler.workers_to_close(n=2)) == 2
    del future
    _wait_no_tasks(client)


def test_a_collection_computed_twice_at_once_leaves_no_task(dask_cluster):
    """The second graph's shuffle (a new id, the outputs' keys shared with the first) is needed
    by nothing: it is forgotten as it arrives, not left on the scheduler (SHUF-RERUN-002)."""
    _, client = dask_cluster
    pdf = _frame(2_000)
    with in_dask.device_shuffle(client):
        out = dd.from_pandas(pdf, npartitions=4).shuffle("k", npartitions=3)
        first = client.compute(out.to_delayed())
        second = client.compute(out.to_delayed())
        a, b = client.gather(first), client.gather(second)
    for parts in (a, b):
        pd.testing.assert_frame_equal(pd.concat(parts).sort_index(), pdf.sort_index())
    assert all(x.index.equals(y.index) for x, y in zip(a, b, strict=True))
    del first, second, out
    _wait_no_tasks(client)
    assert_clean(client)


def test_a_graph_with_a_shuffle_another_compute_holds_still_runs_its_new_shuffles(dask_cluster):
    """One graph, two shuffles: one whose outputs an earlier compute already holds (forgotten as
    it arrives) and new ones, which must still register and run, wherever they come in the graph
    (the orphan is skipped, not the rest of the graph)."""
    from distributed import wait

    _, client = dask_cluster
    pdf = _frame(2_000)
    with in_dask.device_shuffle(client):
        frame = dd.from_pandas(pdf, npartitions=4)
        held = frame.shuffle("k", npartitions=3)
        new = [frame.shuffle("k", npartitions=n) for n in (2, 5)]
        first = client.compute(held.to_delayed())
        second = client.compute([*held.to_delayed(), *(d for c in new for d in c.to_delayed())])
        wait([*first, *second], timeout=60)
        parts = client.gather(second)
    got = [pd.concat(parts[:3]), pd.concat(parts[3:5]), pd.concat(parts[5:])]
    for g in got:
        pd.testing.assert_frame_equal(g.sort_index(), pdf.sort_index())
    del first, second, held, new, frame
    _wait_no_tasks(client)
    assert_clean(client)
