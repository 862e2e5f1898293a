"""OOM handlers: callbacks a full device asks to free memory (like RMM's failure callback)."""

from __future__ import annotations

import threading
from collections.abc import Callable

OomHandler = Callable[[int], bool]


class OomHandlers:
    """An ordered, thread-safe set of ``handler(nbytes) -> bool`` callbacks.

    A handler returns True when it freed something, so a retry loop that stops
    once every handler says False always ends.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._handlers: list[OomHandler] = []

    def add(self, handler: OomHandler) -> None:
        if not callable(handler):
            raise TypeError(f"OOM handler must be callable, got {handler!r}")
        with self._lock:
            if handler not in self._handlers:
                self._handlers.append(handler)

    def remove(self, handler: OomHandler) -> None:
        with self._lock:
            try:
                self._handlers.remove(handler)
            except ValueError:
                raise KeyError(f"OOM handler {handler!r} is not registered") from None

    def free(self, shortfall: int) -> bool:
        """Ask each handler in turn for ``shortfall`` bytes; True if any freed something.

        Called without any device lock held: handlers spill, and spilling frees
        device memory, which must be able to update the ledger.
        """
        with self._lock:
            handlers = list(self._handlers)
        return any(handler(shortfall) for handler in handlers)

    def __len__(self) -> int:
        return len(self._handlers)
