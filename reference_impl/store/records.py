"""Bookkeeping records: what the store knows about each proxy and each key.

An *eviction unit* is a key's whole value (an :class:`Entry`) or one external
proxy (a :class:`Record` that no key holds). Units that share a proxy or a
base allocation form a *group* that always moves between tiers together, so a
key is always in exactly one tier and spilling really frees the memory.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from typing import Any


class Record(weakref.ref):
    """One proxy the store tracks; the record is itself the weak reference to it.

    ``rec()`` is the proxy, or None once it died; the weak reference's callback
    (set by the tracker) only queues the record. Sizes are copied here so the
    store can forget a dead proxy without touching it. Records hash and compare
    by identity, never through the proxy (hashing a proxy would unspill it).
    """

    __slots__ = (
        "pid", "holders", "tier", "alloc_id", "alloc_nbytes", "more_allocs", "held_nbytes",
        "restore_nbytes", "clean_nbytes", "tick", "lru", "seq", "raw_id", "__weakref__",
    )  # fmt: skip

    __hash__ = object.__hash__
    __eq__ = object.__eq__
    __ne__ = object.__ne__

    def __init__(self, proxy: Any, callback: Callable[[Record], Any] | None = None) -> None:
        # weakref.ref.__new__ takes (proxy, callback) and did the referencing.
        self.pid = 0
        # The entries (keys) holding the proxy: None for an external, the Entry itself
        # for one key (the common case: no set to allocate, or to reach on every use),
        # a set of two or more otherwise.
        self.holders: Entry | set[Entry] | None = None
        # Where its bytes are: the one field that says so, written only by Accounting (the
        # proxy's state holds what this tier keeps; an external's ``lru`` follows it).
        self.tier = "device"
        # Its device allocations (none unless on device). One, the common case, sits in
        # two slots (no dict to allocate or to reach on every del); two or more in a dict.
        self.alloc_id: int | None = None
        self.alloc_nbytes = 0
        self.more_allocs: dict[int, int] | None = None
        self.held_nbytes = 0  # bytes it holds on host or disk (device bytes: its allocs)
        self.restore_nbytes = 0  # device bytes needed to bring it back
        # The size of its *clean copy* (0: none): the file an immutable value was read back
        # from, kept while it is on device or host (``ProxyState.clean`` holds it, so it dies
        # with the proxy, as a spilled proxy's file does), counted in disk_bytes.
        self.clean_nbytes = 0
        self.tick = 0
        self.lru = 0  # which of Recency's lists holds it (lru.NONE, DEVICE, HOST)
        self.seq = 0  # sequence number of its live entry there
        self.raw_id = 0  # id() of its device object in UnitIndex.raw (0: none)

    @property
    def external(self) -> bool:
        return self.holders is None

    def entries(self) -> list[Entry]:
        """The entries holding the proxy (none for an external)."""
        holders = self.holders
        if holders is None:
            return []
        return list(holders) if type(holders) is set else [holders]

    def some_entry(self) -> Entry | None:
        """One entry holding the proxy, or None for an external."""
        holders = self.holders
        return next(iter(holders)) if type(holders) is set else holders

    @property
    def allocs(self) -> dict[int, int]:
        """``{allocation id: nbytes}`` of its device object (a new dict: read-only use)."""
        if self.alloc_id is not None:
            return {self.alloc_id: self.alloc_nbytes}
        return dict(self.more_allocs) if self.more_allocs else {}

    def set_allocs(self, allocs: dict[int, int]) -> None:
        if len(allocs) == 1:
            self.alloc_id, self.alloc_nbytes = next(iter(allocs.items()))
            self.more_allocs = None
        else:
            self.alloc_id, self.alloc_nbytes = None, 0
            self.more_allocs = allocs or None

    @property
    def device_nbytes(self) -> int:
        if self.alloc_id is not None:
            return self.alloc_nbytes
        return sum(self.more_allocs.values()) if self.more_allocs else 0


class Entry:
    """One key's value: its (proxified) structure and the proxies inside.

    A value without device objects is a *host value*: it is counted with
    ``dask.sizeof`` and may itself be written to disk (then ``value`` is None). One host
    object stored under several keys while the store holds it is one value: its keys are
    *peers*, counted once (through the first) and moved between tiers together, one file.
    """

    __slots__ = (
        "key", "value", "pids", "rec", "leaf_nbytes", "is_host_value", "file", "tick", "lru", "seq",
        "peers",
    )  # fmt: skip

    def __init__(self, key: Hashable, value: Any, pids: list[int], leaf_nbytes: int) -> None:
        self.key = key
        self.value = value
        self.pids = pids
        # The record of its one proxy, set by the store when it holds exactly one: the
        # hot paths read it directly instead of looking ``pids[0]`` up (fewer cache misses
        # in a large store). A record held by a key stays tracked while the key lives.
        self.rec: Record | None = None
        self.is_host_value = not pids
        self.leaf_nbytes = leaf_nbytes  # host leaves (for a host value: the whole value)
        self.file: Any = None
        self.tick = 0
        self.lru = 0
        self.seq = 0
        # Host values only: the keys holding this very object (one list, shared by them all,
        # its first the *owner*, whose bytes the totals count), or None when one key does.
        self.peers: list[Entry] | None = None


Unit = Entry | Record
"""An eviction unit: a key's value, or one external proxy."""
