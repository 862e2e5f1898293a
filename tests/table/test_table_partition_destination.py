"""``partition_by_destination``: a column already holds each row's output (dask's
``_partitions``); rows keep their order within an output, and a bad column is refused,
naming it, before anything is allocated."""

from __future__ import annotations

import pyarrow as pa
import pytest

from reference_impl.device import SimDevice
from reference_impl.table import Table
from reference_impl.table.partition import partition_by_destination


@pytest.fixture
def device():
    return SimDevice("16 MiB")


def _table(device, dest, **more) -> Table:
    return Table.from_arrow(pa.table({"_p": dest, "v": list(range(len(dest))), **more}), device)


def test_rows_go_where_the_column_says_in_their_order(device):
    t = _table(device, [2, 0, 1, 2, 0, 2], s=["a", "b", "c", "d", "e", "f"])
    grouped, offsets = partition_by_destination(t, "_p", 4)
    assert offsets == [0, 2, 3, 6, 6]  # output 3 is empty
    got = grouped.to_arrow().to_pydict()
    assert got["_p"] == [0, 0, 1, 2, 2, 2]
    assert got["v"] == [1, 4, 2, 0, 3, 5]  # stable within each output
    assert got["s"] == ["b", "e", "c", "a", "d", "f"]


@pytest.mark.parametrize(
    ("column", "error", "message"),
    [
        (pa.array([0, 3], pa.int64()), ValueError, r"destination column '_p' holds 3, outside \[0, 3\) for 3 outputs"),
        (pa.array([-1, 0], pa.int32()), ValueError, r"destination column '_p' holds -1, outside \[0, 3\)"),
        (pa.array([0, None], pa.int64()), ValueError, "destination column '_p' has nulls"),
        (pa.array([0.0, 1.0]), TypeError, "destination column '_p' must hold integers, not double"),
    ],
)
def test_a_bad_destination_column_is_named_and_nothing_is_allocated(device, column, error, message):
    t = Table.from_arrow(pa.table({"_p": column, "v": [1, 2]}), device)
    before = device.bytes_in_use()
    device.reset_peak()
    with pytest.raises(error, match=message):
        partition_by_destination(t, "_p", 3)
    assert device.peak_bytes() == before, "something was allocated before the refusal"
    assert t.to_arrow().column("v").to_pylist() == [1, 2]  # the input is intact
