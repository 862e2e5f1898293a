"""A worker SIGKILLed through its nanny mid-shuffle: the outputs raise a ShuffleError
naming the phase and the worker within a bounded time (or are correct), never hang,
never return wrong rows; the survivors keep no state."""

from __future__ import annotations

import os
import signal
import time

import dask
import distributed
import numpy as np
import pyarrow as pa
import pytest
from shuffle_helpers import check_shuffle, cluster, worker_addresses, worker_state

from reference_impl import Table, get_device
from reference_impl.shuffle import ShuffleError, shuffle

ROWS = 40_000


def make_input(seed: int) -> Table:
    rng = np.random.default_rng(seed)
    data = pa.table({"k": rng.integers(0, 1000, ROWS), "rid": np.arange(seed * ROWS, (seed + 1) * ROWS)})
    return Table.from_arrow(data, get_device("auto"))


def arrow_input(seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({"k": rng.integers(0, 1000, ROWS), "rid": np.arange(seed * ROWS, (seed + 1) * ROWS)})


def kill(cluster, address: str) -> None:
    for nanny in cluster.workers.values():
        if nanny.worker_address == address:
            os.kill(nanny.process.process.pid, signal.SIGKILL)
            return
    raise AssertionError(f"no nanny for {address}")


def outcome(client, outs, tables, timeout=60):
    """('error', exc) or ('ok', None) once every output settled; fails on a hang."""
    t0 = time.monotonic()
    try:
        got = client.gather(outs, errors="raise", asynchronous=False) if outs else []
    except ShuffleError as exc:
        assert time.monotonic() - t0 < timeout
        return "error", exc
    check_shuffle(tables, got, "k", len(outs))
    return "ok", None


@pytest.fixture
def fault_cluster(tmp_path):
    with (
        dask.config.set({"reference-impl.shuffle.max-in-flight": "256 KiB",
                         "distributed.comm.timeouts.connect": "5s"}),
        cluster(tmp_path, n_workers=2, device_memory_limit="2 MiB") as c,
        distributed.Client(c) as client,
    ):
        yield c, client


def _survivors_clean(client, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = client.run(worker_state)
        except Exception:
            time.sleep(0.2)
            continue
        if all(s["runs"] == [] and s["externals"] == 0 for s in state.values()):
            return
        time.sleep(0.1)
    raise AssertionError(f"state left behind: {client.run(worker_state)}")


@pytest.mark.slow
@pytest.mark.parametrize("phase", ["transfer", "unpack"])
def test_worker_killed_mid_shuffle(fault_cluster, phase):
    c, client = fault_cluster
    a, b = worker_addresses(client)
    tables = [arrow_input(s) for s in range(8)]
    warm = [client.submit(make_input, 99, workers=[w], allow_other_workers=True, pure=False)
            for w in (a, b)]
    client.gather(shuffle(client, warm, "k", 4))  # compile the kernels before timing anything
    del warm
    inputs = [  # recomputable elsewhere once b is gone
        client.submit(make_input, s, workers=[(a, b)[s % 2]], allow_other_workers=True, pure=False)
        for s in range(8)
    ]
    distributed.wait(inputs)
    outs = shuffle(client, inputs, "k", 8)
    if phase == "unpack":
        # Once the barrier has run, every shard is at its worker: b dies while or after its
        # outputs are assembled (an output lost with b must not be recomputed elsewhere).
        barrier = distributed.Future(outs[0].key.replace("-unpack-0", "-barrier"), client)
        distributed.wait(barrier, timeout=30)
        del barrier
    else:
        deadline = time.monotonic() + 30
        while not client.run(worker_state, workers=[a])[a]["runs"]:
            assert time.monotonic() < deadline
            time.sleep(0.005)
    kill(c, b)
    kind, exc = outcome(client, outs, tables)
    if kind == "error":
        assert exc.phase == phase and exc.worker == b, str(exc)
        assert f"failed in the {phase} phase" in str(exc) and b in str(exc)
    del outs
    _survivors_clean(client)
    # a rerun on the cluster as it is now gives the right answer
    again = shuffle(client, inputs, "k", 8)
    check_shuffle(tables, client.gather(again), "k", 8)
