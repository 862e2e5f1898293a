"""The workers' side of the suite's cluster: the device the suite gives each worker, what the
suite reads on a worker (the device's ledger, what a shuffle could leave behind), the
environment a worker process starts with, and the workers' addresses.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Any

import distributed
from distributed.diagnostics.plugin import WorkerPlugin

CAPACITY_FACTOR = 16  # a worker's device capacity = CAPACITY_FACTOR * its limit


class SuiteDevice(WorkerPlugin):
    """Worker plugin: the suite's device, made the worker process's default device."""

    name = "conformance-suite-device"
    idempotent = True

    def __init__(self, kind: str, capacity: int) -> None:
        self.kind, self.capacity = kind, capacity

    def setup(self, worker: Any) -> None:
        from reference_impl.device import get_device, set_default_device

        set_default_device(get_device(self.kind, self.capacity))


def reset_device_peak() -> int:
    """On a worker: reset its default device's high-water mark; the bytes in use now."""
    from reference_impl.device import default_device

    dev = default_device()
    dev.reset_peak()
    return dev.bytes_in_use()


def device_peak() -> int:
    """On a worker: its default device's high-water mark."""
    from reference_impl.device import default_device

    return default_device().peak_bytes()


def device_in_use() -> int:
    """On a worker: the bytes its default device holds now (the ledger, not the store)."""
    from reference_impl.device import default_device

    return default_device().bytes_in_use()


def worker_surface(dask_worker: Any) -> dict[str, list[str]]:
    """What a shuffle could leave behind on a worker, by name."""
    return {
        "handlers": sorted(dask_worker.handlers),
        "stream_handlers": sorted(dask_worker.stream_handlers),
        "extensions": sorted(dask_worker.extensions),
        "plugins": sorted(dask_worker.plugins),
        "tasks": sorted(str(k) for k in dask_worker.state.tasks),
    }


# Set in every worker process before it starts (distributed's pre-spawn environment, read by
# glibc's malloc and by pyarrow when they initialise): buffers of 64 KiB and more are mapped
# and unmapped one by one, Arrow allocates through malloc, so what a shuffle frees leaves the
# RSS at once instead of staying in an allocator's pool for reuse, and the RSS growth of a
# shuffle (14.20) is what it holds, not what an earlier one left the allocator.
WORKER_ENVIRON = {"MALLOC_MMAP_THRESHOLD_": "65536", "ARROW_DEFAULT_MEMORY_POOL": "system"}


IDENTITY_TIMEOUT = 10.0  # seconds for the scheduler's identity RPC (it answers in milliseconds)


def worker_addresses(client: distributed.Client) -> list[str]:
    """The workers' addresses, sorted, asked of the scheduler itself.

    Not ``client.scheduler_info()["workers"]``: that refreshes the client's cache and
    returns it, and the client's periodic refresh (``n_workers=0``) can replace the cache
    with one listing no workers in between (under load a round-robin over it divided by
    zero, in the suite's adapters and later in this repository's own tests).
    """
    info = client.sync(client.scheduler.identity, n_workers=-1, callback_timeout=IDENTITY_TIMEOUT)
    return sorted(info["workers"])


def poll_workers(
    client: distributed.Client,
    n_workers: int,
    timeout: float,
    *,
    gone: Collection[str] = (),
    poll: float = 0.1,
) -> tuple[list[str] | None, bool]:
    """Ask the scheduler (:func:`worker_addresses`, a call that timed out asked again) until it
    lists ``n_workers`` and none of ``gone``, or ``timeout`` passed: ``(what it last listed,
    None if it never answered; whether it got there)``.

    Never distributed's ``Cluster.wait_for_workers``, which checks its deadline only between
    RPCs and once sat past it on one that never answered; and never a count alone, since a
    worker just killed is still listed for some milliseconds."""
    deadline = time.monotonic() + timeout
    seen: list[str] | None = None
    while True:
        try:
            seen = worker_addresses(client)
        except TimeoutError:
            pass
        if seen is not None and len(seen) >= n_workers and not set(gone) & set(seen):
            return seen, True
        if time.monotonic() > deadline:
            return seen, False
        time.sleep(poll)


def worker_environ() -> dict[str, str]:
    """distributed's pre-spawn environment with the suite's allocator settings on top."""
    import dask

    return dict(dask.config.get("distributed.nanny.pre-spawn-environ", {})) | WORKER_ENVIRON


def spawn_environ(configured: dict[str, Any]) -> dict[str, str]:
    """What a nanny sets before it starts a worker, from distributed's pre-spawn setting
    ``configured``: a variable this process already has keeps its value (distributed's
    precedence, ``nanny._get_env_variables``), the others get the setting's."""
    import os

    return {k: os.environ.get(k, str(v)) for k, v in configured.items() if v is not None}


def _started_with(pid: int | str = "self") -> dict[str, str] | None:
    """The environment process ``pid`` was started with (what glibc and Arrow read as it
    began), or None where ``/proc`` cannot say."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}


def _lacks(started: dict[str, str] | None, environ: dict[str, Any]) -> dict[str, str | None]:
    """Each variable of ``environ`` that ``started`` does not have with its value."""
    have = started or {}
    return {k: have.get(k) for k, v in environ.items() if have.get(k) != str(v)}


def fork_server_with(environ: dict[str, Any]) -> None:
    """Under distributed's ``forkserver`` method (ci/test.sh's library tests use it) every worker
    is forked from one server process per client process, started with the first worker: a
    worker has the environment that server started with, never the nanny's pre-spawn one. A
    server started without ``environ`` (by a cluster that set none) is stopped here, so that
    the next worker starts one with it. Under ``spawn`` there is nothing to do."""
    import dask

    if dask.config.get("distributed.worker.multiprocessing-method") != "forkserver":
        return
    pid = fork_server_pid()
    if pid is not None and _lacks(_started_with(pid), environ):
        from multiprocessing import forkserver

        forkserver._forkserver._stop()


def fork_server_pid() -> int | None:
    """The pid of this process's multiprocessing fork server, if one runs (it lives as long as
    this process does, and is no worker: stress's cleanup check leaves it out)."""
    from multiprocessing import forkserver

    # the module's one server, as multiprocessing uses it (private: no public way to ask)
    return getattr(forkserver._forkserver, "_forkserver_pid", None)


def _environ_lacking(environ: dict[str, Any]) -> dict[str, str | None] | None:
    started = _started_with()
    return None if started is None else _lacks(started, environ)


def check_worker_environ(
    client: distributed.Client, environ: dict[str, Any], n_workers: int = 1, timeout: float = 60.0
) -> None:
    """Every worker process started with ``environ``, read in the worker itself: the RSS the
    suite judges (14.20) depends on the allocator settings of :data:`WORKER_ENVIRON`. Waits
    (up to ``timeout``) for ``n_workers`` first: on a loaded machine workers register after
    the cluster object returns, and a check of fewer would pass the others unseen."""
    found, _ = poll_workers(client, n_workers, timeout)
    lacking = {w: e for w, e in client.run(_environ_lacking, environ, workers=found or None).items() if e}
    if lacking:
        raise RuntimeError(
            "workers started without the environment the suite set (distributed's "
            f"pre-spawn environment): {lacking} (variable: the value they have instead)"
        )
