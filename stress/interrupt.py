"""SIGINT as one KeyboardInterrupt in the main thread, raised again only if Python dropped it.

Python prints and drops an exception raised inside a gc callback or a ``__del__``
("Exception ignored in ..."); distributed's GC diagnosis runs such a callback, and a SIGINT
landing in it was lost, so the run went on to its end (CI, 2026-12-02). A dropped
KeyboardInterrupt reaches ``sys.unraisablehook``: that, and only that, raises it again.

An earlier design raised it again every second until the run had taken it. That also
interrupted the run's own cleanup (a cluster half closed, its nannies restarting workers
into a removed spill directory: CI, 2026-12-05), so nothing here raises while an
interrupt is already unwinding the run.
"""

from __future__ import annotations

import _thread
import signal
import sys
import threading
import time
from typing import Any

CLEANUP_GRACE_S = 60.0


class Interrupt:
    """Install with ``with Interrupt() as interrupt:``; set ``taken`` once the run has
    caught the KeyboardInterrupt. At most one is unwinding the run at any time: a second
    SIGINT within ``CLEANUP_GRACE_S`` of the first does nothing, so cleanup is not cut
    short; one after that raises again (something swallowed the first)."""

    def __init__(self) -> None:
        self.taken = threading.Event()
        self.raised = 0  # KeyboardInterrupts raised by the handler, re-raises included
        self.dropped = 0  # of those, dropped by Python and raised again
        self._previous_signal: Any = None
        self._previous_hook: Any = None
        self._in_hook = False
        self._last = 0.0

    def __call__(self, signum: int, frame: Any) -> None:
        if self.taken.is_set():
            return
        if self.raised > self.dropped and time.monotonic() - self._last < CLEANUP_GRACE_S:
            return  # one KeyboardInterrupt is already unwinding the run
        if self._in_hook:
            return self._again()
        self.raised += 1
        self._last = time.monotonic()
        raise KeyboardInterrupt

    def _unraisable(self, unraisable: Any) -> None:
        self._in_hook = True
        try:
            self._previous_hook(unraisable)
            if isinstance(unraisable.exc_value, KeyboardInterrupt) and not self.taken.is_set():
                self.dropped += 1
                self._again()
        finally:
            self._in_hook = False

    def _again(self) -> None:
        """SIGINT again, shortly, from another thread: run from the hook, the handler would
        raise inside it, and Python drops what a hook raises too."""
        timer = threading.Timer(0.01, _thread.interrupt_main)
        timer.daemon = True  # never what keeps the process from exiting
        timer.start()

    def __enter__(self) -> Interrupt:
        self._previous_signal = signal.signal(signal.SIGINT, self)
        self._previous_hook = sys.unraisablehook
        sys.unraisablehook = self._unraisable
        return self

    def __exit__(self, *exc: object) -> None:
        self.taken.set()
        sys.unraisablehook = self._previous_hook
        signal.signal(signal.SIGINT, self._previous_signal)
