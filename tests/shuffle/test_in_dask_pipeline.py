"""The README's whole-pipeline example under dask's own API, run as written.

Parquet read with ``dtype_backend="pyarrow"``, two frames merged and grouped by another key
through ``in_dask.device_shuffle`` on the snippet's own ``LocalDeviceCluster``. The result
must equal pandas' (and dask's own tasks shuffle's, dtypes included), the computation must
have reached this shuffle (a scheduler plugin, added to the snippet's cluster, counts the
graphs' barriers), and the snippet's with-blocks must leave nothing running."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import dask
import dask.dataframe as dd
import pandas as pd
import psutil
import pyarrow as pa
import pytest
from distributed.core import Status

import reference_impl.shuffle
from reference_impl.shuffle.in_dask import DeviceShufflesSeen

MARKER = "- **Under dask's own API**"


def _readme_pipeline() -> str:
    """The second ```python block of the README's "Under dask's own API" part, dedented."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert MARKER in readme, f"README.md has no {MARKER!r} part"
    section = readme.split(MARKER, 1)[1]
    section = re.split(r"^(?:Status:|#)", section, maxsplit=1, flags=re.M)[0]  # up to the next part
    blocks = re.findall(r"^ *```python\n(.*?)^ *```", section, flags=re.S | re.M)
    assert len(blocks) >= 2, (
        f"README.md's {MARKER!r} part has {len(blocks)} python block(s); the second should be "
        "the whole pipeline (Parquet, merge and groupby through device_shuffle)"
    )
    return textwrap.dedent(blocks[1])


@pytest.fixture
def counted_clusters(monkeypatch):
    """``reference_impl.shuffle.LocalDeviceCluster``, as the snippet imports it, with a
    DeviceShufflesSeen plugin on each cluster's scheduler and its worker processes' pids noted."""
    made = []

    class Counted(reference_impl.shuffle.LocalDeviceCluster):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.seen = DeviceShufflesSeen()
            self.scheduler.add_plugin(self.seen, name=self.seen.name)
            self.worker_pids = [w.process.pid for w in self.workers.values()]
            made.append(self)

    monkeypatch.setattr(reference_impl.shuffle, "LocalDeviceCluster", Counted)
    return made


def _expected(path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The same pipeline in pandas, and in dask with its own tasks shuffle, no cluster."""
    orders, customers = path / "orders", path / "customers"
    left = pd.read_parquet(orders, dtype_backend="pyarrow")
    right = pd.read_parquet(customers, dtype_backend="pyarrow")
    in_pandas = left.merge(right, on="cust").groupby("region").amount.agg(["sum", "count"])
    a = dd.read_parquet(orders, dtype_backend="pyarrow")
    b = dd.read_parquet(customers, dtype_backend="pyarrow")
    with dask.config.set({"dataframe.shuffle.method": "tasks"}):
        joined = a.merge(b, on="cust", broadcast=False)
        agg = joined.groupby("region").amount.agg(["sum", "count"], split_out=2)
        in_dask = agg.compute(scheduler="sync")
    return in_pandas, in_dask


def test_the_readme_pipeline_reads_parquet_merges_and_groups_through_the_switch(
    tmp_path, counted_clusters
):
    code = _readme_pipeline()
    # not "__main__": the snippet's own `if __name__ == "__main__":` run is skipped
    scope: dict = {"__name__": "readme_pipeline"}
    exec(compile(code, "README.md (pipeline)", "exec"), scope)
    assert callable(scope.get("pipeline")), "the README's pipeline block defines no pipeline(path)"

    got = scope["pipeline"](tmp_path)

    assert len(counted_clusters) == 1, "the snippet should start one LocalDeviceCluster"
    (c,) = counted_clusters
    # both sides of the merge (by cust), then the join by region (split_out=2)
    assert len(c.seen.barriers) == 3, f"device shuffles reached the scheduler: {c.seen.barriers}"
    for name in ("orders", "customers"):
        assert len(list((tmp_path / name).glob("*.parquet"))) > 1, f"{name}: one file is no shuffle"

    in_pandas, in_dask = _expected(tmp_path)
    got = got.sort_index()
    # exactly what dask's own shuffle gives, dtypes included
    pd.testing.assert_frame_equal(got, in_dask.sort_index(), check_exact=True)
    # pyarrow-backed throughout: int64[pyarrow] values; the key as dask's read_parquet gives
    # it (pandas' large_string[pyarrow] becomes dask's string[pyarrow], with or without us)
    int64 = pd.ArrowDtype(pa.int64())
    assert got.dtypes.to_dict() == {"sum": int64, "count": int64}, got.dtypes
    assert got.index.dtype == pd.StringDtype("pyarrow"), got.index.dtype
    assert in_pandas.dtypes.to_dict() == got.dtypes.to_dict()
    want = in_pandas.set_axis(in_pandas.index.astype(got.index.dtype)).sort_index()
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    assert len(got) == 7 and int(got["count"].sum()) == 3_000

    # the with-blocks closed everything: cluster, scheduler, worker processes
    assert c.status == Status.closed, c.status
    assert c.scheduler.status == Status.closed, c.scheduler.status
    alive = [pid for pid in c.worker_pids if _running(pid)]
    assert not alive, f"worker processes {alive} still running"


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
