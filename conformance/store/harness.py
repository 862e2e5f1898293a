"""What the suite owns: devices, values, stores under test, and the invariants.

The suite's ground truth is the device's ledger; a store's own numbers are
only what is being checked.
"""

from __future__ import annotations

import gc
import hashlib
import itertools
import os
import threading
import time
from collections.abc import Hashable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ..api import TIERS, Snapshot, StoreEnv

LIMIT = 64 * 1024  # the default device limit of a store under test
CAPACITY_FACTOR = 4  # device capacity = CAPACITY_FACTOR * limit
_counter = itertools.count()


def make_device(kind: str, capacity: int) -> Any:
    from reference_impl import get_device

    return get_device(kind, capacity)


# --------------------------------------------------------------------------- values
def host_bytes(seed: int, nbytes: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, nbytes, dtype=np.uint8)


def make_value(device: Any, nbytes: int, seed: int = 0) -> Any:
    """A fresh device array of ``nbytes`` bytes with deterministic content."""
    return device.asarray(host_bytes(seed, nbytes))


def to_host(device: Any, value: Any) -> np.ndarray:
    """Read a (possibly proxied) device array back as a host uint8 array."""
    try:
        host = device.to_host(value)
    except TypeError:
        host = np.asarray(value)
    return np.ascontiguousarray(host).view(np.uint8).reshape(-1)


def digest(data: Any) -> str:
    return hashlib.blake2b(
        np.ascontiguousarray(data).view(np.uint8).tobytes(), digest_size=16
    ).hexdigest()


def value_digest(device: Any, value: Any) -> str:
    return digest(to_host(device, value))


def seed_digest(seed: int, nbytes: int) -> str:
    return digest(host_bytes(seed, nbytes))


# --------------------------------------------------------------------------- files
def files_under(directory: str | Path) -> dict[str, int]:
    """``{path: size}`` of every regular file below ``directory``."""
    out = {}
    for root, _dirs, files in os.walk(directory):
        for fn in files:
            p = os.path.join(root, fn)
            try:
                out[p] = os.path.getsize(p)
            except FileNotFoundError:
                pass
    return out


def open_fds() -> set[str] | None:
    try:
        listed = os.listdir("/proc/self/fd")
    except OSError:
        return None
    # Not the listing's own descriptor (closed by now): a file opened later reuses its number,
    # and a baseline holding it would hide that file.
    return {fd for fd in listed if os.path.exists(f"/proc/self/fd/{fd}")}


class InvariantError(AssertionError):
    pass


def _fail(msg: str) -> None:
    raise InvariantError(msg)


# --------------------------------------------------------------------------- harness
class StoreHarness:
    """One store under test on a device the suite owns.

    ``check()`` verifies the invariants every store must keep after every
    public call; ``close()`` also verifies cleanup.
    """

    def __init__(
        self,
        adapter: Any,
        device_kind: str,
        root: str | Path,
        *,
        device_limit: int = LIMIT,
        host_limit: int | None = None,
        capacity: int | None = None,
        device: Any = None,
        caps: Iterable[str] | None = None,
        disk_accounting: bool = True,
    ) -> None:
        self.adapter = adapter
        # disk_bytes == bytes of the files under spill_dir: judged on its own ID
        # (STORE-DISK-007); tests of file cleanup turn it off so they judge only that.
        self.disk_accounting = disk_accounting
        self.caps = frozenset(caps if caps is not None else adapter.capabilities)
        self.device = (
            device
            if device is not None
            else make_device(device_kind, capacity or CAPACITY_FACTOR * device_limit)
        )
        spill_dir = Path(root) / f"spill-{next(_counter)}"
        spill_dir.mkdir(mode=0o700, parents=True)
        os.chmod(spill_dir, 0o700)
        self.env = StoreEnv(self.device, device_limit, host_limit, str(spill_dir))
        gc.collect()
        self.baseline = self.device.bytes_in_use()
        self.store = adapter.create_store(self.env)
        self.closed = False

    # readings
    @property
    def limit(self) -> int:
        return self.env.device_limit

    def snapshot(self) -> Snapshot:
        return self.adapter.inspect(self.store)

    def ledger(self) -> int:
        return self.device.bytes_in_use() - self.baseline

    def value(self, nbytes: int, seed: int = 0) -> Any:
        return make_value(self.device, nbytes, seed)

    # invariants
    def check(
        self,
        keys: Iterable[Hashable] | None = None,
        *,
        held: int = 0,
        oversize: dict[Hashable, int] | None = None,
    ) -> Snapshot:
        """Check the store-wide invariants; ``held`` = device bytes the suite itself holds.

        ``oversize`` maps keys to their device size when it exceeds the limit
        (the single-object rule).
        """
        snap = self.snapshot()
        tiers = dict(snap.tiers)
        if keys is not None:
            self._check_keys(tiers, set(keys))
        self._check_device(snap, tiers, oversize or {})
        self.check_ledger(snap, held)  # the device's own ledger agrees with what the store says
        self._check_host_and_disk(snap, tiers)
        if snap.lru is not None and "store.lru.strict" in self.caps:
            dev_keys = {k for k, t in tiers.items() if t == "device"}
            if set(snap.lru) != dev_keys or len(snap.lru) != len(dev_keys):
                _fail(
                    f"lru {list(snap.lru)!r} is not the set of device-tier keys {sorted(map(repr, dev_keys))}"
                )
        return snap

    def _check_keys(self, tiers: dict[Hashable, str], keys: set[Hashable]) -> None:
        """Every key in exactly one tier; keys() and len() agree with the model's ``keys``."""
        if set(tiers) != keys:
            _fail(
                f"inspect() tiers cover {sorted(map(repr, tiers))}, the mapping holds "
                f"{sorted(map(repr, keys))}: every key must be in exactly one tier"
            )
        if set(self.store.keys()) != keys or len(self.store) != len(keys):
            _fail(
                f"keys()/len() disagree with the model: {sorted(map(repr, self.store.keys()))} vs {sorted(map(repr, keys))}"
            )

    def _check_device(
        self, snap: Snapshot, tiers: dict[Hashable, str], oversize: dict[Hashable, int]
    ) -> None:
        """Known tiers, no negative counter, and the device limit with the single-object rule."""
        bad = {k: t for k, t in tiers.items() if t not in TIERS}
        if bad:
            _fail(f"unknown tiers {bad}")
        for name in ("device_bytes", "host_bytes", "disk_bytes"):
            if getattr(snap, name) < 0:
                _fail(f"{name} is negative: {getattr(snap, name)}")
        if snap.device_bytes > self.limit:
            on_device = [k for k, t in tiers.items() if t == "device"]
            if not (
                len(on_device) == 1
                and on_device[0] in oversize
                and snap.device_bytes <= oversize[on_device[0]]
            ):
                _fail(
                    f"device_bytes {snap.device_bytes:,} > device limit {self.limit:,} "
                    f"(device-tier keys: {on_device!r})"
                )

    def _check_host_and_disk(self, snap: Snapshot, tiers: dict[Hashable, str]) -> None:
        """The host limit; disk bytes match the files in spill_dir, and only a store with a
        disk tier writes files."""
        limit_host = self.env.host_limit if "store.limit.host" in self.caps else None
        if limit_host is not None and snap.host_bytes > limit_host:
            _fail(f"host_bytes {snap.host_bytes:,} > host limit {limit_host:,}")
        files = files_under(self.env.spill_dir)
        if "store.spill.disk" in self.caps:
            if self.disk_accounting and snap.disk_bytes != sum(files.values()):
                _fail(
                    f"disk_bytes {snap.disk_bytes:,} != {sum(files.values()):,} bytes in "
                    f"{len(files)} file(s) under spill_dir"
                )
            if not any(t == "disk" for t in tiers.values()) and snap.disk_bytes == 0 and files:
                _fail(f"no key is on disk, yet spill_dir holds {sorted(files)}")
        elif files:
            _fail(f"store without store.spill.disk wrote files: {sorted(files)}")

    def check_ledger(self, snap: Snapshot | None = None, held: int = 0) -> None:
        snap = snap or self.snapshot()
        measured = self.ledger() - held
        if measured != snap.device_bytes:
            gc.collect()  # cyclic garbage may still hold device memory
            snap = self.snapshot()
            measured = self.ledger() - held
        if measured != snap.device_bytes:
            _fail(
                f"the store reports device_bytes={snap.device_bytes:,} but the device ledger "
                f"measures {measured:,} bytes held on its behalf"
            )

    # cleanup
    def close(self, *, check: bool = True) -> None:
        if self.closed:
            return
        self.closed = True
        self.adapter.close_store(self.store)
        self.store = None
        if not check:
            return
        gc.collect()
        if self.ledger() != 0:
            _fail(f"after close, {self.ledger():,} device bytes are still in use (leak)")
        files = files_under(self.env.spill_dir)
        if files:
            _fail(f"after close, spill_dir still holds {sorted(files)}")


def wait_for(predicate, timeout: float = 5.0, interval: float = 0.01) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


class LeakGuard:
    """Threads and file descriptors present before a test must be all that is left after."""

    def __init__(self) -> None:
        self.threads = set(threading.enumerate())
        self.fds = open_fds()

    def check(self) -> None:
        gc.collect()
        if not wait_for(lambda: not self._extra_threads(), timeout=5.0):
            _fail(f"threads left behind: {[t.name for t in self._extra_threads()]}")
        if self.fds is not None and not wait_for(lambda: not self._extra_fds(), timeout=2.0):
            targets = []
            for fd in sorted(self._extra_fds()):
                try:
                    targets.append(f"{fd} -> {os.readlink(f'/proc/self/fd/{fd}')}")
                except OSError:
                    pass  # closed since the listing (late, but not left open)
            if targets:
                _fail(f"file descriptors left open: {targets}")

    def _extra_threads(self):
        return [t for t in threading.enumerate() if t not in self.threads and t.is_alive()]

    def _extra_fds(self):
        now = open_fds() or set()
        return now - self.fds
