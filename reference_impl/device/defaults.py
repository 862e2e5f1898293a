"""This process's device: the one mechanism behind every "default device".

A dask worker sets its device here (:func:`set_default_device`); anything that must
land somewhere without being told where (an array or table unpickled or received from
another process, ``get_device("auto")`` in a task) asks :func:`process_device` for a
kind, and gets the set device when it is of that kind, else one made on first use and
kept for the process. One lock, one set device, one device made per kind.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

_lock = threading.RLock()
_chosen: Any = None
_made: dict[str, Any] = {}


def set_default_device(device: Any) -> Any:
    """Make ``device`` this process's device (None forgets it); returns the previous one."""
    global _chosen
    with _lock:
        previous, _chosen = _chosen, device
    return previous


def default_device() -> Any:
    """The device set by :func:`set_default_device`, or None."""
    return _chosen


def process_device(kind: str, make: Callable[[], Any]) -> Any:
    """The set device if it is of ``kind``, else this process's own one, made once by ``make``."""
    with _lock:
        if _chosen is not None and getattr(_chosen, "kind", None) == kind:
            return _chosen
        device = _made.get(kind)
        if device is None:
            device = _made[kind] = make()
        return device
