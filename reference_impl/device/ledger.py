"""A thread-safe byte ledger with a hard capacity and a true high-water mark."""

from __future__ import annotations

import threading
from collections import deque

from .errors import DeviceOutOfMemoryError
from .oom import OomHandlers

# A handler that says "freed" yet frees nothing would spin forever; this bound
# turns such a bug into a clear OOM instead of a hang.
MAX_OOM_RETRIES = 10_000


class ByteLedger:
    """Counts reserved bytes; never goes above ``capacity``.

    Releases may come from finalizers on any thread, even while this thread
    holds the lock (a GC inside a locked section), so they are queued without
    locking and folded in by whoever next takes the lock.
    """

    def __init__(self, capacity: int, name: str = "device") -> None:
        self.capacity = capacity
        self.name = name
        self.oom_handlers = OomHandlers()
        self._lock = threading.Lock()
        self._in_use = 0
        self._peak = 0
        self._pending_releases: deque[int] = deque()

    # --- releases -------------------------------------------------------
    def release(self, nbytes: int) -> None:
        """Return bytes; safe from finalizers on any thread, never blocks."""
        self._pending_releases.append(nbytes)
        if self._lock.acquire(blocking=False):
            try:
                self._drain()
            finally:
                self._lock.release()

    def _drain(self) -> None:
        pending = self._pending_releases
        while pending:
            self._in_use -= pending.popleft()

    # --- reservations ---------------------------------------------------
    def try_reserve(self, nbytes: int) -> bool:
        with self._lock:
            self._drain()
            if self._in_use + nbytes > self.capacity:
                return False
            self._in_use += nbytes
            if self._in_use > self._peak:
                self._peak = self._in_use
            return True

    def reserve(self, nbytes: int) -> None:
        """Reserve ``nbytes``, asking the OOM handlers for the shortfall first."""
        if nbytes > self.capacity:
            raise DeviceOutOfMemoryError(nbytes, self.in_use(), self.capacity, self.name)
        for _ in range(MAX_OOM_RETRIES):
            if self.try_reserve(nbytes):
                return
            shortfall = self.in_use() + nbytes - self.capacity
            if shortfall <= 0:  # something was freed meanwhile; just retry
                continue
            if not self.oom_handlers.free(shortfall):
                break
        if self.try_reserve(nbytes):
            return
        raise DeviceOutOfMemoryError(nbytes, self.in_use(), self.capacity, self.name)

    # --- readings -------------------------------------------------------
    def in_use(self) -> int:
        with self._lock:
            self._drain()
            return self._in_use

    def peak(self) -> int:
        with self._lock:
            self._drain()
            return self._peak

    def reset_peak(self) -> None:
        with self._lock:
            self._drain()
            self._peak = self._in_use
