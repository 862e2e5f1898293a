"""A worker's index rows are held compact (``packed.RowCodec``) and given back whole.

A worker holds one index row per shard it receives, partitions**2 / workers of them: at
1,024 x 1,024 the full rows (three integers a column) were 30 MiB a worker, the one cost
that grew with the partition count squared (issue 46)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from reference_impl import Table, get_device
from reference_impl.shuffle.buffers import RunBuffers
from reference_impl.shuffle.limiter import HostBudget
from reference_impl.shuffle.packed import RowCodec, build, pack_grouped


def _table(columns: int = 0) -> pa.Table:
    """Fixed-width, string and large-string columns, with and without nulls, and
    ``columns`` more int8 columns with a null each (more mask flags than one word holds)."""
    rng = np.random.default_rng(0)
    n = 1_000
    words = [None if i % 7 == 0 else "x" * (i % 13) for i in range(n)]
    data = {
        "k": rng.integers(0, 1 << 40, n),
        "f": pa.array(rng.random(n), mask=rng.random(n) < 0.1),
        "s": pa.array(words, pa.string()),
        "L": pa.array([w or "" for w in words], pa.large_string()),
        "b": rng.random(n) < 0.5,
        "i16": pa.array(rng.integers(-5, 5, n).astype(np.int16)),
    }
    for j in range(columns):
        data[f"c{j}"] = pa.array([None, *(i % 100 for i in range(n - 1))], pa.int8())
    return pa.table(data)


def _shards(table: pa.Table, parts: int = 16):
    """``parts`` inputs (slices of ``table``), each one shard to output 0."""
    dev = get_device("sim", "64 MiB")
    bounds = np.linspace(0, table.num_rows, parts + 1).astype(int).tolist()
    shards = []
    for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        t = Table.from_arrow(table.slice(a, b - a), dev)
        shards += pack_grouped(t, [0, t.num_rows], (i, 0))
    return t.schema, dev, shards


@pytest.mark.parametrize("extra", [0, 40])
def test_held_rows_decode_to_the_rows_sent(extra):
    _, _, shards = _shards(_table(extra))
    rows = [row for _, row, _ in shards]
    codec = RowCodec.learn(rows[0])
    held = np.asarray([codec.encode(r) for r in rows])
    assert codec.decode(held).tolist() == rows


def test_four_fixed_width_columns_hold_four_integers_a_shard(tmp_path):
    """16 bytes a shard (input, chunk, rows, mask flags) where the full row held 60."""
    rng = np.random.default_rng(1)
    table = pa.table({c: rng.integers(0, 9, 4_000) for c in "abcd"})
    _, _, shards = _shards(table, parts=64)
    bufs = RunBuffers("s", "w", str(tmp_path), HostBudget(lambda: None))
    for _, row, frames in shards:
        bufs.append(0, row, frames)
    buf = bufs.outputs[0]
    assert len(buf.index) * buf.index.itemsize == 16 * 64
    assert buf.rows().tolist() == [row for _, row, _ in shards]
    bufs.clear()


def test_an_output_built_from_held_rows_is_the_input(tmp_path):
    """Every shard of one input to one output, half of them written to the file first."""
    table = _table(40)
    schema, dev, shards = _shards(table)
    bufs = RunBuffers("s", "w", str(tmp_path), HostBudget(lambda: None))
    for i, (_, row, frames) in enumerate(shards):
        bufs.append(0, row, frames)
        if i == len(shards) // 2:
            bufs.write_out(10**9)
    buf = bufs.take(0)
    out = build(schema, buf.rows(), bufs.read(0, buf), dev)
    assert out.to_arrow().equals(table)
    bufs.clear()


def test_a_row_the_codec_cannot_give_back_is_refused_before_a_byte_is_placed(tmp_path):
    """A shard whose column has another width than the first shard's (no run makes one:
    every row has the run's schema) would misplace every later shard's bytes: the rows
    are refused, naming what they describe and what is held (the unpack's ShuffleError
    then names the output)."""
    bufs = RunBuffers("s", "w", str(tmp_path), HostBudget(lambda: None))
    bufs.append(0, [0, 0, 4, 32, 0, -1], [np.zeros(32, np.uint8)])  # int64, 4 rows
    bufs.append(0, [1, 0, 4, 16, 0, -1], [np.zeros(16, np.uint8)])  # int32 by its bytes
    buf = bufs.take(0)
    with pytest.raises(ValueError, match=r"its 2 index rows describe 64 bytes, but 48 are held"):
        buf.rows()
    bufs.clear()


def test_a_row_of_an_empty_shard_is_not_learned_from():
    with pytest.raises(ValueError, match=r"not an index row of a non-empty shard: \[0, 0, 0, 0, 0, -1\]"):
        RowCodec.learn([0, 0, 0, 0, 0, -1])
