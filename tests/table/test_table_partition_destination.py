"""``partition_by_destination``: a column already holds each row's output (dask's
``_partitions``); rows keep their order within an output, and a bad column is refused,
naming it, before anything is allocated. The rows go through the kernels' destination mode
(``kernels.partition_by_ids``), every column and validity mask as payload: the result equals
a stable sort of the Arrow table by the column, for sliced string columns, nulls, every
integer width of the column, an empty table and one output."""

from __future__ import annotations

import numpy as np
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


def test_the_column_itself_need_not_travel(device):
    """``keep=False``: every other column grouped as with ``keep=True``, the destination
    column not among them (the lazy path restores it from the output's index instead of
    sending it), and nothing of it allocated on the device for the result."""
    t = _table(device, [2, 0, 1, 2, 0, 2], s=["a", "b", "c", "d", "e", "f"])
    kept, offsets = partition_by_destination(t, "_p", 4)
    dropped, same = partition_by_destination(t, "_p", 4, keep=False)
    assert same == offsets and dropped.column_names == ["v", "s"]
    assert dropped.to_arrow().equals(kept.to_arrow().drop_columns(["_p"]))
    assert dropped.nbytes == kept.nbytes - kept.select(["_p"]).nbytes
    only, _ = partition_by_destination(t.select(["_p"]), "_p", 4, keep=False)
    assert (only.column_names, only.num_rows) == ([], 6)


@pytest.mark.parametrize(
    ("column", "error", "message"),
    [
        (pa.array([0, 3], pa.int64()), ValueError, r"destination column '_p' holds 3 at row 1, outside \[0, 3\) for 3 partitions"),
        (pa.array([-1, 0], pa.int32()), ValueError, r"destination column '_p' holds -1 at row 0, outside \[0, 3\)"),
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


def _reference(t: pa.Table, column: str, npartitions: int) -> tuple[pa.Table, list[int]]:
    """The rows of ``t`` stably sorted by ``column``, and the offsets of each output."""
    dest = t.column(column).to_numpy()
    counts = np.bincount(dest.astype(np.int64), minlength=npartitions)
    return t.take(np.argsort(dest, kind="stable")), [0, *np.cumsum(counts).tolist()]


@pytest.mark.parametrize("dtype", [pa.uint8(), pa.int16(), pa.int32(), pa.uint32(), pa.int64()])
def test_every_column_and_mask_goes_with_its_row(device, dtype):
    rng = np.random.default_rng(5)
    n, rows = 5, 403
    words = ["", "a", "héllo", "日本語", "x" * 30]
    arrow = pa.table({
        "s": pa.array([None if i % 7 == 0 else words[i % 5] for i in range(rows)]),
        "_p": pa.array(rng.integers(0, n, rows), dtype),
        "f": pa.array(rng.random(rows), mask=rng.random(rows) < 0.2),
        "t": pa.array([words[(3 * i) % 5] for i in range(rows)], pa.large_string()),
        "b": pa.array(rng.random(rows) < 0.5),
    }).slice(3)  # sliced: string offsets do not start at 0
    t = Table.from_arrow(arrow, device)
    grouped, offsets = partition_by_destination(t, "_p", n)
    want, want_offsets = _reference(arrow, "_p", n)
    assert offsets == want_offsets
    assert grouped.column_names == t.column_names and grouped.num_rows == t.num_rows
    assert grouped.to_arrow().equals(want)


def test_an_empty_table_gives_empty_outputs(device):
    t = Table.from_arrow(pa.table({"_p": pa.array([], pa.int64()), "s": pa.array([], pa.string())}),
                         device)
    grouped, offsets = partition_by_destination(t, "_p", 3)
    assert offsets == [0, 0, 0, 0]
    assert grouped.num_rows == 0 and grouped.to_arrow().schema == t.to_arrow().schema


def test_one_output_keeps_the_input_order(device):
    t = _table(device, [0] * 5, s=["e", "d", "c", "b", "a"])
    grouped, offsets = partition_by_destination(t, "_p", 1)
    assert offsets == [0, 5]
    assert grouped.to_arrow().to_pydict()["s"] == ["e", "d", "c", "b", "a"]


def test_the_rows_go_through_the_kernels(device, monkeypatch):
    """One ``kernels.partition_by_ids`` call scatters every column and mask as payload,
    the destination column included."""
    from reference_impl import kernels

    calls = []
    real = kernels.partition_by_ids

    def spy(dev, ids, payload, npartitions, **kw):
        calls.append(sorted(payload))
        return real(dev, ids, payload, npartitions, **kw)

    monkeypatch.setattr(kernels, "partition_by_ids", spy)
    t = Table.from_arrow(pa.table({"_p": [1, 0], "v": pa.array([1, None])}), device)
    grouped, offsets = partition_by_destination(t, "_p", 2)
    assert calls == [["data:_p", "data:v", "valid:v"]]
    assert grouped.to_arrow().to_pydict() == {"_p": [0, 1], "v": [None, 1]}
