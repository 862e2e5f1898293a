"""A client that dies mid-shuffle (SIGKILL: the strongest interrupt, nothing runs on its side)
leaves nothing on the workers once the scheduler notices: no runs, no externals, no
reserved bytes, no files, no coordinator state. The next shuffle still works.

Killed as soon as a transfer runs, the client often dies before its batched stream sent the
barrier and unpack tasks: the scheduler then never sees a barrier, whose release is what
ended a shuffle. Before the coordinator handled that, 2 of 3 runs of the first test left
112 shards and the spill files on each worker. The last two tests force both orders. A
transfer that started after its shuffle was closed also raised, and the worker's record of
that error kept the task's frames, and so its 4 input tables, alive (1 run in 5). A send
that found the shuffle closed did the same through the event loop's copy of its error (1 run
in 5-10, until a garbage collection; ``test_transfer_error_frees_inputs.py``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import distributed
import numpy as np
import pyarrow as pa
from shuffle_helpers import assert_clean, check_shuffle, cluster, scatter_tables

from reference_impl.shuffle import shuffle

CLIENT = """
import sys, time
import distributed, numpy as np, pyarrow as pa
from shuffle_helpers import scatter_tables
from reference_impl.shuffle import shuffle

client = distributed.Client(sys.argv[1], timeout="30s")
rng = np.random.default_rng(0)
tables = [pa.table({"k": rng.integers(0, 1 << 30, 200_000), "v": np.arange(200_000)})
          for _ in range(8)]
outputs = shuffle(client, scatter_tables(client, tables), "k", 8)
print("submitted", flush=True)
time.sleep(600)  # killed before this ends
"""


def _progress(dask_scheduler) -> dict:
    tasks = [(str(k), ts.state) for k, ts in dask_scheduler.tasks.items() if "devshuffle" in str(k)]
    return {
        "processing": sum(state == "processing" for _k, state in tasks),
        "outputs done": sum(state == "memory" for k, state in tasks if "-unpack-" in k),
        "outputs": sum("-unpack-" in k for k, _state in tasks),
    }


def test_a_client_killed_mid_shuffle_leaves_nothing(tmp_path):
    with (
        cluster(tmp_path, device_capacity="256 MiB", device_memory_limit="2 MiB", memory_limit="4 MiB") as c,
        distributed.Client(c) as client,
    ):
        here = os.path.dirname(__file__)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([here, os.getcwd(), os.environ.get("PYTHONPATH", "")]))
        proc = subprocess.Popen(
            [sys.executable, "-c", CLIENT, c.scheduler_address],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
        )
        try:
            assert proc.stdout.readline().strip() == "submitted"
            deadline = time.monotonic() + 60
            while not (progress := client.run_on_scheduler(_progress))["processing"]:
                assert time.monotonic() < deadline, "the shuffle never started"
                time.sleep(0.01)
            proc.send_signal(signal.SIGKILL)  # mid-shuffle: a task of it is processing
        finally:
            proc.kill()
            proc.wait(30)
        assert progress["outputs done"] < 8, progress  # killed before the shuffle ended

        assert_clean(client, timeout=20.0)

        # the cluster is still good for the next shuffle
        rng = np.random.default_rng(1)
        tables = [pa.table({"k": rng.integers(0, 50, 3000), "rid": np.arange(i * 3000, (i + 1) * 3000)})
                  for i in range(3)]
        check_shuffle(tables, client.gather(shuffle(client, scatter_tables(client, tables), "k", 4)), "k", 4)


def _active(dask_scheduler) -> list[str]:
    return sorted(dask_scheduler.plugins["device-shuffle-coordinator"].active)


def _register(client, shuffle_id: str, keys: list[str], owner) -> None:
    from reference_impl.shuffle.messages import REGISTER_OP

    client.sync(
        getattr(client.scheduler, REGISTER_OP),
        shuffle_id=shuffle_id,
        npartitions=1,
        barrier=f"{shuffle_id}-barrier",
        transfers=keys,
        unpacks=[],
        client=owner.id,
    )


def _wait_for(client, fn, want, timeout=10.0):
    deadline = time.monotonic() + timeout
    while (got := client.run_on_scheduler(fn)) != want:
        assert time.monotonic() < deadline, got
        time.sleep(0.02)


def test_a_task_released_before_its_barrier_existed_ends_the_shuffle(tmp_path):
    with cluster(tmp_path) as c, distributed.Client(c) as client:
        client.gather(shuffle(client, scatter_tables(client, [pa.table({"k": [1]})]), "k", 1))
        _register(client, "devshuffle-orphan", ["devshuffle-orphan-transfer-0"], client)
        assert client.run_on_scheduler(_active) == ["devshuffle-orphan"]
        f = client.submit(int, 1, key="devshuffle-orphan-transfer-0")
        f.result()
        del f  # forgotten, and no barrier was ever submitted
        _wait_for(client, _active, [])


def test_a_client_that_leaves_before_submitting_ends_its_shuffle(tmp_path):
    with cluster(tmp_path) as c, distributed.Client(c) as client:
        client.gather(shuffle(client, scatter_tables(client, [pa.table({"k": [1]})]), "k", 1))
        with distributed.Client(c) as other:
            _register(other, "devshuffle-unsent", ["devshuffle-unsent-transfer-0"], other)
            assert client.run_on_scheduler(_active) == ["devshuffle-unsent"]
        _wait_for(client, _active, [])
