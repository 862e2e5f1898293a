"""Waiting on a client's futures without ``Client.as_current()``.

``as_current()`` is documented as thread-local, but it also enters
``dask.config.set(scheduler="dask.distributed")``, which is process-global: two threads in it
that leave in the order they entered leave that setting behind for the whole process, and
every later ``compute()`` on dask's default scheduler fails with "Requested dask.distributed
scheduler but no Client active" (issue 45: SHUF-DASK-001's ``sort_values``, run after other
tests; ``docs/findings/dask-tasks-repro/as_current_leaks_scheduler.py``). The suite's waits run
in threads that can overlap (SHUF-CONC-001's two shuffles at once, a call a ShuffleHang left
running), so they name the client's loop instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import CancelledError
from typing import Any


def settle(client: Any, futures: Sequence[Any], timeout: float | None = None) -> None:
    """Return once every future is finished, erred or cancelled; TimeoutError after
    ``timeout`` seconds. Touches no process-global state."""
    import distributed

    for _ in distributed.as_completed(list(futures), loop=client.loop, timeout=timeout):
        pass


def wait(client: Any, futures: Sequence[Any], timeout: float | None = None) -> None:
    """``distributed.wait(futures, timeout)`` on ``client``: :func:`settle`, then
    CancelledError naming the cancelled ones, as ``distributed.wait`` raises."""
    futures = list(futures)
    settle(client, futures, timeout)
    cancelled = [f.key for f in futures if f.status == "cancelled"]
    if cancelled:
        raise CancelledError(cancelled)
