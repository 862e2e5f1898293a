"""What the suite owns for a shuffle: the cluster, the workers' devices, and the ground truth.

The suite starts each cluster itself (loopback, worker processes under nannies, one
thread each) and stops it. For ``shuffle.device`` implementations every worker gets a
device of the suite's own making as its process default, so the device's ledger is the
suite's; for every implementation it samples each worker process's RSS (the bound of
clause 14.20, :func:`rss_bound`). Phases are observed on the scheduler (which lives in this
process) and faults are injected from there.
"""

from __future__ import annotations

import concurrent.futures
import gc
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import distributed
from distributed.diagnostics.plugin import SchedulerPlugin, WorkerPlugin

from ..api import ShuffleEnv
from ..store.harness import files_under

CAPACITY_FACTOR = 16  # a worker's device capacity = CAPACITY_FACTOR * its limit
# Clause 14.20: a worker's RSS growth during a shuffle <= the memory it may hold in RAM
# (rss_allowance) + RSS_PARTITIONS x the largest partition + RSS_OVERHEAD. The overhead was
# measured after a warm-up shuffle of the same size (SPEC.md 14.20 gives the figures).
RSS_OVERHEAD = 8 * 2**20
RSS_PARTITIONS = 2
SHUFFLE_TIMEOUT = 120.0  # a shuffle that takes longer hangs (clause 14.5)
DASK_FILES = (".lock", ".dirlock", "global.lock", "purge.lock")


# --------------------------------------------------------------------------- worker side
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


def _worker_surface(dask_worker: Any) -> dict[str, list[str]]:
    """What a shuffle could leave behind on a worker, by name."""
    return {
        "handlers": sorted(dask_worker.handlers),
        "stream_handlers": sorted(dask_worker.stream_handlers),
        "extensions": sorted(dask_worker.extensions),
        "plugins": sorted(dask_worker.plugins),
        "tasks": sorted(str(k) for k in dask_worker.state.tasks),
    }


# --------------------------------------------------------------------------- probes
class RssSampler:
    """Samples every worker process's RSS in a thread of this process (psutil)."""

    def __init__(self, pids: dict[str, int], interval: float = 0.005) -> None:
        import psutil

        self.procs = {w: psutil.Process(pid) for w, pid in pids.items()}
        self.before = {w: p.memory_info().rss for w, p in self.procs.items()}
        self.peak = dict(self.before)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(interval,), daemon=True)
        self._thread.start()

    def _run(self, interval: float) -> None:
        while not self._stop.is_set():
            for w, p in self.procs.items():
                try:
                    self.peak[w] = max(self.peak[w], p.memory_info().rss)
                except Exception:  # the process went away (a fault test)
                    pass
            time.sleep(interval)

    def stop(self) -> dict[str, int]:
        """``{worker: peak RSS above the level before}``."""
        self._stop.set()
        self._thread.join()
        return {w: self.peak[w] - self.before[w] for w in self.procs}


@dataclass
class PhaseKiller(SchedulerPlugin):
    """Scheduler plugin: SIGKILL the worker holding the ``n``-th task of ``phase`` to finish
    (the first by default), as it finishes.

    A finished task, not one just sent: a worker killed as it is sent the shuffle's first
    task may not have joined the shuffle yet, so its loss costs nothing, and a shuffle that
    gives up at the first loss would pass. ``when="processing"`` kills the worker the first
    task of ``phase`` is sent to instead, as it is sent: for a phase every worker has joined
    before (the barrier), where the loss lands while the task runs on the dead worker.
    ``fired`` records (key, worker, pid) once the signal was sent, so that a test can tell a
    fault that happened from one that never did.
    """

    phase: str
    phase_of: Callable[[str], str | None]
    pids: dict[str, int]
    fired: list[tuple[str, str, int]] = field(default_factory=list)
    scheduler: Any = None
    n: int = 1
    done: set[str] = field(default_factory=set)
    name: str = "conformance-phase-killer"
    victim: str | None = None  # kill this worker instead of the task's holder
    when: str = "memory"  # or "processing": as the task is sent, the worker it is sent to

    def transition(self, key, start, finish, *args, **kwargs) -> None:
        if self.fired or finish != self.when or self.phase_of(str(key)) != self.phase:
            return
        self.done.add(str(key))
        ts = self.scheduler.tasks.get(key)
        if self.when == "processing":
            target = self.victim or (ts.processing_on.address if ts is not None and ts.processing_on else None)
            self._kill(key, target)
        elif self.victim is not None:
            self._kill(key, self.victim)
        elif len(self.done) >= self.n and ts is not None and ts.who_has:
            self._kill(key, min(ws.address for ws in ts.who_has))

    def _kill(self, key: Any, worker: str | None) -> None:
        pid = self.pids.get(worker)
        if pid is None:
            return
        os.kill(pid, signal.SIGKILL)
        self.fired.append((str(key), worker, pid))


@dataclass
class RepeatedKiller(PhaseKiller):
    """Scheduler plugin: SIGKILL the worker that finishes the first task of ``phase``, then,
    once the scheduler has removed it, the next worker (of those in ``pids``) to finish a
    task of ``phase``: ``times`` kills, each in the run the one before started."""

    times: int = 2
    removed: set[str] = field(default_factory=set)
    name: str = "conformance-repeated-killer"

    def transition(self, key, start, finish, *args, **kwargs) -> None:
        if len(self.fired) >= self.times or finish != "memory" or self.phase_of(str(key)) != self.phase:
            return
        if self.fired and self.fired[-1][1] not in self.removed:
            return  # the last kill is not through yet: the next must fall in the next run
        ts = self.scheduler.tasks.get(key)
        killed = {w for _k, w, _p in self.fired}
        for ws in sorted(ts.who_has or (), key=lambda ws: ws.address) if ts is not None else ():
            if ws.address in self.pids and ws.address not in killed:
                self._kill(key, ws.address)
                return

    def remove_worker(self, scheduler: Any, worker: str, **kwargs: Any) -> None:
        self.removed.add(worker)


@dataclass
class PhaseAction(SchedulerPlugin):
    """Scheduler plugin: call ``action()`` once, when the first task of ``phase`` is sent to
    a worker; ``fired`` holds what it returned (a count of what it did)."""

    phase: str
    phase_of: Callable[[str], str | None]
    action: Callable[[], int]
    fired: list[int] = field(default_factory=list)
    name: str = "conformance-phase-action"

    def transition(self, key, start, finish, *args, **kwargs) -> None:
        if not self.fired and finish == "processing" and self.phase_of(str(key)) == self.phase:
            self.fired.append(self.action())


# Set in every worker process before it starts (distributed's pre-spawn environment, read by
# glibc's malloc and by pyarrow when they initialise): buffers of 64 KiB and more are mapped
# and unmapped one by one, Arrow allocates through malloc, so what a shuffle frees leaves the
# RSS at once instead of staying in an allocator's pool for reuse, and the RSS growth of a
# shuffle (14.20) is what it holds, not what an earlier one left the allocator.
WORKER_ENVIRON = {"MALLOC_MMAP_THRESHOLD_": "65536", "ARROW_DEFAULT_MEMORY_POOL": "system"}


def worker_addresses(client: distributed.Client) -> list[str]:
    """The workers' addresses, sorted, asked of the scheduler itself.

    Not ``client.scheduler_info()["workers"]``: that refreshes the client's cache and
    returns it, and the client's periodic refresh (``n_workers=0``) can replace the cache
    with one listing no workers in between (under load a round-robin over it divided by
    zero, in the suite's adapters and later in this repository's own tests).
    """
    return sorted(client.sync(client.scheduler.identity, n_workers=-1)["workers"])


def worker_environ() -> dict[str, str]:
    """distributed's pre-spawn environment with the suite's allocator settings on top."""
    import dask

    return dict(dask.config.get("distributed.nanny.pre-spawn-environ", {})) | WORKER_ENVIRON


def rss_allowance(
    on_device: bool, device_kind: str | None, budget: int, host_limit: int | None
) -> int:
    """Clause 14.20: the bytes a worker may hold in RAM. On a device: the host limit, plus the
    budget where the device's memory is host RAM (``sim``); otherwise the budget (which is
    RSS already, 14.2)."""
    if not on_device:
        return budget
    return (host_limit or 0) + (budget if device_kind == "sim" else 0)


def rss_bound(allowance: int, largest: int) -> int:
    """Clause 14.20's bound on a worker's RSS growth, given ``rss_allowance`` and the largest
    partition (input or output) of the shuffle."""
    return allowance + RSS_PARTITIONS * largest + RSS_OVERHEAD


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
        try:
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
        except BaseException:
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
        return self.client.run(_worker_surface)

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


class ShuffleHang(AssertionError):
    pass


def load_inputs(adapter: Any, env: Any, client: Any, tables: Sequence[Any], timeout: float) -> Any:
    """``tables`` placed as ``adapter`` wants them (its ``load_inputs``), waited for; a
    ShuffleHang after ``timeout`` seconds. Any cluster with a client and an env will do."""
    loader = getattr(adapter, "load_inputs", None)
    if loader is None:
        return list(tables)
    inputs = call_with_timeout(lambda: loader(list(tables), env), timeout)
    futures = distributed.futures_of(inputs)
    if futures:
        with client.as_current():
            distributed.wait(futures, timeout=timeout)
    return inputs


def forget_error(exc: BaseException) -> None:
    """An error's frames hold the inputs (and the client the erred outputs): drop them, the
    whole chain's, so that what the shuffle made can go (the suite must not keep it alive)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        traceback.clear_frames(exc.__traceback__)
        exc = exc.__cause__ or exc.__context__
    gc.collect()


def call_with_timeout(fn: Callable[[], Any], timeout: float) -> Any:
    """``fn()``, or a ShuffleHang after ``timeout`` seconds (the call is left running; the
    cluster's close ends it)."""
    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="conformance-shuffle")
    fut = pool.submit(fn)
    try:
        result = fut.result(timeout=timeout)
    except concurrent.futures.TimeoutError:
        pool.shutdown(wait=False)
        raise ShuffleHang(f"the shuffle did not finish within {timeout:.0f} s") from None
    except BaseException:
        # The error reaches this thread while the pool's thread still runs the call's last
        # lines, its frame holding ``fn`` (and so the inputs ``fn`` closes over): wait for
        # it, so that a caller clearing the error's frames (forget_error) can.
        pool.shutdown(wait=True)
        raise
    pool.shutdown(wait=True)
    return result


def for_each_case(
    settings: Any, strategy: Any, body: Callable[[Any], None], examples: Sequence[Any] = ()
) -> None:
    """Run ``body(case)`` for each of ``examples`` (always, in every profile), then for every
    case hypothesis draws, under the profile's settings."""
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
    with warnings.catch_warnings():
        # distributed's scheduling uses the random module; that is not the strategy's doing
        warnings.simplefilter("ignore", HypothesisDeprecationWarning)
        run()
