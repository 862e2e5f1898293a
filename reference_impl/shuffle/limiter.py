"""How much a worker's shuffle may hold: room on the device, an allowance on the host.

``DeviceRoom`` reserves bytes the shuffle is about to allocate outside the store (a
copied input chunk and its partitions, an output being assembled) against the store's
device limit, spilling least recently used data first, so store + reservations stay
under the limit. ``HostBudget`` is what received shards may take in host memory before
they are written to their files: what the store's host limit leaves free, never less
than a floor (so a store full of spilled inputs does not turn every shard into a write)
of at most a quarter of that limit: the shuffle's host bytes stay within 1.25x of it.
Whatever room is left, the allowance is at most ``HOST_MAX`` (8 MiB): shards past it go
to their files (the page cache, not the worker's RSS), as P2P writes its shards at once.
Holding every shard in memory while the host tier had room made a worker's RSS grow with
the data it received (issue 46: +40 MiB of buffers at 256 x 256, where P2P grew +12 MiB).

Both read the store's O(1) counters, never ``stats()`` (a walk over every key), since
they are asked on every chunk and every received batch.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

HOST_FLOOR = 8 * 2**20  # config reference-impl.shuffle.host-floor
HOST_DEFAULT = 256 * 2**20  # a worker whose store has no host limit; reference-impl.shuffle.host-buffer
HOST_MAX = 8 * 2**20  # at most this, whatever room is left; reference-impl.shuffle.host-buffer-max


class DeviceRoom:
    """Reservations against the device limit of the worker's store (none: no limit)."""

    def __init__(self, store: Callable[[], Any]) -> None:
        self._store = store
        self._lock = threading.Lock()
        self.reserved = 0

    @contextlib.contextmanager
    def __call__(self, nbytes: int) -> Iterator[None]:
        store = self._store()
        nbytes = max(int(nbytes), 0)
        if store is None or nbytes == 0:
            yield
            return
        with self._lock:
            used = store.device_bytes
            excess = used + self.reserved + nbytes - store.device_memory_limit
            if excess > 0 and used:
                store.evict(min(excess, used))
            self.reserved += nbytes
        try:
            yield
        finally:
            with self._lock:
                self.reserved -= nbytes


class HostBudget:
    """Host bytes of received shards on this worker, over every run, and their allowance."""

    def __init__(
        self,
        store: Callable[[], Any],
        floor: int = HOST_FLOOR,
        default: int = HOST_DEFAULT,
        most: int | None = HOST_MAX,
    ) -> None:
        self._store = store
        self.floor = floor
        self.default = default
        self.most = most
        self.buffered = 0
        self._lock = threading.Lock()

    def add(self, nbytes: int) -> None:
        """``nbytes`` more (negative: fewer) held in host memory by some run's buffers."""
        with self._lock:
            self.buffered += nbytes

    def allowance(self) -> int:
        return self._room() if self.most is None else min(self._room(), self.most)

    def _room(self) -> int:
        store = self._store()
        limit = getattr(store, "memory_limit", None)
        if limit is None:
            return max(self.default, self.floor)
        # a floor of at most a quarter of the limit: a tiny host tier means small writes
        return max(limit - store.host_bytes, min(self.floor, limit // 4), 1)



def return_freed_memory() -> None:
    """Give the C allocator's free pages back to the OS (glibc only; elsewhere nothing).

    A shuffle frees many buffers of many sizes; glibc keeps the freed heap as RSS (90 to
    135 MiB per worker after a shuffle, in issue 24's measurements), which the nanny
    counts against the worker's memory limit until something else reuses it."""
    global _TRIM
    if _TRIM is None:
        try:
            import ctypes

            _TRIM = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _TRIM = False
    if _TRIM:
        _TRIM(0)


_TRIM: Any = None
