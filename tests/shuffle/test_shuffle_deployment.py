"""One shuffle on a real deployment: ``dask scheduler`` and two ``dask worker`` processes
started as subprocesses on 127.0.0.1 with ``--preload reference_impl.shuffle.preload``,
reached by a Client through the scheduler's address. Every process started here (and
every child of it: the nannies' workers) is gone when the test ends, pass or fail."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import distributed
import numpy as np
import pyarrow as pa
import pytest
from shuffle_helpers import check_shuffle, scatter_tables, worker_addresses, worker_state

from reference_impl.shuffle import shuffle

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def _dask(*args: str) -> list[str]:
    return [sys.executable, "-m", "dask", *args]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    # the workers unpickle shuffle_helpers' tasks by reference
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(HERE), env.get("PYTHONPATH", "")])
    env["PROXIFY_DEVICE"] = "sim"
    env["PROXIFY_DEVICE_CAPACITY"] = "64 MiB"
    env["PROXIFY_DEVICE_MEMORY_LIMIT"] = "2 MiB"
    env["PROXIFY_MEMORY_LIMIT"] = "4 MiB"
    return env


def _stop(procs: list[subprocess.Popen], timeout: float = 20.0) -> list[int]:
    """SIGTERM each process group started here, SIGKILL what outlives ``timeout``;
    returns the pids (children included) still alive afterwards (should be none)."""
    import psutil

    family: list[psutil.Process] = []
    for p in procs:
        try:
            parent = psutil.Process(p.pid)
            family += [parent, *parent.children(recursive=True)]
        except psutil.NoSuchProcess:
            pass
    for p in reversed(procs):  # workers first, the scheduler last
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    _, alive = psutil.wait_procs(family, timeout=timeout)
    for proc in alive:
        proc.kill()
    _, alive = psutil.wait_procs(alive, timeout=10)
    for p in procs:
        p.wait(timeout=10)
    return [proc.pid for proc in alive]


@pytest.fixture
def deployment(tmp_path):
    pytest.importorskip("psutil")
    env = _env()
    sched_file = tmp_path / "scheduler.json"
    logs = []
    procs: list[subprocess.Popen] = []

    def start(name: str, args: list[str]) -> None:
        log = open(tmp_path / f"{name}.log", "wb")  # noqa: SIM115 (closed below)
        logs.append(log)
        procs.append(subprocess.Popen(
            args, env=env, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the nanny's worker goes with it
        ))

    try:
        start("scheduler", _dask(
            "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
            "--scheduler-file", str(sched_file),
        ))
        deadline = time.monotonic() + 60
        while not sched_file.exists():
            assert procs[0].poll() is None, (tmp_path / "scheduler.log").read_text()
            assert time.monotonic() < deadline, "the scheduler did not start"
            time.sleep(0.1)
        time.sleep(0.2)  # written at once, but let it land
        address = json.loads(sched_file.read_text())["address"]
        assert address.startswith("tcp://127.0.0.1:")
        for i in range(2):
            (tmp_path / f"w{i}").mkdir()
            start(f"worker{i}", _dask(
                "worker", address, "--host", "127.0.0.1", "--nthreads", "1", "--nworkers", "1",
                "--no-dashboard", "--local-directory", str(tmp_path / f"w{i}"),
                "--memory-limit", "0", "--preload", "reference_impl.shuffle.preload",
            ))
        yield address, procs, tmp_path
    finally:
        left = _stop(procs)
        for log in logs:
            log.close()
        assert not left, f"processes left running: {left}"


def _probe(dask_worker) -> dict:
    from reference_impl.device import get_device
    from reference_impl.shuffle.plugin import EXTENSION

    data = dask_worker.data
    return {
        "store": type(data).__name__,
        "extension": EXTENSION in dask_worker.extensions,
        "capacity": data.device.capacity,
        "limit": data.device_memory_limit,
        "default_is_store_device": get_device("auto") is data.device,
    }


@pytest.mark.slow
def test_shuffle_on_a_hand_started_deployment(deployment):
    address, procs, tmp_path = deployment
    rng = np.random.default_rng(11)
    tables = [
        pa.table({
            "k": rng.integers(0, 300, 5000),
            "s": pa.array([f"v{x}" for x in rng.integers(0, 50, 5000)]),
            "rid": np.arange(i * 5000, (i + 1) * 5000),
        })
        for i in range(6)
    ]
    with distributed.Client(address, timeout=60) as client:
        client.wait_for_workers(2, timeout=120)
        workers = worker_addresses(client)
        assert len(workers) == 2 and all(w.startswith("tcp://127.0.0.1:") for w in workers)
        probes = client.run(_probe)
        assert all(
            p == {"store": "ProxifyHostFile", "extension": True, "capacity": 64 * 2**20,
                  "limit": 2 * 2**20, "default_is_store_device": True}
            for p in probes.values()
        ), probes
        inputs = scatter_tables(client, tables)
        outs = shuffle(client, inputs, "k", 5)
        got = client.gather(outs)
        check_shuffle(tables, got, "k", 5)
        del got, outs, inputs
        deadline = time.monotonic() + 15
        while True:
            state = client.run(worker_state)
            active = client.run_on_scheduler(
                lambda dask_scheduler: len(dask_scheduler.plugins["device-shuffle-coordinator"].active)
            )
            if active == 0 and all(s["runs"] == [] and s["externals"] == 0 for s in state.values()):
                break
            assert time.monotonic() < deadline, (state, active)
            time.sleep(0.1)
    assert all(p.poll() is None for p in procs), "a process died during the test"
