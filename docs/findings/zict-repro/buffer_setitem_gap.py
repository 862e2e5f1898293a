"""Deterministic: zict 3.0's Buffer.__setitem__ leaves a key in fast AND slow; a deleted value comes back.

Run: python docs/findings/zict-repro/buffer_setitem_gap.py [--control]
Prints CONFIRMED (exit 0) when, after the owner deletes its key, the key is still
in the Buffer and reads back its OLD value; NOT REPRODUCED (exit 1) otherwise.
Needs only zict; no project code.

The mechanism (zict/buffer.py, Buffer.__setitem__, zict 3.0.0):

    def __setitem__(self, key, value):
        with self.lock:
            discard(self.slow, key)        # critical section 1 (Buffer lock)
            ...
        self.fast[key] = value             # critical section 2 (LRU lock), later

and Buffer.fast_to_slow, the LRU's on_evict callback, runs with NO lock
(LRU.evict calls it inside ``with self.unlock()``):

    def fast_to_slow(self, key, value):
        self.slow[key] = value

If another thread is evicting the key's OLD value, its ``slow[key] = old`` can
land after the owner's ``discard(self.slow, key)`` (nothing to discard yet: a
zict.File records the key only when the write is done), and the eviction can
finish (``_cancel_evict[key]`` still False, ``del self.d[key]``) before the
owner's ``self.fast[key] = value`` runs.  Nothing then removes the old copy
from slow: the key is in fast (new) and in slow (old).  Reads return the new
value from fast; ``del buf[key]`` removes only the fast copy
(``try: del self.fast[key] except KeyError: del self.slow[key]``), and the
deleted key is back, with its old value.  ``len(buf)`` counts the key twice.

The hooks (zict's code is not modified):
* the slow mapping is a zict.Func subclass whose ``__setitem__`` (the evictor's
  write) waits until the owner's discard has run, and whose ``__delitem__`` (the
  owner's discard) signals it;
* ``buf.fast`` is given an LRU subclass whose ``__setitem__`` makes the owner
  wait, between its two critical sections, until the eviction has finished.
``--control`` holds the evictor's slow write until the owner's whole
``buf["k"] = "new"`` has returned (the eviction then sees ``_cancel_evict[key]``
set and undoes its slow write): NOT REPRODUCED.
"""

from __future__ import annotations

import pickle
import sys
import tempfile
import threading

import zict
from zict.lru import LRU

TIMEOUT = 10.0


def main(control: bool = False) -> int:
    threads: dict[str, threading.Thread] = {}
    evict_writing = threading.Event()  # the evictor is about to write "k" to slow
    owner_discarded = threading.Event()  # the owner's discard(slow, "k") has run
    evict_done = threading.Event()  # the evictor's eviction of "k" is complete
    owner_set_done = threading.Event()  # the owner's buf["k"] = "new" has returned

    def on(name: str) -> bool:
        return threads.get(name) is threading.current_thread()

    def owner() -> bool:  # the main thread, once the hooks are armed
        return bool(threads) and threading.current_thread() is threading.main_thread()

    class HookedFunc(zict.Func):
        def __setitem__(self, key, value):
            if key == "k" and on("evictor"):
                evict_writing.set()
                (owner_set_done if control else owner_discarded).wait(TIMEOUT)
            super().__setitem__(key, value)

        def __delitem__(self, key):
            try:
                super().__delitem__(key)
            finally:
                if key == "k" and owner():
                    owner_discarded.set()

    class HookedLRU(LRU):
        def __setitem__(self, key, value):
            if key == "k" and owner() and not control:
                # Buffer.__setitem__ has released its lock; the LRU lock is not taken yet.
                evict_done.wait(TIMEOUT)
            super().__setitem__(key, value)

    slow = HookedFunc(pickle.dumps, pickle.loads, zict.File(tempfile.mkdtemp()))
    buf = zict.Buffer({}, slow, n=2, weight=lambda k, v: 1)  # two values fit in fast
    buf.fast.__class__ = HookedLRU
    buf["k"] = "old"  # the owner's key: only the main thread ever writes or deletes "k"
    buf["x"] = "x"

    def other_thread() -> None:
        buf["y"] = "y"  # its own key; over n, so the LRU evicts "k" (the oldest) to slow
        evict_done.set()

    threads["evictor"] = threading.Thread(target=other_thread, name="evictor")
    threads["evictor"].start()
    if not evict_writing.wait(TIMEOUT):
        print("NOT REPRODUCED: the eviction of 'k' never started")
        return 1
    buf["k"] = "new"  # the owner overwrites its own key
    owner_set_done.set()
    threads["evictor"].join(TIMEOUT)

    both = "k" in buf.fast and "k" in buf.slow
    after_set = buf["k"]
    length = len(buf)
    del buf["k"]  # the owner deletes its key
    present = "k" in buf
    try:
        after_del = buf["k"]
    except KeyError:
        after_del = "KeyError"
    state = (
        f"after buf['k'] = 'new': in fast and slow={both}, buf['k'] -> {after_set!r}, "
        f"len(buf)={length} for 3 keys; after del buf['k']: 'k' in buf={present}, "
        f"buf['k'] -> {after_del!r}"
    )
    if present and after_del == "old":
        print(f"CONFIRMED (zict {zict.__version__}): a deleted value came back; {state}")
        return 0
    print(f"NOT REPRODUCED (zict {zict.__version__}): {state}")
    return 1


if __name__ == "__main__":
    sys.exit(main(control="--control" in sys.argv[1:]))
