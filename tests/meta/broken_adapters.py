"""Deliberately broken adapters: each wraps the reference store with ONE bug.

The first fifteen live here; the rest, by area, in ``broken_tiers``, ``broken_data`` and
``broken_disk`` (built from ``broken_base``). ``EXPECTED`` is the one registry: it maps every
adapter to the conformance ID that must catch it, and ``--impl=broken_adapters:<name>`` loads
any of them. Each class names the SPEC.md clauses its bug breaks in ``violates``.

A few adapters replace the store's own spill-on-demand handler with their own
(``spill_on_demand=False`` plus ``device.add_oom_handler``).
"""

from __future__ import annotations

import hmac as _hmac
import os
import threading

from broken_base import Patching, Wrapped, _Broken, _OwnOom, _OwnOomHandler  # noqa: F401 - re-exported
from broken_data import ZOO as _DATA
from broken_disk import ZOO as _DISK
from broken_mutants import ZOO as _MUTANTS
from broken_tiers import ZOO as _TIERS
from broken_world import ZOO as _WORLD
from inhouse_store import DiskOnlyLosesOnFullDisk

from conformance.api import Snapshot


# 1 ------------------------------------------------------------------------------
class AliasTwice(_Broken):
    """Counts every key's allocation, so an alias is counted twice."""

    name = "broken-alias-twice"
    violates = ("3.2",)

    def inspect(self, store):
        snap = super().inspect(store)
        seen: dict[int, int] = {}
        extra = 0
        for k, t in snap.tiers.items():
            if t == "device" and k in store.allocs:
                aid, n = store.allocs[k]
                extra += n if aid in seen else 0
                seen[aid] = n
        return Snapshot(
            snap.tiers, snap.device_bytes + extra, snap.host_bytes, snap.disk_bytes, snap.lru
        )


# 2 ------------------------------------------------------------------------------
class KeepsExternals(_Broken):
    """Never forgets externals: keeps a strong reference to each one."""

    name = "broken-keeps-externals"
    violates = ("7.3",)

    def register_external(self, store, obj):
        proxy = super().register_external(store, obj)
        store.kept.append(proxy)
        return proxy


# 3 ------------------------------------------------------------------------------
class _MRUWrapped(Wrapped):
    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        for k in reversed(list(self.inner.snapshot().lru)):  # newest becomes least recent
            self.inner[k]


class EvictsMostRecent(_Broken):
    """Evicts the most recently used value first (recency inverted after every put)."""

    name = "broken-evicts-mru"
    violates = ("5.4",)
    wrapper = _MRUWrapped


# 4 ------------------------------------------------------------------------------
class _NoTouchWrapped(Wrapped):
    def __getitem__(self, key):
        order = list(self.inner.snapshot().lru)
        value = self.inner[key]
        now = set(self.inner.snapshot().lru)
        for k in order:  # put recency back as it was before the access
            if k in now:
                self.inner[k]
        return value


class NoRecencyOnAccess(_Broken):
    """Access does not count as use."""

    name = "broken-no-recency"
    violates = ("5.1",)
    wrapper = _NoTouchWrapped


# 5 ------------------------------------------------------------------------------
class _LeakyWrapped(Wrapped):
    def __delitem__(self, key):
        for root, _d, files in os.walk(self.inner.spill_dir):
            for fn in files:
                if ".leak" not in fn:
                    p = os.path.join(root, fn)
                    try:
                        os.link(p, p + ".leak")
                    except OSError:
                        pass
        super().__delitem__(key)


class LeaksSpillFiles(_Broken):
    """Leaves a copy of the spill files behind when a key is deleted."""

    name = "broken-leaks-files"
    violates = ("9.4",)
    wrapper = _LeakyWrapped


# 6 ------------------------------------------------------------------------------
class _NoRoomWrapped(Wrapped):
    def __getitem__(self, key):
        if self.inner.tier_of(key) == "device":
            return self.inner[key]
        limit = self.inner.device_memory_limit
        self.inner.device_memory_limit = 1 << 62  # unspill without making room
        try:
            return self.inner[key]
        finally:
            self.inner.device_memory_limit = limit


class UnspillWithoutRoom(_Broken):
    """Unspills without making room first (or after)."""

    name = "broken-unspill-no-room"
    violates = ("4.1",)
    wrapper = _NoRoomWrapped


# 7 ------------------------------------------------------------------------------
class _NoCheck:
    new = staticmethod(_hmac.new)

    @staticmethod
    def compare_digest(a, b):
        return True


class SkipsHmac(Patching):
    """Never checks the MAC of spill files."""

    name = "broken-skips-hmac"
    violates = ("10.1",)

    def patch(self):
        import reference_impl.store.disk as disk  # private: no public hook exists

        self.set(disk, "hmac", _NoCheck())


# 8 ------------------------------------------------------------------------------
class _LosingWrapped(Wrapped):
    def __setitem__(self, key, value):
        import warnings

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            super().__setitem__(key, value)
        if any(
            "disk" in str(w.message).lower() or "spill" in str(w.message).lower() for w in caught
        ):
            snap = self.inner.snapshot()
            victims = [k for k, t in snap.tiers.items() if t == "host"]
            if victims:
                del self.inner[victims[0]]  # the value "could not be written": gone


class LosesKeyOnFullDisk(_Broken):
    """Drops a value when the disk is full."""

    name = "broken-loses-on-full-disk"
    violates = ("9.6",)
    wrapper = _LosingWrapped


# 9 ------------------------------------------------------------------------------
class _NoLock:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def acquire(self, blocking=True, timeout=-1):
        return True

    def release(self):
        pass


class NoLock(_Broken):
    """The store has no lock (private attribute replaced)."""

    name = "broken-no-lock"
    violates = ("12.1",)

    def create_store(self, env):
        store = super().create_store(env)
        store.inner._lock = _NoLock()
        return store


# 10 -----------------------------------------------------------------------------
_CLASS_LOCK = threading.RLock()


class ClassLevelLock(_Broken):
    """Every store shares one lock (like a class attribute)."""

    name = "broken-class-lock"
    violates = ("12.2",)

    def create_store(self, env):
        store = super().create_store(env)
        store.inner._lock = _CLASS_LOCK
        return store


# 11 -----------------------------------------------------------------------------
class WrongHostBytes(_Broken):
    """Reports host bytes wrongly (half of them)."""

    name = "broken-host-bytes"
    violates = ("3.4",)

    def inspect(self, store):
        snap = super().inspect(store)
        return Snapshot(
            snap.tiers, snap.device_bytes, snap.host_bytes // 2, snap.disk_bytes, snap.lru
        )


# 12 -----------------------------------------------------------------------------
class IgnoresHostLimit(_Broken):
    """Ignores the host limit."""

    name = "broken-ignores-host-limit"
    violates = ("4.4",)

    def create_store(self, env):
        from dataclasses import replace

        return super().create_store(replace(env, host_limit=None))


# 13 -----------------------------------------------------------------------------
class OomSkipsHostLimit(_OwnOom):
    """Spill on demand moves values to host but never cascades host -> disk (dask-cuda)."""

    name = "broken-oom-no-cascade"
    violates = ("8.4",)
    cascade = False


# 14 -----------------------------------------------------------------------------
class OomHandlerOutlivesStore(_OwnOom):
    """close_store() leaves the store's OOM handler registered on the device."""

    name = "broken-oom-handler-outlives-store"
    violates = ("11.4",)
    remove_on_close = False


# 15 -----------------------------------------------------------------------------
class OomHandlerRaises(_OwnOom):
    """The OOM handler raises TypeError once nothing is left to spill (dask-cuda with
    memory_limit=None), instead of letting the device raise its MemoryError."""

    name = "broken-oom-handler-raises"
    violates = ("8.3",)
    raise_when_empty = True


# which conformance ID must catch which bug
EXPECTED: dict[str, tuple[type, str]] = {
    "alias_twice": (AliasTwice, "STORE-ALIAS-001"),
    "keeps_externals": (KeepsExternals, "STORE-EXT-002"),
    "evicts_mru": (EvictsMostRecent, "STORE-LIMIT-003"),
    "no_recency": (NoRecencyOnAccess, "STORE-LIMIT-003"),
    "leaks_files": (LeaksSpillFiles, "STORE-DISK-002"),
    "unspill_no_room": (UnspillWithoutRoom, "STORE-UNSPILL-003"),
    "skips_hmac": (SkipsHmac, "STORE-INTEG-001"),
    "loses_on_full_disk": (LosesKeyOnFullDisk, "STORE-DISK-006"),
    "no_lock": (NoLock, "STORE-THREAD-002"),
    "class_lock": (ClassLevelLock, "STORE-THREAD-003"),
    "host_bytes": (WrongHostBytes, "STORE-ACCT-003"),
    "ignores_host_limit": (IgnoresHostLimit, "STORE-LIMIT-005"),
    "oom_no_cascade": (OomSkipsHostLimit, "STORE-OOM-003"),
    "oom_handler_outlives_store": (OomHandlerOutlivesStore, "STORE-OOM-004"),
    "oom_handler_raises": (OomHandlerRaises, "STORE-OOM-002"),
    **_TIERS,
    **_DATA,
    **_DISK,
    **_MUTANTS,
    **_WORLD,
    # a store written from scratch, not the reference (issue 43): declaring only a disk tier,
    # it loses data on a full disk, and that FAILs (a disk tier implies its faults)
    "inhouse_disk_only": (DiskOnlyLosesOnFullDisk, "STORE-DISK-006"),
}

for _attr, (_cls, _cid) in EXPECTED.items():
    globals()[_attr] = _cls  # --impl=broken_adapters:<attr> (a zero-argument factory)
