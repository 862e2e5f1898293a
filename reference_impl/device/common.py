"""Pieces every device backend shares: argument checks and transfer counters."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

import numpy as np


def once(fn: Callable[[], None]) -> Callable[[], None]:
    """``fn`` runs at most once per process, whichever thread calls first: registrations
    with dask's dispatch tables must not be repeated, and importers race on first use."""
    lock = threading.Lock()
    done = False

    @functools.wraps(fn)
    def run_once() -> None:
        nonlocal done
        with lock:
            if done:
                return
            done = True
        fn()

    return run_once


def check_dtype(dtype: Any) -> np.dtype:
    """A fixed-width dtype; object dtypes cannot live in device memory."""
    dtype = np.dtype(dtype)
    if dtype.hasobject:
        raise TypeError(f"dtype {dtype} holds Python objects and cannot live on a device")
    return dtype


def check_shape(shape: Any) -> tuple[int, ...]:
    """A tuple of non-negative ints, with errors that quote what was passed."""
    try:
        dims = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    except TypeError:
        raise TypeError(f"shape entries must be integers, got {shape!r}") from None
    for dim in dims:
        if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
            raise TypeError(f"shape entries must be integers, got {shape!r}")
        if dim < 0:
            raise ValueError(f"negative dimensions are not allowed: {shape!r}")
    return tuple(int(d) for d in dims)


class TransferCounters:
    """Host-to-device and device-to-host byte counters, safe across threads."""

    def __init__(self) -> None:
        self._counter_lock = threading.Lock()
        self._h2d = 0
        self._d2h = 0

    def _count_h2d(self, nbytes: int) -> None:
        with self._counter_lock:
            self._h2d += nbytes

    def _count_d2h(self, nbytes: int) -> None:
        with self._counter_lock:
            self._d2h += nbytes

    @property
    def h2d_bytes(self) -> int:
        return self._h2d

    @property
    def d2h_bytes(self) -> int:
        return self._d2h
