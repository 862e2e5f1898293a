"""What the suite owns for a shuffle: the cluster, the workers' devices, and the ground truth.

The suite starts each cluster itself (loopback, worker processes under nannies, one
thread each) and stops it. For ``shuffle.device`` implementations every worker gets a
device of the suite's own making as its process default, so the device's ledger is the
suite's; for every implementation it samples each worker process's RSS (the bound of
clause 14.20, :func:`~conformance.shuffle.rss.rss_bound`). Phases are observed on the
scheduler (which lives in this process) and faults are injected from there.

The parts live in their own modules (``workers``, ``rss``, ``phase_plugins``, ``calls``);
their names stay importable from here, where the suite's users first found them.
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import distributed

from ..api import ShuffleEnv
from ..draws import pinned
from ..store.harness import files_under
from .calls import SHUFFLE_TIMEOUT, ShuffleHang, call_with_timeout, forget_error, load_inputs
from .phase_plugins import PhaseAction, PhaseKiller, RepeatedKiller
from .rss import RSS_OVERHEAD, RSS_PARTITIONS, RssSampler, rss_allowance, rss_bound
from .workers import (
    CAPACITY_FACTOR,
    WORKER_ENVIRON,
    SuiteDevice,
    check_worker_environ,
    device_in_use,
    device_peak,
    fork_server_pid,
    fork_server_with,
    reset_device_peak,
    spawn_environ,
    worker_addresses,
    worker_environ,
    worker_surface,
)

__all__ = [
    "CAPACITY_FACTOR", "DASK_FILES", "RSS_OVERHEAD", "RSS_PARTITIONS", "SHUFFLE_TIMEOUT",
    "WORKER_ENVIRON", "PhaseAction", "PhaseKiller", "RepeatedKiller", "RssSampler",
    "ShuffleCluster", "ShuffleHang", "ShuffleRun", "SuiteDevice", "call_with_timeout",
    "check_worker_environ", "device_in_use", "device_peak", "for_each_case", "fork_server_pid",
    "fork_server_with",
    "forget_error", "load_inputs", "remove_files", "reset_device_peak", "rss_allowance",
    "rss_bound", "spawn_environ", "worker_addresses", "worker_environ",
]  # fmt: skip

DASK_FILES = (".lock", ".dirlock", "global.lock", "purge.lock")


def remove_files(root: str | Path) -> int:
    """Remove every file under ``root`` except dask's own lock files; how many went."""
    n = 0
    for path in files_under(root):
        if path.endswith(DASK_FILES):
            continue
        try:
            os.unlink(path)
            n += 1
        except OSError:
            pass
    return n


# --------------------------------------------------------------------------- cluster
@dataclass
class ShuffleRun:
    outputs: Sequence[Any]
    seconds: float
    peaks: dict[str, int] | None = None  # per worker: device high-water mark or RSS growth
    rss: dict[str, int] | None = None  # per worker: RSS growth (every implementation, 14.20)


class ShuffleCluster:
    """A loopback cluster for one implementation, with the suite's probes."""

    def __init__(
        self,
        adapter: Any,
        device_kind: str,
        spill_dir: str | Path,
        *,
        n_workers: int = 2,
        device_limit: int | None = 8 * 2**20,
        host_limit: int | None = None,
    ) -> None:
        import dask

        self.adapter = adapter
        self.on_device = "shuffle.device" in adapter.capabilities
        self.spill_dir = str(spill_dir)
        capacity = CAPACITY_FACTOR * (device_limit or 2**20)
        plugins = {SuiteDevice(device_kind, capacity)} if self.on_device else set()
        self._config = dask.config.set(
            {"distributed.nanny.pre-spawn-environ": worker_environ()}
            | self._hook("cluster_config", dict)()
        )
        self._config.__enter__()
        environ = spawn_environ(dask.config.get("distributed.nanny.pre-spawn-environ"))
        try:
            fork_server_with(environ)
            self.cluster = distributed.LocalCluster(
                n_workers=n_workers,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address="127.0.0.1:0",
                worker_dashboard_address="127.0.0.1:0",
                memory_limit=0,
                local_directory=self.spill_dir,
                plugins=plugins,
            )
            self.client = distributed.Client(self.cluster, set_as_default=False)
            check_worker_environ(self.client, environ, n_workers)
        except BaseException:
            for part in ("client", "cluster"):
                if hasattr(self, part):
                    getattr(self, part).close()
            self._config.__exit__(None, None, None)
            raise
        self.env = ShuffleEnv(
            client=self.client,
            n_workers=n_workers,
            spill_dir=self.spill_dir,
            device_kind=device_kind if self.on_device else None,
            device_capacity=capacity if self.on_device else None,
            device_limit=device_limit,
            host_limit=host_limit,
        )
        self._surface: dict | None = None
        setup = getattr(adapter, "setup_cluster", None)
        if setup is not None:
            setup(self.env)

    def _hook(self, name: str, default: Callable) -> Callable:
        return getattr(self.adapter, name, None) or default

    # ------------------------------------------------------------------ running
    def load(self, tables: Sequence[Any]) -> Any:
        """The inputs as the adapter wants them, in place on the workers."""
        return load_inputs(self.adapter, self.env, self.client, tables, SHUFFLE_TIMEOUT)

    def shuffle(self, inputs: Any, on: Sequence[str], npartitions: int, *, measure=False):
        """Run one shuffle with a hang guard; with ``measure``, the per-worker peaks."""
        sampler = None
        if measure:  # RSS for every implementation (14.20), the ledger too on a device
            if self.on_device:
                self.client.run(reset_device_peak)
            sampler = RssSampler(self.worker_pids())
        start = time.perf_counter()
        try:
            outputs = call_with_timeout(
                lambda: self.adapter.shuffle(inputs, list(on), npartitions, self.env),
                SHUFFLE_TIMEOUT,
            )
        finally:
            rss = sampler.stop() if sampler is not None else None
        seconds = time.perf_counter() - start
        peaks = None
        if measure:
            peaks = self.client.run(device_peak) if self.on_device else rss
        return ShuffleRun(list(outputs), seconds, peaks, rss)

    def run(self, case: Any, *, measure: bool = False) -> ShuffleRun:
        return self.shuffle(self.load(case.tables), case.on, case.npartitions, measure=measure)

    # ------------------------------------------------------------------ ground truth
    def worker_pids(self) -> dict[str, int]:
        return self.client.run(os.getpid)

    def rss_allowance(self) -> int:
        """Clause 14.20: the bytes each worker may hold in RAM (:func:`rss_allowance`)."""
        return rss_allowance(
            self.on_device, self.env.device_kind, self.budget(), self.env.host_limit
        )

    def budget(self) -> int:
        fn = getattr(self.adapter, "memory_budget", None)
        if fn is not None:
            return int(fn(self.env))
        if self.env.device_limit is None:
            raise ValueError(f"{self.adapter.name}: no memory_budget and no device limit")
        return self.env.device_limit

    def files(self) -> dict[str, int]:
        """Files under spill_dir that are not dask's own lock files."""
        return {
            p: n for p, n in files_under(self.spill_dir).items() if not p.endswith(DASK_FILES)
        }

    def surface(self) -> dict[str, dict[str, list[str]]]:
        return self.client.run(worker_surface)

    def leftovers(self, keep: Collection[str] = ()) -> list[str]:
        """What the shuffles run so far left behind: files under spill_dir, and tasks or
        names on the workers that the cluster's first shuffle did not have. Tasks whose
        keys are in ``keep`` (inputs the caller still holds) do not count."""
        out = [f"file {os.path.relpath(p, self.spill_dir)} ({n:,} bytes)" for p, n in self.files().items()]
        kept = {str(k) for k in keep}
        surfaces = self.surface()
        if self.on_device:  # a worker that holds no task holds no device memory either
            for w, n in self.client.run(device_in_use).items():
                if n and not surfaces.get(w, {}).get("tasks"):
                    out.append(f"{w}: {n:,} device bytes in use while it holds no task")
        for w, surface in surfaces.items():
            base = self._surface.get(w) if self._surface else None
            surface["tasks"] = [k for k in surface["tasks"] if k not in kept]
            for what, names in surface.items():
                new = sorted(set(names) - set(base[what] if base else ()))
                if what == "tasks" and names:
                    out.append(f"{w}: {len(names)} tasks still held ({', '.join(names[:3])})")
                elif new and base is not None:
                    out.append(f"{w}: {what} added: {', '.join(new)}")
        return out

    def mark_baseline(self) -> None:
        """Take the workers' surface as it is now as the clean state (after a first shuffle
        installed what an implementation installs once)."""
        self._surface = self.surface()

    def settled(
        self, timeout: float = 10.0, keep: Collection[str] = (), ignore: tuple[str, ...] = ()
    ) -> list[str] | None:
        """Wait until nothing is left behind (but ``keep``'s tasks and what starts with one of
        ``ignore``); the leftovers after ``timeout`` (None if clean).

        Garbage is collected every second meanwhile: the client's own machinery (an erred
        gather's coroutines) can let go of a cycle that holds input futures only after the
        caller's collection, and the suite must not keep what the shuffle made alive."""
        collected = time.monotonic()
        deadline = collected + timeout
        while True:
            left = [x for x in self.leftovers(keep) if not x.startswith(ignore)]
            if not left:
                return None
            if time.monotonic() > deadline:
                return left
            time.sleep(0.1)
            if time.monotonic() - collected > 1.0:
                gc.collect()
                collected = time.monotonic()

    def forgotten(self, keys: Collection[str], timeout: float) -> bool:
        """Whether the scheduler forgot every one of ``keys`` within ``timeout`` seconds."""
        tasks = self.cluster.scheduler.tasks
        deadline = time.monotonic() + timeout
        while any(k in tasks for k in keys):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def _phase_of(self) -> Callable[[str], str | None]:
        phase_of = getattr(self.adapter, "phase_of", None)
        if phase_of is None:
            raise NotImplementedError(f"{self.adapter.name} has no phase_of(key)")
        return phase_of

    def _arm(self, killer: PhaseKiller) -> PhaseKiller:
        self.cluster.scheduler.add_plugin(killer, name=f"{killer.name}-{killer.phase}")
        return killer

    def kill_in(self, phase: str, victim: str | None = None, when: str = "memory") -> PhaseKiller:
        """Arm a killer for the holder of the next shuffle's first task of ``phase`` to finish
        (or for ``victim``, as that task finishes); ``when="processing"``: for the worker that
        task is sent to, as it is sent."""
        if when not in ("memory", "processing"):
            raise ValueError(f"when must be 'memory' or 'processing', not {when!r}")
        scheduler = self.cluster.scheduler
        return self._arm(
            PhaseKiller(phase, self._phase_of(), self.worker_pids(), scheduler=scheduler, victim=victim, when=when)
        )

    def kill_after(self, phase: str, n: int) -> PhaseKiller:
        """Arm a killer for the worker holding the ``n``-th task of ``phase`` to finish."""
        scheduler = self.cluster.scheduler
        return self._arm(PhaseKiller(phase, self._phase_of(), self.worker_pids(), scheduler=scheduler, n=n))

    def kill_repeatedly(self, phase: str, times: int = 2) -> RepeatedKiller:
        """Arm a killer for ``times`` workers in turn, each as it finishes a task of ``phase``
        in the run the kill before it started."""
        scheduler = self.cluster.scheduler
        pids = self.worker_pids()
        return self._arm(RepeatedKiller(phase, self._phase_of(), pids, scheduler=scheduler, times=times))

    @contextmanager
    def during(self, phase: str, action: Callable[[], int]) -> Iterator[PhaseAction]:
        """``action()`` runs once, in this process, when the first task of ``phase`` is sent
        to a worker; the plugin is removed afterwards."""
        plugin = PhaseAction(phase, self._phase_of(), action)
        name = f"{plugin.name}-{phase}"
        self.cluster.scheduler.add_plugin(plugin, name=name)
        try:
            yield plugin
        finally:
            self.cluster.scheduler.remove_plugin(name=name)

    def close(self) -> None:
        try:
            self.client.close()
            self.cluster.close()
        finally:
            self._config.__exit__(None, None, None)

    def __enter__(self) -> ShuffleCluster:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def for_each_case(
    settings: Any, strategy: Any, body: Callable[[Any], None], examples: Sequence[Any] = ()
) -> None:
    """Run ``body(case)`` for each of ``examples`` (always, in every profile), then for every
    case hypothesis draws, under the profile's settings; the draws depend on the seed alone,
    not on what the process imported or ran before (:func:`conformance.draws.pinned`)."""
    import warnings

    from hypothesis import example, given, note
    from hypothesis.errors import HypothesisDeprecationWarning

    def run(case: Any) -> None:
        for c in case if isinstance(case, tuple) else (case,):
            note(c.describe())
        body(case)

    for case in examples:
        run = example(case)(run)
    run = settings(given(strategy)(run))
    with warnings.catch_warnings(), pinned():
        # distributed's scheduling uses the random module; that is not the strategy's doing
        warnings.simplefilter("ignore", HypothesisDeprecationWarning)
        run()
