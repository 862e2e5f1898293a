"""``store-churn``: many threads doing random operations on one store per worker.

Values are sized around the device limit (some above it), externals come and go, and
device allocations made outside the store put on-demand OOM pressure on it; each thread
owns its keys, so the model of what must be stored is exact. At the end: the store-wide
invariants of the conformance harness (tiers, limits, ledger vs reported bytes, disk
bytes vs files), every value read back against its checksum, and a clean close.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from pathlib import Path

import numpy as np

from conformance.api import evict
from conformance.store.harness import InvariantError, StoreHarness, digest, host_bytes, value_digest

from ..impls import Impl
from ..progress import Progress
from ..record import RunRecord
from ..sampler import Sampler
from ..settings import Settings

MAX_ERRORS = 5  # per thread, then it stops


class _Gate:
    """Shared for ordinary operations, exclusive for OOM pressure: a scratch allocation that
    leaves the device nearly full is the store's to make room for, not the other threads'."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False

    @contextlib.contextmanager
    def shared(self):
        with self._cond:
            self._cond.wait_for(lambda: not self._writer)
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self):
        with self._cond:
            self._cond.wait_for(lambda: not self._writer)
            self._writer = True
            self._cond.wait_for(lambda: self._readers == 0)
        try:
            yield
        finally:
            with self._cond:
                self._writer = False
                self._cond.notify_all()


class _Store:
    """One worker's store, the model of its contents, and its counters."""

    def __init__(self, impl: Impl, settings: Settings, index: int, root: Path) -> None:
        caps = impl.caps
        host = settings.host_memory if "store.limit.host" in caps else None
        self.h = StoreHarness(impl.adapter, settings.device, root, device_limit=settings.device_memory,
                              host_limit=host, capacity=4 * settings.device_memory)
        self.caps, self.index = caps, index
        self.model: dict[str, tuple[str, int]] = {}  # key -> (digest, nbytes)
        self.lock = contextlib.nullcontext() if "store.threadsafe" in caps else threading.Lock()
        self.gate = _Gate()
        self.counts: dict[str, int] = {}
        self.count_lock = threading.Lock()

    def count(self, what: str) -> None:
        with self.count_lock:
            self.counts[what] = self.counts.get(what, 0) + 1

    def reading(self) -> dict:
        with self.lock:
            snap = self.h.snapshot()
            return {"device": self.h.ledger(), "host": snap.host_bytes, "disk": snap.disk_bytes}


def run(settings: Settings, record: RunRecord, progress: Progress, impls: list[Impl], workdir: Path) -> None:
    for impl in impls:
        if "store" not in impl.caps:
            record.note(f"{impl.name}: skipped, it does not declare 'store'")
            continue
        _run_one(settings, record, progress, impl, workdir / impl.name)


def _run_one(settings, record, progress, impl, root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    threads = settings.threads if "store.threadsafe" in impl.caps else 1
    if threads != settings.threads:
        record.note(f"{impl.name}: one thread per store (it does not declare store.threadsafe)")
    stores = [_Store(impl, settings, w, root) for w in range(settings.workers)]
    record.limits.update({"device limit": settings.device_memory,
                          "host limit": stores[0].h.env.host_limit})
    stop = threading.Event()
    per_thread_bytes = settings.data // (settings.workers * threads)
    workers = [
        threading.Thread(target=_churn, args=(s, t, settings, record, stop, per_thread_bytes),
                         name=f"churn-{s.index}-{t}", daemon=True)
        for s in stores for t in range(threads)
    ]
    duration = settings.duration or 20.0
    progress.start(f"{impl.name}: store-churn, {len(workers)} threads", int(duration))
    read = lambda: {f"s{s.index}": s.reading() for s in stores}  # noqa: E731
    start = time.perf_counter()
    clean = False
    try:
        with Sampler(record, read, settings.interval):
            for t in workers:
                t.start()
            while time.perf_counter() - start < duration and any(t.is_alive() for t in workers):
                time.sleep(1.0)
                progress.advance(1, status=f"{sum(sum(s.counts.values()) for s in stores):,} ops")
            stop.set()
            for t in workers:
                t.join()
        clean = True
    finally:
        stop.set()
        for s in stores:
            if clean:
                _final_checks(s, impl.name, record)
            else:
                with contextlib.suppress(Exception):
                    s.h.close(check=False)
    ops = {}
    for s in stores:
        for k, v in s.counts.items():
            ops[k] = ops.get(k, 0) + v
    record.figures.update({f"{impl.name} ops {k}": v for k, v in sorted(ops.items())})
    record.timings[f"{impl.name} churn"] = time.perf_counter() - start


def _churn(s: _Store, tid: int, settings: Settings, record: RunRecord, stop, budget: int) -> None:
    rng = np.random.default_rng([settings.seed, s.index, tid])
    limit, h, caps = settings.device_memory, s.h, s.caps
    mine: dict[str, tuple[str, int]] = {}
    held: list = []  # externals kept alive for a while
    live = 0
    errors = 0
    n = 0
    while not stop.is_set() and errors < MAX_ERRORS:
        n += 1
        op = rng.choice(["put", "get", "del", "ext", "oom", "evict"], p=[0.4, 0.3, 0.12, 0.06, 0.06, 0.06])
        key = f"t{tid}-{int(rng.integers(0, 64))}"
        if op in ("get", "del") and mine:
            key = list(mine)[int(rng.integers(0, len(mine)))]
        gate = s.gate.exclusive() if op == "oom" else s.gate.shared()
        try:
            with gate, s.lock:
                if op == "put" or (op in ("get", "del") and key not in mine):
                    big = rng.random() < 0.05
                    nbytes = int(rng.integers(limit // 2, limit + limit // 4)) if big else int(
                        rng.integers(max(8, limit // 64), max(16, limit // 4)))
                    if live + nbytes > budget and mine:  # keep the live data near --data
                        old = next(iter(mine))
                        del h.store[old]
                        live -= mine.pop(old)[1]
                    vseed = int(rng.integers(0, 2**31))
                    h.store[key] = h.value(nbytes, vseed)
                    live += nbytes - (mine[key][1] if key in mine else 0)
                    mine[key] = (digest(host_bytes(vseed, nbytes)), nbytes)
                    s.count("put")
                elif op == "get":
                    got = value_digest(h.device, h.store[key])
                    if got != mine[key][0]:
                        record.violate(f"{h.adapter.name} store s{s.index}: {key!r} read back different bytes")
                        errors += 1
                    s.count("get")
                elif op == "del":
                    del h.store[key]
                    live -= mine.pop(key)[1]
                    s.count("del")
                elif op == "ext" and "store.external" in caps:
                    obj = h.value(int(rng.integers(8, max(16, limit // 8))), n)
                    handle = h.adapter.register_external(h.store, obj)
                    held.append(handle if handle is not None else obj)  # the store may spill it
                    del obj, handle
                    del held[:-2]
                    s.count("external")
                elif op == "oom" and "store.oom.on_demand" in caps:
                    try:  # more than the room left beside the store: its OOM handler must spill
                        scratch = h.device.asarray(np.zeros(int(h.device.capacity - limit // 2), np.uint8))
                        del scratch
                        s.count("oom pressure ok")
                    except MemoryError:  # other threads' values and externals left too little
                        s.count("oom pressure refused")
                elif op == "evict" and "store.evict.manual" in caps:
                    evict(h.adapter, h.store, limit // 4)
                    s.count("evict")
        except Exception as exc:
            errors += 1
            record.violate(f"{h.adapter.name} store s{s.index}: {op} {key!r} raised {type(exc).__name__}: {exc}")
    held.clear()
    with s.count_lock:
        s.model.update(mine)


def _final_checks(s: _Store, name: str, record: RunRecord) -> None:
    gc.collect()
    where = f"{name} store s{s.index}"
    try:
        s.h.check(set(s.model))
    except InvariantError as exc:
        record.violate(f"{where}: invariant: {exc}")
    except Exception as exc:
        record.violate(f"{where}: inspect failed: {type(exc).__name__}: {exc}")
    bad = []
    for key, (want, _n) in s.model.items():
        try:
            if value_digest(s.h.device, s.h.store[key]) != want:
                bad.append(key)
        except Exception as exc:
            record.violate(f"{where}: {key!r} lost: {type(exc).__name__}: {exc}")
    if bad:
        record.violate(f"{where}: {len(bad)} values read back wrong, e.g. {bad[:3]}")
    record.figures[f"{where} keys checked"] = len(s.model)
    try:
        s.h.close()
    except InvariantError as exc:
        record.violate(f"{where}: close: {exc}")
