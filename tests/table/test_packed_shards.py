"""The shuffle's packed shards (reference_impl.shuffle.packed) on every column type: the
shards of two inputs, packed from grouped partitions, kept in output buffers written to
their files at random points, and built back, give each output's rows in input order."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from table_asserts import assert_identical
from test_table_partition import keyed_tables

from reference_impl import SimDevice, Table
from reference_impl.shuffle.buffers import RunBuffers
from reference_impl.shuffle.limiter import HostBudget
from reference_impl.shuffle.packed import build, pack_grouped
from reference_impl.table.partition import partition_grouped, partition_table


@given(case=keyed_tables(), n=st.integers(1, 5), cut=st.floats(0, 1), data=st.data())
def test_packed_shards_build_each_output_in_input_order(tmp_path_factory, case, n, cut, data):
    table, nkeys = case
    dev = SimDevice("16 MiB")
    on = table.column_names[:nkeys]
    h = int(table.num_rows * cut)
    inputs = [Table.from_arrow(table.slice(0, h), dev), Table.from_arrow(table.slice(h), dev)]
    # input 1 first: the unpack must order shards by input, not by arrival
    bufs = RunBuffers("s", "w", str(tmp_path_factory.mktemp("packed")), HostBudget(lambda: None))
    for source in (1, 0):
        grouped, offsets = partition_grouped(inputs[source], on, n)
        for output, row, frames in pack_grouped(grouped, offsets, (source, 0)):
            bufs.append(output, row, frames)
            if data.draw(st.booleans(), label="write out"):
                bufs.write_out(1)
    for output in range(n):
        want = pa.concat_tables(
            [partition_table(t, on, n)[output].to_arrow() for t in inputs]
        )
        buf = bufs.take(output)
        if buf is None:
            assert want.num_rows == 0
            continue
        got = build(inputs[0].schema, buf.rows(), bufs.read(output, buf), dev)
        assert_identical(got.to_arrow(), want)
    bufs.clear()


def test_a_shard_after_the_close_recreates_nothing(tmp_path):
    """A late shard (a send that raced the close) is refused; the run's directory stays gone."""
    from reference_impl.shuffle import ShuffleClosedError

    dev = SimDevice("1 MiB")
    t = Table.from_arrow(pa.table({"k": pa.array(range(100))}), dev)
    directory = tmp_path / "run"
    bufs = RunBuffers("s", "w", str(directory), HostBudget(lambda: None))
    ((output, row, frames),) = pack_grouped(t, [0, 100], (0, 0))
    bufs.append(output, row, frames)
    bufs.write_out(1)
    assert directory.is_dir()
    bufs.clear()
    with pytest.raises(ShuffleClosedError, match="shuffle s failed .* the run was closed"):
        bufs.append(output, row, frames)
    with pytest.raises(ShuffleClosedError):
        bufs.write_out(1)
    assert not directory.exists() and bufs.budget.buffered == 0


def _written(tmp_path):
    dev = SimDevice("1 MiB")
    t = Table.from_arrow(pa.table({"k": pa.array(range(1000))}), dev)
    bufs = RunBuffers("s", "w", str(tmp_path / "run"), HostBudget(lambda: None))
    ((output, row, frames),) = pack_grouped(t, [0, 1000], (0, 0))
    bufs.append(output, row, frames)
    bufs.write_out(1)
    return t.schema, bufs, bufs.take(output), bufs.path(output), dev


def _damage(path, how):
    import os

    if how == "removed":
        os.unlink(path)
    elif how == "truncated":
        os.truncate(path, os.path.getsize(path) - 1)
    else:  # one byte changed, the size kept
        with open(path, "r+b") as f:
            f.seek(100)
            b = f.read(1)
            f.seek(100)
            f.write(bytes([b[0] ^ 1]))


@pytest.mark.parametrize(
    ("how", "why"),
    [
        ("removed", "the file is missing \\(8,000 bytes were written\\)"),
        ("truncated", "it holds 7,999 bytes, 8,000 were written"),
        ("changed", "the chunk at byte 0 \\(8,000 bytes\\) does not match what was written"),
    ],
)
def test_a_damaged_shard_file_is_an_error_naming_it(tmp_path, how, why):
    from reference_impl.shuffle import ShuffleError

    schema, bufs, buf, path, dev = _written(tmp_path)
    _damage(path, how)
    with pytest.raises(ShuffleError) as info:
        build(schema, buf.rows(), bufs.read(0, buf), dev)
    assert info.value.phase == "unpack" and info.value.worker == "w"
    assert re.search(f"the shards of output 0 in {re.escape(path)} are unreadable: {why}", str(info.value))
    bufs.clear()
