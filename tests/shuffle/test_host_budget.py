"""The shards' host allowance has a ceiling (``reference-impl.shuffle.host-buffer-max``):
a worker whose host tier is empty still writes its shards out past it, so its RSS does
not grow with the data it receives (issue 46: at 256 x 256 the buffers held 40 MiB per
worker, P2P's whole growth was 12)."""

from __future__ import annotations

import os
import types

import numpy as np

from reference_impl.shuffle.buffers import RunBuffers
from reference_impl.shuffle.limiter import HOST_MAX, HostBudget

MIB = 2**20


def _store(limit: int, used: int = 0):
    return types.SimpleNamespace(memory_limit=limit, host_bytes=used)


def test_allowance_is_the_room_left_up_to_the_ceiling():
    assert HostBudget(lambda: _store(128 * MIB), most=None).allowance() == 128 * MIB
    assert HostBudget(lambda: _store(128 * MIB), most=8 * MIB).allowance() == 8 * MIB
    assert HostBudget(lambda: _store(128 * MIB, 100 * MIB), most=32 * MIB).allowance() == 28 * MIB
    assert HostBudget(lambda: None, most=8 * MIB).allowance() == 8 * MIB  # no store: the ceiling
    assert HostBudget(lambda: _store(128 * MIB)).allowance() == HOST_MAX


def test_shards_past_the_ceiling_go_to_their_files(tmp_path):
    """Measured on disk: 64 shards of 1 MiB under a 128 MiB host tier and a 4 MiB ceiling
    leave at most 4 MiB in memory, the rest in the files, and every byte comes back."""
    budget = HostBudget(lambda: _store(128 * MIB), most=4 * MIB)
    bufs = RunBuffers("s", "w", str(tmp_path / "run"), budget)
    sent = []
    for i in range(64):
        data = np.full(MIB, i % 251, np.uint8)
        sent.append(data)
        bufs.append(i % 4, [i, 0, MIB], [data])
    in_files = sum(os.path.getsize(tmp_path / "run" / f) for f in os.listdir(tmp_path / "run"))
    assert budget.buffered <= 4 * MIB
    assert in_files + budget.buffered == 64 * MIB
    for output in range(4):
        buf = bufs.take(output)
        got = b"".join(bytes(view) for _, view in bufs.read(output, buf))
        assert got == b"".join(sent[i].tobytes() for i in range(output, 64, 4))
    bufs.clear()


def test_index_rows_are_int32_until_a_value_does_not_fit(tmp_path):
    """A worker holds one index row per shard it receives (partitions**2 / workers): int32
    halves them; a value past int32 (a chunk number here, a string column's 2 GiB of
    chars in one shard in life) widens the index, losing no row."""
    bufs = RunBuffers("s", "w", str(tmp_path / "run"), HostBudget(lambda: None))
    data = np.zeros(8, np.uint8)
    bufs.append(0, [0, 0, 8, 8, 0, -1], [data])  # one uint8 column, no mask
    buf = bufs.outputs[0]
    assert buf.index.itemsize == 4
    bufs.append(0, [1, 2**31, 8, 8, 0, -1], [data])
    assert buf.index.itemsize == 8
    assert buf.rows().tolist() == [[0, 0, 8, 8, 0, -1], [1, 2**31, 8, 8, 0, -1]]
    assert buf.rows().dtype == np.int64
    bufs.clear()
