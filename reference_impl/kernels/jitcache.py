"""``njit_cached``: numba's on-disk cache, made safe for many processes at once.

Every dask worker is a fresh process, so the CPU kernels are compiled once and then loaded
from numba's cache (``__pycache__`` next to ``cpu.py``, or ``NUMBA_CACHE_DIR``). Numba's
own cache (0.68) needs two fixes for that:

- **Concurrent writers.** Numba saves an entry by reading the function's index, picking the
  first free data-file number and writing index and data, with no lock. Two processes that
  compile *different* signatures of one kernel at once both pick ``.1.nbc``: one index entry
  is lost, or worse, the surviving entry names the other signature's machine code. Here the
  save holds an ``flock`` on one lock file per cache directory and writes the data before
  the index, so a reader sees either no entry or a complete one.
- **Dependencies.** An entry is keyed by the source of the file that defines the kernel, but
  the kernels inline the element functions of ``hashing.py``; an edit there alone would leave
  stale machine code. The source stamp here covers both files.

Without ``fcntl`` (Windows) the save is numba's own, unlocked.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from numba import njit
from numba.core.caching import FunctionCache, IndexDataCacheFile

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None

#: Sources compiled into the cached kernels besides the kernel's own file.
DEPENDENCIES = (Path(__file__).with_name("hashing.py"),)
LOCK_NAME = "reference_impl-kernels.lock"


def _dependency_stamp() -> str:
    h = hashlib.sha256()
    for path in DEPENDENCIES:
        h.update(path.read_bytes())
    return h.hexdigest()


class _LockedCacheFile(IndexDataCacheFile):
    """Index + data files whose save is serialised across processes."""

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        if fcntl is None:
            yield
            return
        fd = os.open(os.path.join(self._cache_path, LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def save(self, key: Any, data: Any) -> None:
        with self._lock():
            overloads = self._load_index()
            name = overloads.get(key)
            if name is None:
                used = set(overloads.values())
                name = next(n for n in map(self._data_name, itertools.count(1)) if n not in used)
            self._save_data(name, data)
            if overloads.get(key) != name:
                overloads[key] = name
                self._save_index(overloads)


class KernelCache(FunctionCache):
    """Numba's per-function cache, with the locked save and the dependencies' stamp."""

    def __init__(self, py_func: Callable) -> None:
        super().__init__(py_func)
        stamp = (self._impl.locator.get_source_stamp(), _dependency_stamp())
        self._cache_file = _LockedCacheFile(self._cache_path, self._impl.filename_base, stamp)


def njit_cached(**options: Any) -> Callable[[Callable], Any]:
    """``numba.njit(cache=True, **options)`` with :class:`KernelCache` as the cache."""

    def wrap(fn: Callable) -> Any:
        disp = njit(**options)(fn)
        disp._cache = KernelCache(disp.py_func)
        return disp

    return wrap
