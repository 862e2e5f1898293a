"""Memory bounds measured by the devices' ledgers and sampled RSS (never the shuffle's
own word), and cleanup after success, cancellation and concurrent shuffles."""

from __future__ import annotations

import os
import threading
import time

import dask
import distributed
import numpy as np
import pyarrow as pa
import pytest
from shuffle_helpers import check_shuffle, cluster, spill_files, worker_addresses, worker_state

from reference_impl import Table, get_device
from reference_impl.shuffle import shuffle
from reference_impl.shuffle.buffers import RunBuffers
from reference_impl.shuffle.limiter import HostBudget
from reference_impl.shuffle.packed import build, output_nbytes, pack_grouped

LIMIT = 2 * 2**20  # device_memory_limit per worker
HOST = 4 * 2**20  # memory_limit per worker (host tier), beyond it: disk
N_IN = 16
ROWS = LIMIT * 2 * 4 // N_IN // 24  # 4x the aggregate device limit; 24 B a row


def make_input(seed: int, rows: int = ROWS) -> Table:
    rng = np.random.default_rng(seed)
    data = pa.table({
        "k": rng.integers(0, 1 << 40, rows),
        "v": np.arange(seed * rows, (seed + 1) * rows, dtype=np.int64),
        "f": rng.random(rows),
    })
    return Table.from_arrow(data, get_device("auto"))


def start_rss_sampler(dask_worker) -> None:
    import psutil

    proc, state = psutil.Process(), {"max": 0, "stop": False}

    def sample() -> None:
        while not state["stop"]:
            state["max"] = max(state["max"], proc.memory_info().rss)
            time.sleep(0.005)

    dask_worker._rss_sampler = state
    threading.Thread(target=sample, daemon=True).start()


def stop_rss_sampler(dask_worker) -> int:
    dask_worker._rss_sampler["stop"] = True
    return dask_worker._rss_sampler["max"]


def rss(dask_worker) -> int:
    import psutil

    return psutil.Process().memory_info().rss


def reset_peak(dask_worker) -> int:
    dask_worker.data.device.reset_peak()
    return dask_worker.data.device.bytes_in_use()


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    with (
        dask.config.set({"reference-impl.shuffle.max-in-flight": "1 MiB"}),
        cluster(
            tmp_path_factory.mktemp("mem"),
            device_capacity="256 MiB",
            device_memory_limit=LIMIT,
            memory_limit=HOST,
        ) as c,
        distributed.Client(c) as client,
    ):
        yield client


def test_device_peak_and_rss_stay_bounded(client):
    pytest.importorskip("psutil")
    warm = [client.submit(make_input, s, 100, pure=False) for s in range(2)]
    client.gather(shuffle(client, warm, "k", N_IN))  # kernels compile (LLVM: ~150 MB RSS)
    del warm
    inputs = [client.submit(make_input, s, pure=False) for s in range(N_IN)]
    distributed.wait(inputs)
    before = client.run(reset_peak)
    rss_before = client.run(rss)
    client.run(start_rss_sampler)
    outs = shuffle(client, inputs, "k", N_IN)
    distributed.wait(outs)
    rss_peak = client.run(stop_rss_sampler)
    state = client.run(worker_state)
    sizes = client.gather(client.map(lambda t: t.nbytes, outs))
    largest = max(sizes)
    figures = {}
    for w, s in state.items():
        figures[w] = {
            "device_peak": s["peak"],
            "bound": LIMIT + largest,
            "in_use_before": before[w],
            "rss_growth": rss_peak[w] - rss_before[w],
        }
        assert s["peak"] <= LIMIT + largest, figures  # threads_per_worker=1
    print("\nmemory figures:", figures, "largest output", largest)
    stats = client.run(lambda dask_worker: dask_worker.data.stats())
    assert all(s["host_bytes"] <= HOST for s in stats.values())
    assert sum(s["disk_bytes"] for s in stats.values()) > 0  # beyond host: disk
    for w in rss_peak:  # sim device bytes are RSS too; plus the host tier, bytes in flight
        # (1 MiB out, as much in from the peer) and the allocator's slack
        assert rss_peak[w] - rss_before[w] <= state[w]["peak"] + HOST + 16 * 2**20, figures
    tables = [t.to_arrow() for t in client.gather(inputs)]
    got = client.gather(outs)
    assert sorted(np.concatenate([t.to_arrow()["v"].to_numpy() for t in got]).tolist()) == list(
        range(N_IN * ROWS)
    )
    assert sum(t.num_rows for t in got) == sum(t.num_rows for t in tables)
    del got, tables, outs, inputs


def test_unpack_adds_the_output_once(tmp_path):
    """Measured on the ledger: building an output from shards on disk allocates the output
    and nothing else on the device (each buffer staged on host, uploaded once)."""
    dev = get_device("sim", "64 MiB")
    rng = np.random.default_rng(0)
    bufs = RunBuffers("s", "w", str(tmp_path), HostBudget(lambda: None))
    for i in range(8):
        t = Table.from_arrow(pa.table({"k": rng.integers(0, 9, 10_000), "f": rng.random(10_000)}), dev)
        for output, row, frames in pack_grouped(t, [0, t.num_rows], (i, 0)):
            bufs.append(output, row, frames)
        schema = t.schema
        del t
    assert bufs.write_out(10**9) > 0  # every shard on disk
    buf = bufs.take(0)
    base = dev.bytes_in_use()
    dev.reset_peak()
    out = build(schema, buf.rows(), bufs.read(0, buf), dev)
    assert out.num_rows == 80_000
    added = dev.peak_bytes() - base
    assert added == out.nbytes == output_nbytes(schema, buf.rows()), (added, out.nbytes)
    bufs.clear()


def test_cleanup_after_success_cancel_and_concurrent_shuffles(client):
    rng = np.random.default_rng(1)

    def tables(n, seed):
        return [
            pa.table({"k": rng.integers(0, 50, 3000), "rid": np.arange(i * 3000, (i + 1) * 3000) + seed})
            for i in range(n)
        ]

    a_tabs, b_tabs = tables(4, 0), tables(3, 10**6)
    a_in = [client.submit(lambda t: Table.from_arrow(t, get_device("auto")), t, pure=False) for t in a_tabs]
    b_in = [client.submit(lambda t: Table.from_arrow(t, get_device("auto")), t, pure=False) for t in b_tabs]
    a = shuffle(client, a_in, "k", 5)
    b = shuffle(client, b_in, "k", 3)  # both in flight at once
    check_shuffle(b_tabs, client.gather(b), "k", 3)
    check_shuffle(a_tabs, client.gather(a), "k", 5)
    _eventually_clean(client)
    # cancelled before it could finish
    c = shuffle(client, a_in, "k", 7)
    client.cancel(c)
    del c
    _eventually_clean(client)
    del a, b, a_in, b_in
    deadline = time.monotonic() + 10
    while any(client.run(spill_files).values()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert client.run(spill_files) == {w: [] for w in worker_addresses(client)}


def _eventually_clean(client, timeout=10.0):
    deadline = time.monotonic() + timeout
    while True:
        state = client.run(worker_state)
        if all(s["runs"] == [] and s["externals"] == 0 and s["in_flight"] == 0 and s["reserved"] == 0
               for s in state.values()):
            plugin = client.run_on_scheduler(
                lambda dask_scheduler: len(dask_scheduler.plugins["device-shuffle-coordinator"].active)
            )
            if plugin == 0:
                return
        if time.monotonic() > deadline:
            raise AssertionError(f"shuffle state left behind: {state}")
        time.sleep(0.05)


def test_no_stray_threads_or_files_after_the_module():  # a canary for the module fixture
    assert os.getpid()
