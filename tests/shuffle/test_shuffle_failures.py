"""Failures that are not a lost worker: a full disk while shards spill, a transfer that
raises halfway, an unpack that raises, an input task that errs. Each gives a clear
error, and afterwards nothing of the shuffle is left: no runs, shards, reservations or
bytes in flight on the workers, nothing in the scheduler plugin, no shuffle keys on the
scheduler, no spill files. Every injected fault is checked to have fired."""

from __future__ import annotations

import dask
import distributed
import numpy as np
import pyarrow as pa
import pytest
from shuffle_helpers import (
    assert_clean,
    check_shuffle,
    cluster,
    scatter_tables,
    worker_addresses,
)

from reference_impl.shuffle import ShuffleError, shuffle

ROWS = 20_000
FSIZE = 4096  # bytes a worker may write to one file while the disk is "full"


def tables(n: int, seed: int = 0) -> list[pa.Table]:
    rng = np.random.default_rng(seed)
    return [
        pa.table({
            "k": rng.integers(0, 500, ROWS),
            "rid": np.arange(i * ROWS, (i + 1) * ROWS) + seed * 10**7,
        })
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    # 8 inputs of 320 KiB: 2.5 MiB a worker against a 512 KiB device limit and a
    # 256 KiB host tier, so shards reach the disk during transfer.
    with (
        dask.config.set({"reference-impl.shuffle.max-in-flight": "256 KiB"}),
        cluster(
            tmp_path_factory.mktemp("fail"),
            device_memory_limit="512 KiB",
            memory_limit="256 KiB",
        ) as c,
        distributed.Client(c) as client,
    ):
        # Kernels compiled (and Numba's cache written) before any fault: with the disk
        # "full", a first compile fails writing its cache, not a spill.
        warm = scatter_tables(client, tables(2, seed=9))
        client.gather(shuffle(client, warm, "k", 2))
        del warm
        yield client


# --- probes and faults run on the workers ---------------------------------------------------
def disk_errors(dask_worker) -> int:
    """Failed writes of shards to their files on this worker."""
    from reference_impl.shuffle.plugin import EXTENSION

    return dask_worker.extensions[EXTENSION].write_errors


def fill_disk(limit: int | None, *, dask_worker) -> None:
    """A "full disk": no file of this worker may grow past ``limit`` bytes (RLIMIT_FSIZE,
    SIGXFSZ ignored, so a write past it fails with EFBIG); None lifts it. client.run
    calls this on the worker's event loop, its main thread (signal.signal needs it)."""
    import resource
    import signal

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY if limit is None else limit, hard))


def break_on_call(module: str, name: str, nth: int, *, dask_worker) -> None:
    """Make ``module.name`` raise on its ``nth`` call in this worker (and count calls)."""
    import importlib

    mod = importlib.import_module(module)
    original = getattr(mod, name)
    state = {"calls": 0, "raised": 0}

    def broken(*args, **kwargs):
        state["calls"] += 1
        if state["calls"] == nth:
            state["raised"] += 1
            raise RuntimeError(f"injected fault in {name} (call {nth})")
        return original(*args, **kwargs)

    setattr(mod, name, broken)
    dask_worker._fault = (mod, name, original, state)


def unbreak(dask_worker) -> dict:
    fault = getattr(dask_worker, "_fault", None)
    if fault is None:
        return {"calls": 0, "raised": 0}
    mod, name, original, state = fault
    setattr(mod, name, original)
    del dask_worker._fault
    return state


def settle(client, outs) -> list:
    """Every output's exception (or None), waiting at most 60 s: a hang fails."""
    distributed.wait(outs, timeout=60)
    return [f.exception() if f.status == "error" else None for f in outs]


# --- the tests ----------------------------------------------------------------------------
def test_disk_full_while_shards_are_written(client):
    data = tables(8)
    inputs = scatter_tables(client, data)
    distributed.wait(inputs)
    before = client.run(disk_errors)
    client.run(fill_disk, FSIZE)
    try:
        outs = shuffle(client, inputs, "k", 6)
        errors = settle(client, outs)
        fired = {w: n - before[w] for w, n in client.run(disk_errors).items()}
    finally:
        client.run(fill_disk, None)
    assert any(fired.values()), f"no spill write failed: the fault was not exercised ({fired})"
    assert all(isinstance(e, ShuffleError) for e in errors), errors
    exc = errors[0]
    assert exc.phase == "transfer" and fired[exc.worker] > 0, (str(exc), fired)
    msg = str(exc)
    assert f"failed in the transfer phase on worker {exc.worker}: the disk is full" in msg, msg
    assert "of output " in msg and ".shards failed: OSError(27, 'File too large')" in msg, msg
    del outs, inputs, errors, exc
    assert_clean(client)
    # the same cluster with room on disk again: the shuffle works
    inputs = scatter_tables(client, data)
    check_shuffle(data, client.gather(shuffle(client, inputs, "k", 6)), "k", 6)
    del inputs
    assert_clean(client)


@pytest.mark.parametrize(
    ("module", "name", "phase"),
    [
        ("reference_impl.shuffle.run", "partition_grouped", "transfer"),
        ("reference_impl.shuffle.run", "build", "unpack"),
    ],
)
def test_a_phase_that_raises_leaves_nothing(client, module, name, phase):
    data = tables(6, seed=1)
    inputs = scatter_tables(client, data)
    distributed.wait(inputs)
    victim = worker_addresses(client)[1]
    # the 2nd call: in transfer, after some shards were kept and sent
    client.run(break_on_call, module, name, 2, workers=[victim])
    try:
        outs = shuffle(client, inputs, "k", 6)
        errors = settle(client, outs)
    finally:
        fault = client.run(unbreak, workers=[victim])[victim]
    assert fault["raised"] == 1, f"the fault did not fire: {fault}"
    failed = [e for e in errors if e is not None]
    assert failed, "no output failed"
    for e in failed:
        assert isinstance(e, ShuffleError), repr(e)
        assert e.phase == phase and e.worker == victim, str(e)
        assert f"injected fault in {name}" in str(e)
    if phase == "transfer":
        assert len(failed) == len(outs)  # no output without all its shards
    del outs, inputs, errors, failed
    assert_clean(client)


def test_an_input_task_that_errs(client):
    def bad(i):
        raise ValueError(f"input {i} cannot be made")

    data = tables(3, seed=2)
    good = scatter_tables(client, data)
    broken = client.submit(bad, 7, pure=False)
    with pytest.raises(ValueError, match="input 7 cannot be made"):
        shuffle(client, [*good, broken], "k", 4)
    del good, broken
    assert_clean(client)
