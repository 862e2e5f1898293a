"""The suite's workers start with the environment it sets (its allocator settings, on which
the RSS of clause 14.20 depends) under either of distributed's start methods:
``fork_server_with`` and ``check_worker_environ`` in ``conformance/shuffle/workers.py``.

Each test sets a variable named by it alone, never seen before in this process: a nanny
leaves its pre-spawn variables in this process's environment, where they take precedence
over any later setting of them (distributed's rule), so an earlier cluster's could pass it."""

from __future__ import annotations

import uuid
from contextlib import contextmanager
from pathlib import Path

import dask
import distributed
import pytest

from conformance.shuffle.workers import check_worker_environ, fork_server_with, spawn_environ

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/environ").exists(), reason="reads a process's environment in /proc"
)


@contextmanager
def _cluster(method: str, pre_spawn: dict[str, str]):
    settings = {
        "distributed.worker.multiprocessing-method": method,
        "distributed.nanny.pre-spawn-environ": pre_spawn,
    }
    with (
        dask.config.set(settings),
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
            dashboard_address=":0", memory_limit=0,
        ) as cluster,
        distributed.Client(cluster, set_as_default=False) as client,
    ):
        yield client


def _probe() -> dict[str, str]:
    return {f"CONFORMANCE_ENV_PROBE_{uuid.uuid4().hex}": "1"}


@pytest.mark.parametrize("replace_the_server", [True, False])
def test_a_fork_server_started_without_the_environment_is_replaced(replace_the_server):
    probe = _probe()
    # the first cluster starts the server, or finds it running
    with (
        _cluster("forkserver", {}) as client,
        pytest.raises(RuntimeError, match=f"{next(iter(probe))}': None"),
    ):
        check_worker_environ(client, probe)
    if replace_the_server:
        with dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"}):
            fork_server_with(probe)
    with _cluster("forkserver", probe) as client:
        if replace_the_server:
            check_worker_environ(client, probe)
        else:  # the nanny's pre-spawn environment never reaches a forked worker
            with pytest.raises(RuntimeError, match="CONFORMANCE_ENV_PROBE"):
                check_worker_environ(client, probe)


def test_under_spawn_the_pre_spawn_environment_reaches_the_worker_and_no_server_is_stopped():
    from multiprocessing import forkserver

    probe = _probe()
    server = forkserver._forkserver._forkserver_pid
    with dask.config.set({"distributed.worker.multiprocessing-method": "spawn"}):
        fork_server_with(probe)
    assert forkserver._forkserver._forkserver_pid == server
    with _cluster("spawn", probe) as client:
        check_worker_environ(client, probe)


def test_a_variable_this_process_has_keeps_its_value_as_distributed_gives_it(monkeypatch):
    probe = _probe()
    (name,) = probe
    monkeypatch.setenv(name, "mine")
    assert spawn_environ({name: 1, "UNSET_BY_ANYONE_" + name: 2}) == {
        name: "mine", "UNSET_BY_ANYONE_" + name: "2",
    }
    with _cluster("spawn", probe) as client:
        check_worker_environ(client, spawn_environ(probe))
        with pytest.raises(RuntimeError, match=f"{name}': 'mine'"):
            check_worker_environ(client, probe)
